package runtime

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
)

// cycleSource emits n records cycling over a pre-built slice.
type cycleSource struct {
	records []graph.Record
	n, i    int
}

func (s *cycleSource) Open(*graph.Context, uint64) error { return nil }
func (s *cycleSource) Read(buf []graph.Record) (int, error) {
	if s.i >= s.n {
		return 0, io.EOF
	}
	k := min(len(buf), s.n-s.i)
	for j := range k {
		buf[j] = s.records[(s.i+j)%len(s.records)]
	}
	s.i += k
	return k, nil
}
func (s *cycleSource) Offset() uint64         { return uint64(s.i) }
func (s *cycleSource) Ready() <-chan struct{} { return nil }
func (s *cycleSource) Close() error           { return nil }

type countingSink struct {
	graph.BaseOperator
	n int
}

func (s *countingSink) ProcessRecord(int, *graph.Record) error { s.n++; return nil }

// BenchmarkPipeline measures records per second through
// source(2) -key-by-> keyed count(2) -forward-> sink(2) on pre-built records
// over 10,000 keys, with checkpoints off and every 100 ms. One op is one
// record, so allocs/op is allocations per record.
func BenchmarkPipeline(b *testing.B) {
	records := make([]graph.Record, 10_000)
	for i := range records {
		records[i] = graph.Record{Key: fmt.Sprintf("device-%05d", i), Value: 1, Time: int64(i)}
	}
	for _, bc := range []struct {
		name     string
		interval time.Duration
	}{{"checkpoints=off", 0}, {"checkpoints=100ms", 100 * time.Millisecond}} {
		b.Run(bc.name, func(b *testing.B) {
			var sinks [2]*countingSink
			var bld graph.Builder
			src := bld.Source("src", 2, func(i int) graph.Source { return &cycleSource{records: records, n: b.N / 2} })
			cnt := bld.Operator("count", 2, graph.Count(), []graph.Input{graph.In(src, graph.Hash(nil))})
			bld.Operator("sink", 2, func(i int) graph.Operator { sinks[i] = &countingSink{}; return sinks[i] },
				[]graph.Input{graph.In(cnt, graph.Forward())})
			topo, err := bld.Build()
			if err != nil {
				b.Fatal(err)
			}
			cfg := checkpoint.DefaultConfig()
			cfg.Interval = bc.interval
			completed := 0
			job, err := New(topo, Options{Checkpoints: cfg, OnComplete: func(*checkpoint.Manifest) { completed++ }})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			if err := job.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			if got := sinks[0].n + sinks[1].n; got != b.N/2*2 {
				b.Fatalf("sinks saw %d records, want %d", got, b.N/2*2)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
			b.ReportMetric(float64(completed)/elapsed.Seconds(), "checkpoints/s")
		})
	}
}
