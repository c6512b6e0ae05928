package runtime

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
)

// TestUnchangedSnapshotsAreStoredOnce takes snapshots of one subtask's
// keyed state, whole and incremental: a snapshot of the same bytes as the
// one before names its state and stores nothing; one whose keyed state, or
// only its watermark, changed is stored; and every chain reads back. (An
// incremental snapshot after a change is an empty delta, unlike the delta
// before it, so it is stored once.)
func TestUnchangedSnapshotsAreStoredOnce(t *testing.T) {
	for _, incremental := range []bool{false, true} {
		state := graph.NewTaskState(graph.TaskInfo{Operator: "count", Parallelism: 1}, nil)
		counts, err := graph.NewValueState(state.Context(), "count", graph.Int64Codec{})
		if err != nil {
			t.Fatal(err)
		}
		store := checkpoint.NewMemStore(0)
		tk := &task{id: checkpoint.TaskID{Operator: "count"}, chains: chains{incremental: incremental, maxLen: 10}}
		var id uint64
		snapshot := func() checkpoint.Ack {
			t.Helper()
			id++
			base, chain, inc := tk.chains.next()
			req := snapshotRequest{id: id, frozen: state.Freeze(nil, base, inc), ack: checkpoint.Ack{Task: tk.id, ID: id, Base: chain}}
			tk.chains.took(id, req.frozen.Version())
			ack, err := storeSnapshot(store, tk, req)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range ack.Handles() {
				if _, err := store.ReadState(h); err != nil {
					t.Fatalf("checkpoint %d: %v", id, err)
				}
			}
			tk.chains.completed(id)
			return ack
		}
		// A snapshot stored by checkpoint id is under its id's key.
		stored := func(a checkpoint.Ack) bool {
			return strings.HasPrefix(a.State.Key, fmt.Sprintf("%d/", a.ID)) && a.Stats.StateSize > 0
		}
		state.SetKey("a")
		counts.Set(1)
		first := snapshot()
		if !stored(first) {
			t.Fatalf("incremental %v: the first snapshot was not stored: %+v", incremental, first)
		}
		if incremental {
			if first = snapshot(); !stored(first) {
				t.Fatalf("the first empty delta was not stored: %+v", first)
			}
		}
		again := snapshot()
		if stored(again) || again.State != first.State || len(again.Base) != len(first.Base) {
			t.Fatalf("incremental %v: a snapshot of nothing changed was stored: %+v after %+v", incremental, again, first)
		}
		if _, err := state.AdvanceWatermark(1000, idleOperator{}); err != nil {
			t.Fatal(err)
		}
		moved := snapshot()
		if !stored(moved) {
			t.Fatalf("incremental %v: a snapshot whose watermark moved was not stored: %+v", incremental, moved)
		}
		if again := snapshot(); stored(again) || again.State != moved.State {
			t.Fatalf("incremental %v: the snapshot after it was stored: %+v", incremental, again)
		}
		state.SetKey("b")
		counts.Set(2)
		if changed := snapshot(); !stored(changed) {
			t.Fatalf("incremental %v: a snapshot with a key written was not stored: %+v", incremental, changed)
		}
	}
}

// idleOperator does nothing with what reaches it.
type idleOperator struct{ graph.BaseOperator }

func (idleOperator) ProcessRecord(int, *graph.Record) error { return nil }
