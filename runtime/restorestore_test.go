package runtime

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/localrecovery"
)

// TestIncrementalAfterRestoreFromAnotherStore restores a checkpoint from a
// store that is not the job's (a savepoint, remote storage) with
// incremental checkpoints on: the first new snapshot of each subtask is
// whole, since the restored chain's blobs are not in the job's store, and
// checkpoints complete.
func TestIncrementalAfterRestoreFromAnotherStore(t *testing.T) {
	recs := keyedRecords(2_000, 20)
	newSrc := func(gate chan struct{}, atGate chan int) func(int) graph.Source {
		return func(int) graph.Source { return &gatedSource{records: recs, gate: 1_000, open: gate, atGate: atGate} }
	}
	m, elsewhere := checkpointAtGate(t, func(src func(int) graph.Source) *graph.Topology {
		return countTopology(t, src, &latestSink{last: map[string]float64{}})
	})

	gate, atGate := make(chan struct{}), make(chan int, 2)
	local := checkpoint.NewMemStore(3)
	cfg := checkpoint.DefaultConfig()
	cfg.Interval = 0
	sink := &latestSink{last: map[string]float64{}}
	completed := make(chan *checkpoint.Manifest, 2)
	job, err := New(countTopology(t, newSrc(gate, atGate), sink), Options{Checkpoints: cfg, Store: local,
		Restore: []localrecovery.Candidate{{Manifest: m, Store: elsewhere}}, Incremental: true,
		OnComplete: func(m *checkpoint.Manifest) { completed <- m }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- job.Run(ctx) }()
	<-atGate
	<-atGate
	for range 2 {
		id, err := job.TriggerCheckpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-completed:
			if got.ID != id {
				t.Fatalf("completed %d, triggered %d", got.ID, id)
			}
			for _, a := range got.Subtasks {
				if a.Task.Operator == "count" && (len(a.Base) == 0) != (id == m.ID+1) {
					t.Fatalf("checkpoint %d: %s has base %v; want whole the first time, incremental on it then", id, a.Task, a.Base)
				}
			}
		case err := <-ran:
			t.Fatalf("job ended before checkpoint %d completed: %v", id, err)
		}
	}
	close(gate)
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	equalCounts(t, sink.snapshot(), expectedCounts(recs))
}

// unreachableStore fails every read as a network would, not as damage.
type unreachableStore struct {
	checkpoint.Store
	reads int
}

var errUnreachable = errors.New("dial tcp 10.0.0.9:443: i/o timeout")

func (s *unreachableStore) ReadState(checkpoint.StateHandle) ([]byte, error) {
	s.reads++
	return nil, errUnreachable
}

// TestRestoreFallsBackOnlyPastDamage: a checkpoint that cannot be read
// for a reason other than damage fails the restore, rather than restore
// an older checkpoint's older state.
func TestRestoreFallsBackOnlyPastDamage(t *testing.T) {
	recs := keyedRecords(2_000, 20)
	m, elsewhere := checkpointAtGate(t, func(src func(int) graph.Source) *graph.Topology {
		return countTopology(t, src, &latestSink{last: map[string]float64{}})
	})
	from := &unreachableStore{Store: elsewhere}
	src := func(int) graph.Source { return &gatedSource{records: recs, gate: 1_000} }
	job, err := New(countTopology(t, src, &latestSink{last: map[string]float64{}}), Options{Checkpoints: checkpoint.DefaultConfig(),
		Store: checkpoint.NewMemStore(3), Restore: localrecovery.Candidates(from, []*checkpoint.Manifest{m, m})})
	if err != nil {
		t.Fatal(err)
	}
	err = job.Run(t.Context())
	if !errors.Is(err, errUnreachable) || from.reads != 1 {
		t.Fatalf("Run: %v after %d reads; want the read's error, and no older checkpoint tried", err, from.reads)
	}
}

// damagedStore fails every read as damage does.
type damagedStore struct{ checkpoint.Store }

func (damagedStore) ReadState(h checkpoint.StateHandle) ([]byte, error) {
	return nil, fmt.Errorf("%w: %s", checkpoint.ErrCorrupt, h.Key)
}

// TestNothingRestored: when every checkpoint fails verification, Run's
// error says so (ErrNothingRestored) after trying each.
func TestNothingRestored(t *testing.T) {
	recs := keyedRecords(2_000, 20)
	m, elsewhere := checkpointAtGate(t, func(src func(int) graph.Source) *graph.Topology {
		return countTopology(t, src, &latestSink{last: map[string]float64{}})
	})
	src := func(int) graph.Source { return &gatedSource{records: recs, gate: 1_000} }
	job, err := New(countTopology(t, src, &latestSink{last: map[string]float64{}}), Options{Checkpoints: checkpoint.DefaultConfig(),
		Store: checkpoint.NewMemStore(3), Restore: localrecovery.Candidates(damagedStore{elsewhere}, []*checkpoint.Manifest{m, m})})
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Run(t.Context()); !errors.Is(err, localrecovery.ErrNothingRestored) || !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("Run: %v; want ErrNothingRestored wrapping the damage", err)
	}
}
