package bench

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/localrecovery"
)

// SnapshotConfig sizes the snapshot scenario.
type SnapshotConfig struct {
	// Dir receives the checkpoint store's file; required.
	Dir string
	// Keys is the number of keys in the state; default 100,000.
	Keys int
	// Changed is the fraction of keys changed (a tenth of those deleted)
	// between the whole and the incremental snapshot; default 0.01.
	Changed float64
}

// SnapshotResult compares a whole and an incremental snapshot of one
// subtask's keyed state, each frozen, encoded and written to a
// localrecovery store with its checkpoint's completion (synced).
type SnapshotResult struct {
	Keys        int     `json:"keys"`
	ChangedKeys int     `json:"changed_keys"`
	FullMS      float64 `json:"full_ms"`
	FullBytes   int64   `json:"full_bytes"`
	// IncrementalMS and IncrementalBytes are for the changes since the
	// whole snapshot.
	IncrementalMS    float64 `json:"incremental_ms"`
	IncrementalBytes int64   `json:"incremental_bytes"`
	// IncrementalVsFullRatio is the incremental size over the whole size;
	// IncrementalVsFullTimeRatio the same for the time.
	IncrementalVsFullRatio     float64 `json:"incremental_vs_full_ratio"`
	IncrementalVsFullTimeRatio float64 `json:"incremental_vs_full_time_ratio"`
}

func (*SnapshotResult) Scenario() string { return "snapshot" }

func (r *SnapshotResult) Rows() []Row {
	return []Row{
		{"keys", num(float64(r.Keys))},
		{"whole snapshot: freeze + encode + write + completion (synced)", fmt.Sprintf("%.1f ms, %s", r.FullMS, mb(r.FullBytes))},
		{fmt.Sprintf("incremental, %s keys changed", num(float64(r.ChangedKeys))), fmt.Sprintf("%.1f ms, %s", r.IncrementalMS, mb(r.IncrementalBytes))},
		{"incremental / whole, size", fmt.Sprintf("%.4f", r.IncrementalVsFullRatio)},
		{"incremental / whole, time", fmt.Sprintf("%.4f", r.IncrementalVsFullTimeRatio)},
	}
}

// Snapshot writes a whole snapshot of Keys keys, changes some, and writes
// an incremental one.
func Snapshot(cfg SnapshotConfig) (*SnapshotResult, error) {
	if cfg.Keys <= 0 {
		cfg.Keys = 100_000
	}
	if cfg.Changed <= 0 {
		cfg.Changed = 0.01
	}
	st, store, err := stateAndStore(cfg.Dir, cfg.Keys)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	res := &SnapshotResult{Keys: cfg.Keys, ChangedKeys: max(1, int(float64(cfg.Keys)*cfg.Changed))}
	full, d, err := st.Write(store, 1, false)
	if err != nil {
		return nil, err
	}
	res.FullMS, res.FullBytes = ms(d), full.Size
	st.Change(res.ChangedKeys, 1)
	inc, d, err := st.Write(store, 2, true)
	if err != nil {
		return nil, err
	}
	res.IncrementalMS, res.IncrementalBytes = ms(d), inc.Size
	res.IncrementalVsFullRatio = ratio(float64(inc.Size), float64(full.Size))
	res.IncrementalVsFullTimeRatio = ratio(res.IncrementalMS, res.FullMS)
	return res, nil
}

// stateAndStore returns a State of keys keys and a new local store in dir,
// which the caller closes.
func stateAndStore(dir string, keys int) (*State, *localrecovery.Store, error) {
	st, err := NewState(keys)
	if err != nil {
		return nil, nil, err
	}
	store, err := localrecovery.Open(filepath.Join(dir, "checkpoints.db"), localrecovery.Options{})
	return st, store, err
}

// Task is the subtask whose state State's snapshots are.
var Task = checkpoint.TaskID{Operator: "sums", Subtask: 0}

// State is the keyed state of one subtask of a keyed sum, with a value
// for each of its keys: key i is KeyName(i) and holds float64(i) until
// changed. It is not safe for concurrent use.
type State struct {
	keys  int
	state *graph.TaskState
	sum   *graph.ValueState[float64]
	base  graph.Version // of the last snapshot
	// chain are the handles of the snapshots an incremental one is on
	// top of, the whole one first.
	chain []checkpoint.StateHandle
}

// NewState returns a state holding keys keys.
func NewState(keys int) (*State, error) {
	s := &State{keys: keys, state: graph.NewTaskState(graph.TaskInfo{Operator: Task.Operator, Parallelism: 1}, discard{})}
	var err error
	if s.sum, err = graph.NewValueState(s.state.Context(), "sum", graph.Float64Codec{}); err != nil {
		return nil, err
	}
	for i := range keys {
		s.state.SetKey(KeyName(i))
		s.sum.Set(float64(i))
	}
	return s, nil
}

// KeyName is the name of key i.
func KeyName(i int) string { return fmt.Sprintf("device-%07d", i) }

// Snapshot freezes and encodes the state: all of it, or with incremental
// only what changed since the previous snapshot.
func (s *State) Snapshot(incremental bool) []byte {
	f := s.state.Freeze(nil, s.base, incremental)
	s.base = f.Version()
	return f.Encode()
}

// Write snapshots the state as the runtime does, freezing it and then
// encoding it while store takes it in, as checkpoint id's state of Task,
// and completes checkpoint id, whose snapshot it is: whole, or with
// incremental the changes since the previous one, on top of the chain
// of those before. It returns the handle and the time it all took, the
// completion's write and sync included.
func (s *State) Write(store *localrecovery.Store, id uint64, incremental bool) (checkpoint.StateHandle, time.Duration, error) {
	start := time.Now()
	f := s.state.Freeze(nil, s.base, incremental)
	s.base = f.Version()
	h, err := store.PutState(id, Task, f.Parts())
	if err != nil {
		return h, 0, err
	}
	if !incremental {
		s.chain = nil
	}
	m := &checkpoint.Manifest{ID: id, Subtasks: []checkpoint.Ack{{Task: Task, ID: id, State: h, Base: s.chain}}}
	if err := store.Complete(m); err != nil {
		return h, 0, err
	}
	s.chain = append(s.chain, h)
	return h, time.Since(start), nil
}

// Change sets n keys, spread over the state, to round, deleting every
// tenth of them.
func (s *State) Change(n, round int) {
	for k := range n {
		s.state.SetKey(KeyName((k*97 + round) % s.keys))
		if k%10 == 0 {
			s.sum.Delete()
		} else {
			s.sum.Set(float64(round))
		}
	}
}

type discard struct{}

func (discard) Emit(*graph.Record) {}
