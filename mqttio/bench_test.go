package mqttio_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/bench"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/mqttio"
)

// BenchmarkMQTTThroughput measures, in one run, messages per second from a
// publisher through mosquitto into (a) a bare paho subscriber that only
// counts and (b) cairn: durable ingest log, JSON decoding, a pipeline
// ending in a counter, with checkpoints every 100 ms (bench.MQTTRig, as
// `cairn-bench mqtt --broker URL`).
func BenchmarkMQTTThroughput(b *testing.B) {
	rig, err := bench.NewMQTTRig(context.Background(), mqttio.MosquittoURL(b), b.TempDir(), 100*time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := rig.Close(); err != nil {
			b.Error(err)
		}
	}()
	const n = 20_000
	var bareTime, cairnTime time.Duration
	b.ResetTimer()
	for range b.N {
		bare, cairn, err := rig.Round(n)
		if err != nil {
			b.Fatal(err)
		}
		bareTime, cairnTime = bareTime+bare, cairnTime+cairn
	}
	bareRate := float64(b.N*n) / bareTime.Seconds()
	cairnRate := float64(b.N*n) / cairnTime.Seconds()
	b.ReportMetric(bareRate, "bare-msgs/s")
	b.ReportMetric(cairnRate, "cairn-msgs/s")
	b.ReportMetric(100*cairnRate/bareRate, "%-of-bare")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSinkStage stages the burst of a one-minute window that fires
// for 100,000 devices at once, then snapshots it, as a sink subtask does
// (no broker: nothing is published). It reports the bytes the sink holds,
// in memory and in the checkpoint, per message staged.
func BenchmarkSinkStage(b *testing.B) {
	const keys = 100_000
	records := make([]graph.Record, keys)
	for i := range records {
		records[i] = graph.Record{Key: fmt.Sprintf("d%06d", i), Time: 1_700_000_039_999, Value: float64(i%400) / 10,
			Payload: graph.WindowResult{Start: 1_699_999_980_000, End: 1_700_000_040_000, Count: int64(1 + i%3)}}
	}
	var held int
	for b.Loop() {
		s := mqttio.NewSink(mqttio.SinkConfig{Topic: "bench/avg/{key}"})(0)
		for i := range records {
			if err := s.ProcessRecord(0, &records[i]); err != nil {
				b.Fatal(err)
			}
		}
		parts, err := s.(graph.StateParts).SnapshotStateParts(1)
		if err != nil {
			b.Fatal(err)
		}
		held = 0
		for _, p := range parts {
			held += len(p)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*keys), "ns/record")
	b.ReportMetric(float64(held)/keys, "held-B/record")
	b.ReportMetric(0, "ns/op")
}
