package graph

import (
	"errors"
	"math"
)

// MaxWatermark is the watermark that ends event time: it is emitted when all
// inputs have ended, and fires every remaining timer.
const MaxWatermark = math.MaxInt64

// MinWatermark is the watermark before any has been seen.
const MinWatermark = math.MinInt64

// Operator is one step of a pipeline. The runtime creates one Operator per
// subtask and calls its methods from a single goroutine, in this order:
// Open; RestoreState if the job is restoring; then any number of
// ProcessRecord, OnTimer, OnWatermark and SnapshotState calls; Close.
//
// An error returned by any method fails the job, with the operator and
// subtask named in the cause, unless ProcessRecord returns a RecordError:
// then the record is at fault, not the operator, and the runtime hands it
// to the job's handler of rejected records (runtime.Options.OnRejected).
type Operator interface {
	// Open prepares the subtask. Keyed state handles are created here, with
	// ctx, which stays valid until Close.
	Open(ctx *Context) error
	// ProcessRecord handles one record from logical input input (0 for a
	// single-input operator; 0 or 1 for a two-input one). r is valid only for
	// the call: copy what must outlive it. The current key is r.Key.
	ProcessRecord(input int, r *Record) error
	// OnTimer handles an event-time timer registered for the current key that
	// the watermark has passed.
	OnTimer(timestamp int64) error
	// OnWatermark is called after the timers up to wm have fired.
	OnWatermark(wm int64) error
	// SnapshotState returns the subtask's non-keyed state for checkpoint id.
	// It runs in the synchronous phase of the snapshot, so it must be quick,
	// and the bytes must not be modified afterwards. Keyed state and timers
	// are snapshotted by the runtime and need no code here.
	SnapshotState(checkpointID uint64) ([]byte, error)
	// RestoreState hands back what SnapshotState returned, after Open and
	// before the first record.
	RestoreState(data []byte) error
	// Close releases resources. It is called once, also when the job fails.
	Close() error
}

// RescalableState is implemented by operators whose non-keyed state can be
// split among another number of subtasks, like Flink's union list state.
// After a restore with a changed parallelism p, subtask i is handed, instead
// of RestoreState, the states of the old subtasks j with j mod p == i, in
// order of j (none, when it has no such old subtask). An operator with
// non-keyed state that does not implement it cannot change its parallelism.
type RescalableState interface {
	RestoreStates(states [][]byte) error
}

// StateParts is implemented by operators whose non-keyed state is large and
// held already encoded, in pieces that are never modified: the runtime then
// calls SnapshotStateParts instead of SnapshotState, and the snapshot is
// written from the pieces without copying them into one. RestoreState gets
// their concatenation.
type StateParts interface {
	SnapshotStateParts(checkpointID uint64) ([][]byte, error)
}

// ProcessingTimeOperator is implemented by operators that register
// processing-time timers.
type ProcessingTimeOperator interface {
	// OnProcessingTimer handles a processing-time timer registered for the
	// current key whose time has come.
	OnProcessingTimer(timestamp int64) error
}

// CheckpointListener is implemented by operators and sources that act on the
// outcome of a checkpoint: a sink publishes what it staged, a durable source
// truncates its log (invariant I4: only on completion).
type CheckpointListener interface {
	// CheckpointComplete says that checkpoint id and, by subsumption, every
	// earlier one is complete. Notices may be lost, so it must cover all
	// earlier ids too (invariant I7).
	CheckpointComplete(id uint64) error
	// CheckpointAborted says that checkpoint id will never complete.
	CheckpointAborted(id uint64)
}

// BaseOperator gives an Operator's methods do-nothing defaults; embed it and
// override what the operator needs.
type BaseOperator struct{}

func (BaseOperator) Open(*Context) error                  { return nil }
func (BaseOperator) OnTimer(int64) error                  { return nil }
func (BaseOperator) OnWatermark(int64) error              { return nil }
func (BaseOperator) SnapshotState(uint64) ([]byte, error) { return nil, nil }
func (BaseOperator) RestoreState([]byte) error            { return nil }
func (BaseOperator) Close() error                         { return nil }

// Source reads a replayable input. The runtime runs one Source per source
// subtask, from a single goroutine.
type Source interface {
	// Open positions the source so that the next record read is the one at
	// offset (0: the beginning).
	Open(ctx *Context, offset uint64) error
	// Read copies available records into buf and returns how many. It must
	// not block for long: when nothing is available it returns 0 and the
	// runtime waits on Ready. It returns io.EOF once the input has ended.
	Read(buf []Record) (int, error)
	// Offset is the position after the last record returned by Read. Opening
	// at Offset resumes with the next record; checkpoints record it.
	Offset() uint64
	// Ready returns a channel that receives when Read may have records again,
	// or nil if Read never returns 0 before io.EOF.
	Ready() <-chan struct{}
	// Close releases resources.
	Close() error
}

// OffsetCommitter is implemented by sources that can forget input. After a
// checkpoint completes, CommitOffset says that the input before offset is
// reflected in completed state and will never be read again: a durable log
// may truncate it (invariant I4).
type OffsetCommitter interface {
	CommitOffset(offset uint64) error
}

// Output receives the records an operator emits. The runtime implements it;
// the record is copied before Emit returns.
type Output interface {
	Emit(r *Record)
}

// Rejecter is an Output that also takes the records an operator rejects
// outside ProcessRecord (Context.Reject). The runtime implements it.
type Rejecter interface {
	// Reject hands r, rejected for err, to the job's handler of rejected
	// records; an error it returns fails the job.
	Reject(r *Record, err error) error
}

