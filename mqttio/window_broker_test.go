package mqttio

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
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
//
// mosquitto 2.0.11 may also stop sending with messages queued: its count
// of messages in flight drifts once it sends past its window, and when
// every message it sent is acknowledged it sends none of the rest until
// the client connects again (seen under qemu on a busy machine, about one
// run in four: 2,953 of 3,000 sent, every one acknowledged, then nothing
// for a minute, its PINGRESP included; a restart of the broker does not
// send them either). The test reads the broker's log: when the broker
// holds back messages with none in flight, it says so, and checks that
// every message the broker sent was logged and processed, in order, once.
func TestSourceLearnsBrokerWindow(t *testing.T) {
	mosquittotest.Require(t)
	dir := t.TempDir()
	traffic := new(brokerTraffic)
	br, err := mosquittotest.Run(dir, fmt.Sprintf("persistence true\npersistence_location %s/\nmax_queued_messages 1000000\nmax_inflight_messages 100\nlog_type all\n", dir), traffic)
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
	// Every message, or, where the broker holds some back, every one it
	// sent (not always the first ones): logged and processed once each.
	want := n
	if !testwait.Poll(time.Minute, func() bool {
		return metrics.Logged.Load() == n && len(got.snapshot()) == n || traffic.stalled(n, time.Second)
	}) {
		t.Fatalf("waited 1m for the burst: %d of %d received, %d logged, %d redelivered, %d dead letters, %d processed, %d commits; the source's log:\n%s",
			metrics.Received.Load(), n, metrics.Logged.Load(), metrics.Redelivered.Load(), metrics.DeadLetters.Load(), len(got.snapshot()), commits.Load(), logged.String())
	}
	if sent, _, _ := traffic.counts(); sent < n {
		t.Logf("mosquitto sent %d of the %d messages, had every one acknowledged, and holds the rest back: its bug, not the source's", sent, n)
		want = sent
		testwait.Poll(time.Minute, func() bool { return len(got.snapshot()) >= sent })
		if r, l, p := metrics.Received.Load(), metrics.Logged.Load(), len(got.snapshot()); r != int64(sent) || l != int64(sent) || p != sent {
			t.Fatalf("the broker sent %d messages; the source received %d, logged %d and processed %d", sent, r, l, p)
		}
	}
	stop()
	if len(got.snapshot()) != want {
		t.Fatalf("%d records processed, want %d", len(got.snapshot()), want)
	}
	// In order: all of them, or the broker's (which may hold back any).
	for i, seq := range got.snapshot() {
		if want == n && seq != i || i > 0 && seq <= got.snapshot()[i-1] {
			t.Fatalf("record %d has seq %d: lost, duplicated or reordered", i, seq)
		}
	}
	if c := commits.Load(); c > 2*n/window+5 {
		t.Errorf("%d commits for %d messages through a window of %d; want at most %d: one per window, two where the broker holds part of a refill back", c, n, window, 2*n/window+5)
	}
}

// brokerTraffic counts, from mosquitto's log (log_type all), the
// publisher's messages it received and those it sent to the source and
// had acknowledged, line by line as the broker writes them.
type brokerTraffic struct {
	mu                    sync.Mutex
	partial               []byte
	published, sent, acks int
	changed               time.Time // when a count last changed
}

func (b *brokerTraffic) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.partial = append(b.partial, p...)
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(b.partial[:i])
		b.partial = b.partial[i+1:]
		switch {
		case strings.Contains(line, "Received PUBLISH from learn-publisher "):
			b.published++
		case strings.Contains(line, "Sending PUBLISH to learn-0 "):
			b.sent++
		case strings.Contains(line, "Received PUBACK from learn-0 "):
			b.acks++
		default:
			continue
		}
		b.changed = time.Now()
	}
}

func (b *brokerTraffic) counts() (sent, acked, published int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sent, b.acks, b.published
}

// stalled reports whether the broker holds back messages with none in
// flight: it has every one of the n published, has had every one it sent
// acknowledged, has sent fewer than n, and has logged nothing of them for
// quiet. A broker that works sends the next queued message as it handles
// the acknowledgement that makes room for it.
func (b *brokerTraffic) stalled(n int, quiet time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.published == n && b.sent == b.acks && b.sent < n && time.Since(b.changed) >= quiet
}
