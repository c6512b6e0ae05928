package bench

import (
	"fmt"
	"slices"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/localrecovery"
)

// RestoreConfig sizes the restore scenario.
type RestoreConfig struct {
	// Dir receives the checkpoint store's file; required.
	Dir string
	// Keys is the number of keys in the snapshot; default 100,000.
	Keys int
	// Repeat is how many restores are timed; the median counts. Default 3.
	Repeat int
}

// RestoreResult is the restore of a whole snapshot of one subtask's keyed
// state, beside the time its write took in the same run.
type RestoreResult struct {
	Keys  int   `json:"keys"`
	Bytes int64 `json:"bytes"`
	// RestoreMS is the median time to read, verify, decode and load.
	RestoreMS  float64 `json:"restore_ms"`
	KeysPerSec float64 `json:"keys_per_sec"`
	// WriteMS is the time to freeze, encode and write the snapshot.
	WriteMS float64 `json:"write_ms"`
	// RestoreVsWriteRatio is RestoreMS over WriteMS.
	RestoreVsWriteRatio float64 `json:"restore_vs_write_ratio"`
}

func (*RestoreResult) Scenario() string { return "restore" }

func (r *RestoreResult) Rows() []Row {
	return []Row{
		{"keys", num(float64(r.Keys))},
		{"snapshot size", mb(r.Bytes)},
		{"restore: read + verify + decode + load", fmt.Sprintf("%.1f ms (%s keys/s)", r.RestoreMS, num(r.KeysPerSec))},
		{"write of the same snapshot", fmt.Sprintf("%.1f ms", r.WriteMS)},
		{"restore / write, time", fmt.Sprintf("%.2f", r.RestoreVsWriteRatio)},
	}
}

// Restore writes a whole snapshot of Keys keys and restores it Repeat
// times.
func Restore(cfg RestoreConfig) (*RestoreResult, error) {
	if cfg.Keys <= 0 {
		cfg.Keys = 100_000
	}
	if cfg.Repeat <= 0 {
		cfg.Repeat = 3
	}
	st, store, err := stateAndStore(cfg.Dir, cfg.Keys)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	h, write, err := st.Write(store, 1, false)
	if err != nil {
		return nil, err
	}
	times := make([]time.Duration, cfg.Repeat)
	for i := range times {
		start := time.Now()
		if err := RestoreState(store, h, cfg.Keys); err != nil {
			return nil, err
		}
		times[i] = time.Since(start)
	}
	slices.Sort(times)
	res := &RestoreResult{Keys: cfg.Keys, Bytes: h.Size, RestoreMS: ms(times[len(times)/2]), WriteMS: ms(write)}
	res.KeysPerSec = perSec(cfg.Keys, times[len(times)/2])
	res.RestoreVsWriteRatio = ratio(res.RestoreMS, res.WriteMS)
	return res, nil
}

// RestoreState reads the snapshot of h from store, verifies and decodes
// it, and loads it into a fresh State's keyed state; it fails unless the
// last of keys keys, unchanged since NewState, holds its value.
func RestoreState(store *localrecovery.Store, h checkpoint.StateHandle, keys int) error {
	data, err := store.ReadState(h)
	if err != nil {
		return err
	}
	snap, err := graph.DecodeSubtaskSnapshot(data, graph.KeyGroupRange{Start: 0, End: graph.DefaultMaxParallelism})
	if err != nil {
		return err
	}
	r := graph.NewTaskState(graph.TaskInfo{Operator: Task.Operator, Parallelism: 1}, discard{})
	r.Restore([]*graph.SubtaskSnapshot{snap})
	sum, err := graph.NewValueState(r.Context(), "sum", graph.Float64Codec{})
	if err != nil {
		return err
	}
	r.SetKey(KeyName(keys - 1))
	if v, ok := sum.Get(); !ok || v != float64(keys-1) {
		return fmt.Errorf("restored %s = %v (%v), want %d", KeyName(keys-1), v, ok, keys-1)
	}
	return nil
}
