package ingest_test

import (
	"path/filepath"
	"testing"

	"github.com/cairn-edge/cairn/bench"
	"github.com/cairn-edge/cairn/ingest"
)

// BenchmarkIngestLogAppend measures durable appends: groups of 1000
// telemetry messages of about 100 bytes, one fdatasync per group, as
// `cairn-bench ingest` does.
func BenchmarkIngestLogAppend(b *testing.B) {
	db, err := ingest.OpenLogs(filepath.Join(b.TempDir(), "ingest"), ingest.LogOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	l, err := db.Log("bench/0")
	if err != nil {
		b.Fatal(err)
	}
	group := bench.TelemetryGroup(1000)
	b.ResetTimer()
	d, err := bench.AppendGroups(l, group, b.N)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N*len(group))/d.Seconds(), "msgs/s")
	b.ReportMetric(0, "ns/op")
}
