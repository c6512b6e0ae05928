package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/bench"
)

// BenchmarkPipeline measures records per second through bench.RunPipeline's
// graph, source(2) -key-by-> keyed count(2) -forward-> sink(2), on
// pre-built records over 10,000 keys, with checkpoints off and every
// 100 ms; `cairn-bench pipeline` runs the same. One op is one record, so
// allocs/op is allocations per record.
func BenchmarkPipeline(b *testing.B) {
	records := bench.KeyedRecords(10_000)
	for _, bc := range []struct {
		name     string
		interval time.Duration
	}{{"checkpoints=off", 0}, {"checkpoints=100ms", 100 * time.Millisecond}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.ResetTimer()
			run, err := bench.RunPipeline(context.Background(), records, b.N, bc.interval)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/run.Elapsed.Seconds(), "records/s")
			b.ReportMetric(float64(run.Checkpoints)/run.Elapsed.Seconds(), "checkpoints/s")
		})
	}
}
