package localrecovery_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/localrecovery"
	"github.com/cairn-edge/cairn/runtime"
)

// progress counts the records that reach it and tells when more have.
type progress struct {
	graph.BaseOperator
	mu      sync.Mutex
	n       int64
	waiters map[int64]chan struct{}
}

func (p *progress) ProcessRecord(int, *graph.Record) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if ch, ok := p.waiters[p.n]; ok {
		close(ch)
		delete(p.waiters, p.n)
	}
	return nil
}

// more returns a channel closed once n more records have arrived.
func (p *progress) more(n int64) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := make(chan struct{})
	if p.waiters == nil {
		p.waiters = make(map[int64]chan struct{})
	}
	p.waiters[p.n+n] = ch
	return ch
}

// TestFullDiskFailsCheckpointsNotThePipeline injects ENOSPC into the store:
// checkpoints fail while it lasts, records keep flowing, and the next
// checkpoint after space returns completes.
func TestFullDiskFailsCheckpointsNotThePipeline(t *testing.T) {
	var full atomic.Bool
	store, err := localrecovery.Open(filepath.Join(t.TempDir(), "c.db"), localrecovery.Options{
		WriteFault: func() error {
			if full.Load() {
				return syscall.ENOSPC
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	sink := &progress{}
	var b graph.Builder
	src := b.Source("src", 1, func(int) graph.Source { return &cycleKeys{keys: 1000} })
	sums := b.Operator("sums", 2, graph.Sum(), []graph.Input{graph.In(src, graph.Hash(nil))})
	b.Operator("sink", 1, func(int) graph.Operator { return sink }, []graph.Input{graph.In(sums, graph.Rebalance())})
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := checkpoint.DefaultConfig()
	cfg.Interval = 5 * time.Millisecond
	cfg.TolerableFailures = -1
	completed := make(chan uint64, 1000)
	aborted := make(chan checkpoint.Abort, 1000)
	job, err := runtime.New(topo, runtime.Options{Checkpoints: cfg, Store: store,
		OnComplete: func(m *checkpoint.Manifest) { completed <- m.ID },
		OnAbort:    func(a checkpoint.Abort) { aborted <- a }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- job.Run(ctx) }()

	<-completed
	full.Store(true)
	nextFailure := func() checkpoint.Abort {
		for {
			if a := <-aborted; strings.Contains(a.Cause, "no space left on device") {
				return a
			}
		}
	}
	if a := nextFailure(); !a.Reason.Failure() {
		t.Fatalf("a checkpoint on a full disk aborted as %v, want a failure", a.Reason)
	}
	// The disk is still full: records keep flowing, and checkpoints keep
	// failing.
	<-sink.more(100_000)
	nextFailure()
	full.Store(false)
	for drained := false; !drained; {
		select {
		case <-completed:
		default:
			drained = true
		}
	}
	id := <-completed
	ms, err := store.Completed()
	if err != nil || len(ms) == 0 || ms[0].ID < id {
		t.Fatalf("after space returned, checkpoint %d completed but the store lists %v (%v)", id, ms, err)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("the job failed: %v", err)
	}
}
