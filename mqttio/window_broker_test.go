package mqttio

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/ingest"
	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
	"github.com/cairn-edge/cairn/internal/testing/testlog"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
	"github.com/cairn-edge/cairn/runtime"
)

// TestSourceLearnsBrokerWindow publishes a burst of 3,000 messages
// through a real mosquitto with max_inflight_messages 100 to a source
// with its defaults, which must commit about once per window of 100, not
// once per 20 messages as with the window it was told by default before,
// and log every message once, in order. How close to one sync per window
// depends on the broker: mosquitto 2.0.11 (Debian 12's) keeps its window
// only until the first acknowledgements, then sends everything queued
// (eclipse-mosquitto/mosquitto#2306, fixed in 2.0.13), so groups are
// larger than the window; mosquitto 2.0.19 keeps it, but often sends
// part of a refill only once it hears more from the client, so a window
// may take two commits, the second after a pause. A window that the
// broker keeps is learned (the simulated broker of
// testdata/window/sim.txt shows exactly one sync per window).
func TestSourceLearnsBrokerWindow(t *testing.T) {
	mosquittotest.Require(t)
	dir := t.TempDir()
	br, err := mosquittotest.Run(dir, fmt.Sprintf("persistence true\npersistence_location %s/\nmax_queued_messages 1000000\nmax_inflight_messages 100\n", dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(br.Stop)
	const n, window = 3000, 100
	pub := client(t, br.URL, "learn-publisher", true)
	defer pub.Disconnect(100)

	var commits atomic.Int64
	logs, err := ingest.OpenLogs(filepath.Join(t.TempDir(), "ingest"), ingest.LogOptions{WriteFault: func() error {
		commits.Add(1)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	var logged testlog.Buffer
	metrics := new(SourceMetrics)
	got := new(seqs)
	var b graph.Builder
	src := b.Source("mqtt", 1, NewSource(SourceConfig{
		Name: "mqtt", Topics: []string{"learn/+/t"}, Logs: logs, Metrics: metrics,
		Client:   ClientConfig{Broker: br.URL, ClientID: "learn", Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		Decoding: Decoding{ValueField: "seq"},
	}))
	b.Operator("collect", 1, func(int) graph.Operator { return seqCollector{s: got} }, []graph.Input{graph.In(src, graph.Forward())})
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	stop := runInBackground(t, topo, runtime.Options{Checkpoints: checkpoint.DefaultConfig()})
	defer stop()
	// The burst, once the source has subscribed. (Messages mosquitto 2.0
	// queued for a session while its client was away are sent at once
	// when it returns, whatever the window: BenchmarkIngestSlowDisk's
	// groups are larger than its broker's window.)
	testwait.For(t, 20*time.Second, "the source's subscription", func() bool {
		return strings.Contains(logged.String(), "MQTT connected")
	})
	publishSeqs(t, pub, "learn/d1/t", 0, n)
	if !testwait.Poll(time.Minute, func() bool { return metrics.Logged.Load() == n && len(got.snapshot()) == n }) {
		t.Fatalf("waited 1m for the burst: %d of %d logged, %d processed, %d commits; the source's log:\n%s",
			metrics.Logged.Load(), n, len(got.snapshot()), commits.Load(), logged.String())
	}
	stop()
	for i, seq := range got.snapshot() {
		if seq != i {
			t.Fatalf("record %d has seq %d: lost, duplicated or reordered", i, seq)
		}
	}
	if c := commits.Load(); c > 2*n/window+5 {
		t.Errorf("%d commits for %d messages through a window of %d; want at most %d: one per window, two where the broker holds part of a refill back", c, n, window, 2*n/window+5)
	}
}