// TaskInfo identifies a subtask.
type TaskInfo struct {
	Operator       string
	Subtask        int
	Parallelism    int
	MaxParallelism int
	// OrderedInput says a replay from a checkpoint brings the subtask the
	// same records in the same order as the first time: the job is not
	// at-least-once (which replays what a checkpoint covered), and the
	// subtask and every one upstream of it, to the sources, has one input
	// channel, so no interleaving of channels can differ. It holds as far
	// as the sources replay their input in order from an offset and the
	// operators on the way are functions of their input (processing-time
	// timers are not).
	OrderedInput bool
	// RestoredElsewhere says the subtask's state was restored from another
	// store than the job's (a savepoint, remote storage): a source's log
	// may rightly hold nothing of the offsets restored.
	RestoredElsewhere bool
}

// RecordError is an error of ProcessRecord that rejects the record it was
// given, and only that record: the operator emitted nothing for it,
// changed no state, and processes the next one as if it never came (a
// reading without the field an expression uses, say). Any other error says
// the operator itself can go no further.
type RecordError struct{ Err error }

func (e *RecordError) Error() string { return e.Err.Error() }
func (e *RecordError) Unwrap() error { return e.Err }

// Reject returns err as a RecordError.
func Reject(err error) error { return &RecordError{Err: err} }

// ErrNoKey is the cause of a job failure when an operator used keyed state or
// a keyed timer while processing a record of an input that is not
// hash-partitioned (TaskState.SetUnkeyed): the operator is wired wrongly.
// No record can cause it: every key, the empty one too, is a key.
var ErrNoKey = errors.New("keyed state used without a current key (is the input hash-partitioned?)")

// ErrForeignKey is the cause of a job failure when a record reached a subtask
// that does not own its key group.
var ErrForeignKey = errors.New("record's key belongs to another subtask's key groups")

// Context is an operator's view of its subtask: identity, output, the current
// key, keyed state, timers and the watermark. It is not safe for concurrent
// use; it belongs to the subtask's goroutine.
type Context struct {
	info   TaskInfo
	groups KeyGroupRange
	out    Output

	key     string
	keyed   bool    // key scopes keyed state: the record came by a hash edge, or a timer fired
	keySlot int     // the key's shard index in state tables, -1 if not yet computed
	keyHash uint64  // keyHash(key), once keySlot is computed
	version Version // the version that writes now belong to

	tables  []keyedTable
	pending map[string]map[int]*TableSnapshot // restored, awaiting registration

	timers     timerQueue // event time
	procTimers timerQueue // processing time
	watermark  int64
	procTime   int64 // processing time in ms, as last told by the runtime

	err error // first keyed-access error; the runtime fails the job with it
}

// Info identifies the subtask.
func (c *Context) Info() TaskInfo { return c.info }

// KeyGroups is the range of key groups this subtask owns.
func (c *Context) KeyGroups() KeyGroupRange { return c.groups }

// Emit sends r downstream.
func (c *Context) Emit(r *Record) { c.out.Emit(r) }

// Reject rejects r for err as a RecordError of ProcessRecord rejects the
// record it was given, for a record the operator holds rather than one it
// is given: one a sink restored in its state and cannot publish, say. The
// runtime counts it and hands it to the job's handler of rejected records
// (runtime.Options.OnRejected). A non-nil result must fail the job: the
// handler said so (on_error: fail), or there is none (then it is err).
func (c *Context) Reject(r *Record, err error) error {
	if rj, ok := c.out.(Rejecter); ok {
		return rj.Reject(r, err)
	}
	return err
}

// CurrentKey is the key of the record or timer being processed.
func (c *Context) CurrentKey() string { return c.key }

// Watermark is the subtask's current event-time watermark.
func (c *Context) Watermark() int64 { return c.watermark }

// RegisterEventTimer asks for OnTimer(timestamp) with the current key once
// the watermark reaches timestamp. Registering the same key and timestamp
// twice fires once.
func (c *Context) RegisterEventTimer(timestamp int64) {
	if c.slot() < 0 {
		return
	}
	c.timers.add(Timer{Key: c.key, Time: timestamp})
}

// DeleteEventTimer cancels a timer registered for the current key.
func (c *Context) DeleteEventTimer(timestamp int64) {
	c.timers.remove(Timer{Key: c.key, Time: timestamp})
}

// ProcessingTime is the wall-clock time in milliseconds since the epoch, as
// of the call the operator is in.
func (c *Context) ProcessingTime() int64 { return c.procTime }

// RegisterProcessingTimer asks for OnProcessingTimer(timestamp) with the
// current key once the wall clock reaches timestamp (milliseconds since the
// epoch). The operator must implement ProcessingTimeOperator.
func (c *Context) RegisterProcessingTimer(timestamp int64) {
	if c.slot() < 0 {
		return
	}
	c.procTimers.add(Timer{Key: c.key, Time: timestamp})
}

// slot returns the index of the current key's shard in state tables (group
// index in c.groups times shardsPerGroup, plus shard), or -1 after recording
// why there is none.
func (c *Context) slot() int {
	if c.keySlot >= 0 {
		return c.keySlot
	}
	if !c.keyed {
		c.fail(ErrNoKey)
		return -1
	}
	h := keyHash(c.key)
	kg := int(h % uint64(c.info.MaxParallelism))
	if !c.groups.Contains(kg) {
		c.fail(ErrForeignKey)
		return -1
	}
	c.keySlot = (kg-c.groups.Start)*shardsPerGroup + int(h>>60)
	c.keyHash = h
	return c.keySlot
}

func (c *Context) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}
