package localrecovery_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/bench"
	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/localrecovery"
	"github.com/cairn-edge/cairn/runtime"
)

func openStore(b *testing.B) *localrecovery.Store {
	s, err := localrecovery.Open(filepath.Join(b.TempDir(), "checkpoints.db"), localrecovery.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func newState(b *testing.B, keys int) *bench.State {
	s, err := bench.NewState(keys)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkSnapshotWrite measures a checkpoint of one subtask's keyed
// state: freeze, encode, the write to the store and the checkpoint's
// completion, synced (bench.State.Write, as `cairn-bench snapshot`);
// whole, or incremental after 1 % of the keys changed (a tenth of those
// deleted), on top of the whole one and the increments before. It
// reports the bytes and syncs the store counted a checkpoint writing, and
// the p50 and p99 of a checkpoint's time.
func BenchmarkSnapshotWrite(b *testing.B) {
	for _, keys := range []int{100_000, 1_000_000} {
		for _, incremental := range []bool{false, true} {
			kind := "whole"
			if incremental {
				kind = "incremental"
			}
			b.Run(fmt.Sprintf("keys=%d/%s", keys, kind), func(b *testing.B) {
				s := newState(b, keys)
				store := openStore(b)
				if _, _, err := s.Write(store, 1, false); err != nil {
					b.Fatal(err)
				}
				var size int64
				var times []time.Duration
				written, syncs := store.Wear()
				b.ResetTimer()
				for i := range b.N {
					if incremental {
						b.StopTimer()
						s.Change(keys/100, i)
						b.StartTimer()
					}
					h, d, err := s.Write(store, uint64(i+2), incremental)
					if err != nil {
						b.Fatal(err)
					}
					size = h.Size
					times = append(times, d)
				}
				b.StopTimer()
				slices.Sort(times)
				b.ReportMetric(float64(times[len(times)/2].Microseconds())/1e3, "ms-p50")
				b.ReportMetric(float64(times[len(times)*99/100].Microseconds())/1e3, "ms-p99")
				w, n := store.Wear()
				b.ReportMetric(float64(size)/1e6, "MB/snapshot")
				b.ReportMetric(float64(w-written)/float64(b.N)/1e6, "MB-written/op")
				b.ReportMetric(float64(n-syncs)/float64(b.N), "syncs/op")
			})
		}
	}
}

// BenchmarkSnapshotRestore measures reading, verifying, decoding and loading
// a whole snapshot back into keyed state (bench.RestoreState, as `cairn
// bench restore`).
func BenchmarkSnapshotRestore(b *testing.B) {
	for _, keys := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			store := openStore(b)
			h, _, err := newState(b, keys).Write(store, 1, false)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if err := bench.RestoreState(store, h, keys); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkIncrementalSize compares an incremental snapshot after 1 % of a
// million keys changed since the previous snapshot (a tenth of those
// deleted) with the whole snapshot.
func BenchmarkIncrementalSize(b *testing.B) {
	const keys = 1_000_000
	s := newState(b, keys)
	wholeSize := len(s.Snapshot(false))
	var incSize int
	b.ResetTimer()
	for i := range b.N {
		s.Change(keys/100, i)
		incSize = len(s.Snapshot(true))
	}
	b.ReportMetric(float64(wholeSize)/1e6, "MB-whole")
	b.ReportMetric(float64(incSize)/1e6, "MB-incremental")
	b.ReportMetric(100*float64(incSize)/float64(wholeSize), "%-of-whole")
}

// cycleKeys reads forever (until stopped) over keys distinct keys.
type cycleKeys struct {
	keys, i int
}

func (s *cycleKeys) Open(*graph.Context, uint64) error { return nil }
func (s *cycleKeys) Read(buf []graph.Record) (int, error) {
	for j := range buf {
		buf[j] = graph.Record{Key: keyName(s.i % s.keys), Value: 1}
		s.i++
	}
	return len(buf), nil
}
func (s *cycleKeys) Offset() uint64         { return uint64(s.i) }
func (s *cycleKeys) Ready() <-chan struct{} { return nil }
func (s *cycleKeys) Close() error           { return nil }

var keyNames = sync.OnceValue(func() []string {
	names := make([]string, 1_000_000)
	for i := range names {
		names[i] = fmt.Sprintf("device-%07d", i)
	}
	return names
})

func keyName(i int) string { return keyNames()[i] }

// BenchmarkSyncPause runs a keyed sum over a million keys with records
// flowing and checkpoints every 100 ms, and reports the synchronous phase of
// the subtasks' snapshots: the pause that processing sees.
func BenchmarkSyncPause(b *testing.B) {
	var bld graph.Builder
	src := bld.Source("src", 1, func(int) graph.Source { return &cycleKeys{keys: 1_000_000} })
	bld.Operator("sums", 2, graph.Sum(), []graph.Input{graph.In(src, graph.Hash(nil))})
	topo, err := bld.Build()
	if err != nil {
		b.Fatal(err)
	}
	cfg := checkpoint.DefaultConfig()
	cfg.Interval = 100 * time.Millisecond
	var mu sync.Mutex
	var pauses []time.Duration
	done := make(chan struct{})
	want := max(b.N, 20)
	job, err := runtime.New(topo, runtime.Options{Checkpoints: cfg, Store: openStore(b), OnComplete: func(m *checkpoint.Manifest) {
		mu.Lock()
		defer mu.Unlock()
		if m.ID <= 3 {
			return // the state is still filling
		}
		for _, a := range m.Subtasks {
			if a.Task.Operator == "sums" {
				pauses = append(pauses, a.Stats.Sync)
			}
		}
		if len(pauses) >= 2*want && len(pauses)-2 < 2*want {
			close(done)
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	b.ResetTimer()
	go func() { ran <- job.Run(ctx) }()
	<-done
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(pauses)
	b.ReportMetric(float64(pauses[len(pauses)/2].Microseconds()), "µs-p50-sync")
	b.ReportMetric(float64(pauses[len(pauses)*99/100].Microseconds()), "µs-p99-sync")
	b.ReportMetric(float64(pauses[len(pauses)-1].Microseconds()), "µs-max-sync")
}

// BenchmarkRestartToFirstRecord measures, for a checkpoint holding a million
// keys, the time from starting the helper process to its first record
// processed after the restore.
func BenchmarkRestartToFirstRecord(b *testing.B) {
	dir := b.TempDir()
	prepareMillionKeyCheckpoint(b, dir)
	var total time.Duration
	b.ResetTimer()
	for range b.N {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+dir, "CAIRN_MODE=first-record")
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		elapsed := time.Since(start)
		io.Copy(io.Discard, out)
		if werr := cmd.Wait(); err != nil || werr != nil || line != "first record\n" {
			b.Fatalf("helper: %q %v %v", line, err, werr)
		}
		total += elapsed
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-first-record")
}

// millionKeys reads records over a million keys; it stops, without ending,
// after limit records.
type millionKeys struct {
	i, limit int
}

func (s *millionKeys) Open(_ *graph.Context, offset uint64) error {
	s.i = int(offset)
	return nil
}

func (s *millionKeys) Read(buf []graph.Record) (int, error) {
	n := 0
	for n < len(buf) && s.i < s.limit {
		buf[n] = graph.Record{Key: keyName(s.i % 1_000_000), Value: 1}
		s.i++
		n++
	}
	return n, nil
}
func (s *millionKeys) Offset() uint64         { return uint64(s.i) }
func (s *millionKeys) Ready() <-chan struct{} { return nil }
func (s *millionKeys) Close() error           { return nil }

// millionKeyTopology is src(1) -key-by-> sums(2) -> sink(1).
func millionKeyTopology(limit int, sink graph.Operator) (*graph.Topology, error) {
	var b graph.Builder
	src := b.Source("src", 1, func(int) graph.Source { return &millionKeys{limit: limit} })
	sums := b.Operator("sums", 2, graph.Sum(), []graph.Input{graph.In(src, graph.Hash(nil))})
	b.Operator("sink", 1, func(int) graph.Operator { return sink }, []graph.Input{graph.In(sums, graph.Rebalance())})
	return b.Build()
}

// countTo closes done when it has seen n records.
type countTo struct {
	graph.BaseOperator
	n    int
	done chan struct{}
}

func (c *countTo) ProcessRecord(int, *graph.Record) error {
	if c.n--; c.n == 0 {
		close(c.done)
	}
	return nil
}

// prepareMillionKeyCheckpoint leaves in dir a store whose newest checkpoint
// holds a million keys.
func prepareMillionKeyCheckpoint(b *testing.B, dir string) {
	store, err := localrecovery.Open(filepath.Join(dir, "checkpoints.db"), localrecovery.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	sink := &countTo{n: 1_000_000, done: make(chan struct{})}
	topo, err := millionKeyTopology(1_000_000, sink)
	if err != nil {
		b.Fatal(err)
	}
	cfg := checkpoint.DefaultConfig()
	cfg.Interval = 0
	completed := make(chan struct{}, 1)
	job, err := runtime.New(topo, runtime.Options{Checkpoints: cfg, Store: store,
		OnComplete: func(*checkpoint.Manifest) { completed <- struct{}{} }})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- job.Run(ctx) }()
	<-sink.done
	if _, err := job.TriggerCheckpoint(ctx); err != nil {
		b.Fatal(err)
	}
	<-completed
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
}

// firstRecord prints that a record arrived and ends the process.
type firstRecord struct{ graph.BaseOperator }

func (firstRecord) ProcessRecord(int, *graph.Record) error {
	fmt.Println("first record")
	os.Exit(0)
	return nil
}

// runFirstRecord restores dir's newest checkpoint and runs until the first
// record reaches the sink.
func runFirstRecord(dir string) error {
	store, err := localrecovery.Open(filepath.Join(dir, "checkpoints.db"), localrecovery.Options{})
	if err != nil {
		return err
	}
	restore, err := store.Completed()
	if err != nil {
		return err
	}
	topo, err := millionKeyTopology(math.MaxInt, firstRecord{})
	if err != nil {
		return err
	}
	cfg := checkpoint.DefaultConfig()
	job, err := runtime.New(topo, runtime.Options{Checkpoints: cfg, Store: store, Restore: localrecovery.Candidates(store, restore)})
	if err != nil {
		return err
	}
	return job.Run(context.Background())
}
