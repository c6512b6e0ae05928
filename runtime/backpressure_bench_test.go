package runtime_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/bench"
	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
	"github.com/cairn-edge/cairn/runtime"
)

// slowSink spends cost per record, sleeping it off a millisecond at a time,
// as a sink writing to a slow device does.
type slowSink struct {
	graph.BaseOperator
	cost, debt time.Duration
}

func (s *slowSink) ProcessRecord(int, *graph.Record) error {
	if s.debt += s.cost; s.debt >= time.Millisecond {
		time.Sleep(s.debt)
		s.debt = 0
	}
	return nil
}

// BenchmarkCheckpointUnderBackpressure measures how long a checkpoint
// takes, trigger to completion, when a slow sink holds the whole pipeline
// back — source(1) -rebalance-> map(2) -key-by-> count(2) -rebalance->
// slow sink(2), every channel full — aligned (exactly-once) versus unaligned, and the records
// in flight the unaligned ones persist. One op is one checkpoint.
func BenchmarkCheckpointUnderBackpressure(b *testing.B) {
	records := make([]graph.Record, 1000)
	for i := range records {
		records[i] = graph.Record{Key: fmt.Sprintf("device-%04d", i), Value: 1}
	}
	for _, mode := range []checkpoint.Mode{checkpoint.ExactlyOnce, checkpoint.Unaligned} {
		b.Run("mode="+mode.String(), func(b *testing.B) {
			var bld graph.Builder
			src := bld.Source("src", 1, func(int) graph.Source { return bench.CycleSource(records, math.MaxInt) })
			m := bld.Operator("map", 2, graph.Map(func(r *graph.Record) { r.Value++ }),
				[]graph.Input{graph.In(src, graph.Rebalance())})
			c := bld.Operator("count", 2, graph.Count(), []graph.Input{graph.In(m, graph.Hash(nil))})
			bld.Operator("sink", 2, func(int) graph.Operator { return &slowSink{cost: 50 * time.Microsecond} },
				[]graph.Input{graph.In(c, graph.Rebalance())})
			topo, err := bld.Build()
			if err != nil {
				b.Fatal(err)
			}
			cfg := checkpoint.DefaultConfig()
			cfg.Mode, cfg.Interval = mode, 0
			completed := make(chan *checkpoint.Manifest, 1)
			job, err := runtime.New(topo, runtime.Options{Checkpoints: cfg, OnComplete: func(m *checkpoint.Manifest) { completed <- m }})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			go func() { ran <- job.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-ran; err != nil {
					b.Fatal(err)
				}
			}()
			awaitBackpressure(b, job)

			var total time.Duration
			var inflight int64
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				id, err := job.TriggerCheckpoint(ctx)
				if err != nil {
					b.Fatal(err)
				}
				m := <-completed
				if m.ID != id {
					b.Fatalf("checkpoint %d completed, %d triggered", m.ID, id)
				}
				total += time.Since(start)
				for _, a := range m.Subtasks {
					inflight += a.Stats.InFlightBytes
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/checkpoint")
			b.ReportMetric(float64(inflight)/float64(b.N), "in-flight-B/checkpoint")
		})
	}
}

// awaitBackpressure waits until the sinks' inputs are full and the maps
// wait for credits: the state in which aligned checkpoints crawl.
func awaitBackpressure(b *testing.B, job *runtime.Job) {
	testwait.For(b, 30*time.Second, "the pipeline to back up", func() bool {
		full := 0
		for _, t := range job.Status().Tasks {
			var queued int64
			for _, q := range t.Queued {
				queued += q
			}
			if t.ID.Operator == "sink" && queued >= 2*256 {
				full++
			}
		}
		return full == 2
	})
}
