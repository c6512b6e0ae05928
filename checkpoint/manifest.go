package checkpoint

import (
	"slices"
	"time"
)

// StateHandle locates one subtask's snapshot in a Store and says how to
// verify it (invariant I9).
type StateHandle struct {
	// Key is the store's name for the data.
	Key string `json:"key"`
	// Size is the length of the data in bytes.
	Size int64 `json:"size"`
	// CRC32C is the Castagnoli CRC-32 of the data.
	CRC32C uint32 `json:"crc32c"`
}

// SubtaskStats are one subtask's figures for one checkpoint, as Flink
// reports them.
type SubtaskStats struct {
	// StartDelay is from the trigger to the first barrier at the subtask.
	StartDelay time.Duration `json:"start_delay"`
	// Alignment is from the first barrier to the snapshot.
	Alignment time.Duration `json:"alignment"`
	// BufferedRecords and BufferedBytes were held back on blocked channels
	// during alignment; bytes are estimated from the records' keys and
	// fixed-size fields.
	BufferedRecords int64 `json:"buffered_records"`
	BufferedBytes   int64 `json:"buffered_bytes"`
	// Sync and Async are the durations of the snapshot's two phases.
	Sync  time.Duration `json:"sync"`
	Async time.Duration `json:"async"`
	// StateSize is the size of the stored snapshot in bytes.
	StateSize int64 `json:"state_size"`
	// Unaligned: the snapshot was taken before every barrier arrived, and
	// TimedOut: because the alignment timed out.
	Unaligned bool `json:"unaligned,omitempty"`
	TimedOut  bool `json:"timed_out,omitempty"`
	// InFlightRecords and InFlightBytes are the channel state persisted
	// with an unaligned snapshot (bytes as stored).
	InFlightRecords int64 `json:"in_flight_records,omitempty"`
	InFlightBytes   int64 `json:"in_flight_bytes,omitempty"`
}

// Ack is a subtask's acknowledgement that its snapshot for a checkpoint is
// durable.
type Ack struct {
	Task TaskID `json:"task"`
	ID   uint64 `json:"id"`
	// State is where the snapshot is stored.
	State StateHandle `json:"state"`
	// Base, for an incremental snapshot, is the chain it applies on top of,
	// oldest (a whole snapshot) first; empty for a whole snapshot.
	Base []StateHandle `json:"base,omitempty"`
	// InFlight, for an unaligned snapshot with channel state, is where the
	// records in flight at the snapshot are stored.
	InFlight *StateHandle `json:"in_flight,omitempty"`
	// Source is set by source subtasks: Offset is where to resume reading.
	Source bool   `json:"source,omitempty"`
	Offset uint64 `json:"offset,omitempty"`
	// MaxParallelism is the operator's number of key groups: keyed state
	// restores only under the same number.
	MaxParallelism int `json:"max_parallelism,omitempty"`
	// Watermark is the subtask's watermark at the snapshot.
	Watermark int64        `json:"watermark"`
	Stats     SubtaskStats `json:"stats"`
}

// Handles returns every stored blob the acknowledgement references: its
// incremental chain's bases, oldest first, its own state, then its channel
// state if it has any.
func (a *Ack) Handles() []StateHandle {
	hs := append(slices.Clone(a.Base), a.State)
	if a.InFlight != nil {
		hs = append(hs, *a.InFlight)
	}
	return hs
}

// InFlightTask is the name under which task's channel state is stored
// (Store.PutState), apart from its snapshot.
func InFlightTask(task TaskID) TaskID {
	return TaskID{Operator: task.Operator + "/in-flight", Subtask: task.Subtask}
}

// Manifest describes a checkpoint: everything a restore needs to find and
// verify its state. Its completion record is the durable proof that the
// checkpoint is complete.
type Manifest struct {
	ID   uint64 `json:"id"`
	Mode Mode   `json:"mode"`
	// Triggered is the trigger time on the job's monotonic clock, and
	// Duration the time from trigger to the last acknowledgement.
	Triggered time.Duration `json:"triggered"`
	Duration  time.Duration `json:"duration"`
	// Subtasks holds every subtask's acknowledgement, sorted by task.
	Subtasks []Ack `json:"subtasks"`
	// SameAs, when set, is the completed checkpoint this one changed
	// nothing since (SameState): it completed without a completion record
	// of its own, and a restore finds SameAs instead, which holds the same
	// state and offsets.
	SameAs uint64 `json:"same_as,omitempty"`
}

// SameState reports whether restoring a and restoring b come to the same:
// the same mode, and every subtask the same stored state (handles, chain,
// no channel state), offset, watermark and key groups. Statistics, ids and
// times may differ.
func SameState(a, b *Manifest) bool {
	if a.Mode != b.Mode || len(a.Subtasks) != len(b.Subtasks) {
		return false
	}
	for i := range a.Subtasks {
		x, y := &a.Subtasks[i], &b.Subtasks[i]
		if x.Task != y.Task || x.State != y.State || !slices.Equal(x.Base, y.Base) || x.InFlight != nil || y.InFlight != nil ||
			x.Source != y.Source || x.Offset != y.Offset || x.MaxParallelism != y.MaxParallelism || x.Watermark != y.Watermark {
			return false
		}
	}
	return true
}

// Operators returns the ids of the operators whose subtasks m holds, in
// order of first appearance.
func (m *Manifest) Operators() []string {
	var ids []string
	for _, a := range m.Subtasks {
		if !slices.Contains(ids, a.Task.Operator) {
			ids = append(ids, a.Task.Operator)
		}
	}
	return ids
}

// Subtask returns the acknowledgement of task, or nil.
func (m *Manifest) Subtask(task TaskID) *Ack {
	i, ok := slices.BinarySearchFunc(m.Subtasks, task, func(a Ack, t TaskID) int { return a.Task.Compare(t) })
	if !ok {
		return nil
	}
	return &m.Subtasks[i]
}
