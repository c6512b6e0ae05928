package localrecovery_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/localrecovery"
	"github.com/cairn-edge/cairn/runtime"
)

// counting counts the reads of each blob of the store it wraps, by key;
// the keys in damaged fail as damage does.
type counting struct {
	checkpoint.Store
	name    string
	damaged map[string]bool
	mu      sync.Mutex
	reads   map[string]int
}

func newCounting(store checkpoint.Store, name string) *counting {
	return &counting{Store: store, name: name, damaged: map[string]bool{}, reads: map[string]int{}}
}

func (c *counting) Name() string { return c.name }

func (c *counting) ReadState(h checkpoint.StateHandle) ([]byte, error) {
	c.mu.Lock()
	c.reads[h.Key]++
	c.mu.Unlock()
	if c.damaged[h.Key] {
		return nil, fmt.Errorf("%w: %s", checkpoint.ErrCorrupt, h.Key)
	}
	return c.Store.ReadState(h)
}

// stepSource emits its records up to a limit the test raises, and says
// when it has reached it.
type stepSource struct {
	records []graph.Record
	next    int
	limit   *atomic.Int64
	ready   chan struct{}
	reached chan<- struct{}
}

func (s *stepSource) Open(_ *graph.Context, offset uint64) error { s.next = int(offset); return nil }
func (s *stepSource) Offset() uint64                             { return uint64(s.next) }
func (s *stepSource) Ready() <-chan struct{}                     { return s.ready }
func (s *stepSource) Close() error                               { return nil }

func (s *stepSource) Read(buf []graph.Record) (int, error) {
	limit := min(int(s.limit.Load()), len(s.records))
	n := copy(buf, s.records[min(s.next, limit):limit])
	s.next += n
	if n > 0 && s.next == limit {
		s.reached <- struct{}{}
	}
	return n, nil
}

// topology is a source of keyed readings counted by key in two subtasks;
// the source emits up to limit.
func topology(t *testing.T, limit *atomic.Int64, ready chan struct{}, reached chan<- struct{}) *graph.Topology {
	var records []graph.Record
	for i := range 2_000 {
		records = append(records, graph.Record{Key: fmt.Sprintf("k%d", i%20), Value: 1})
	}
	var b graph.Builder
	src := b.Source("src", 1, func(int) graph.Source {
		return &stepSource{records: records, limit: limit, ready: ready, reached: reached}
	})
	b.Operator("count", 2, graph.Count(), []graph.Input{graph.In(src, graph.Hash(nil))})
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// checkpoints runs the topology into a store and completes two
// checkpoints, with input counted between them, and returns the store.
func checkpoints(t *testing.T) *checkpoint.MemStore {
	t.Helper()
	store := checkpoint.NewMemStore(0)
	limit, ready, reached := new(atomic.Int64), make(chan struct{}, 1), make(chan struct{}, 1)
	cfg := checkpoint.DefaultConfig()
	cfg.Interval = 0
	completed := make(chan *checkpoint.Manifest, 1)
	job, err := runtime.New(topology(t, limit, ready, reached), runtime.Options{Checkpoints: cfg, Store: store,
		Logger: slog.New(slog.DiscardHandler), OnComplete: func(m *checkpoint.Manifest) { completed <- m }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- job.Run(ctx) }()
	for _, n := range []int64{1_000, 2_000} {
		limit.Store(n)
		ready <- struct{}{}
		<-reached
		if _, err := job.TriggerCheckpoint(ctx); err != nil {
			t.Fatal(err)
		}
		<-completed
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	return store
}

// TestEachBlobReadOnce: what a restore reads to verify a checkpoint is
// what the runtime restores, so that each blob of the restored checkpoint
// is read once, on a local restore, a remote one, one from a savepoint
// and one that accepts lost state (the newest checkpoint damaged).
func TestEachBlobReadOnce(t *testing.T) {
	for _, from := range []string{"local", "remote", "savepoint", "accepting lost state"} {
		t.Run(from, func(t *testing.T) {
			stored := newCounting(checkpoints(t), "gw-a")
			ms, err := stored.Completed()
			if err != nil || len(ms) != 2 {
				t.Fatalf("completed checkpoints: %d, %v; want 2", len(ms), err)
			}
			want := ms[0]
			local := checkpoint.Store(stored)
			s := localrecovery.Sources{Local: stored, Logger: slog.New(slog.DiscardHandler)}
			switch from {
			case "remote":
				local = checkpoint.NewMemStore(3)
				s.Local, s.Own, s.From = local, stored, stored
			case "savepoint":
				local = checkpoint.NewMemStore(3)
				s.Local, s.Savepoint = local, &localrecovery.Candidate{Manifest: want, Store: stored}
			case "accepting lost state":
				damaged := ms[0].Subtasks[0].State // the first blob read
				for _, a := range ms[1].Subtasks {
					for _, h := range a.Handles() {
						if h.Key == damaged.Key {
							t.Fatalf("both checkpoints hold %s", h.Key)
						}
					}
				}
				stored.damaged[damaged.Key] = true
				s.AcceptStateLoss, want = true, ms[1]
			}
			choice, err := localrecovery.Choose(s)
			if err != nil {
				t.Fatal(err)
			}
			limit := new(atomic.Int64)
			job, err := runtime.New(topology(t, limit, make(chan struct{}), make(chan struct{}, 1)), runtime.Options{
				Checkpoints: checkpoint.DefaultConfig(), Store: local, Restore: choice.Candidates, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // restore, then stop
			if err := job.Run(ctx); err != nil {
				t.Fatal(err)
			}
			if m := job.RestoredFrom(); m == nil || m.ID != want.ID {
				t.Fatalf("restored %v, want checkpoint %d", m, want.ID)
			}
			for _, a := range want.Subtasks {
				for _, h := range a.Handles() {
					if n := stored.reads[h.Key]; n != 1 {
						t.Errorf("%s of checkpoint %d read %d times, want once", h.Key, want.ID, n)
					}
				}
			}
		})
	}
}
