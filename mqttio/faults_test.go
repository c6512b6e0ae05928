package mqttio

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/ingest"
	"github.com/cairn-edge/cairn/internal/testing/testlog"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
	"github.com/cairn-edge/cairn/runtime"
)

// ackCounter is a TCP proxy in front of a broker that counts the PUBACK
// (and SUBSCRIBE) packets clients send to it, once passed on: what the
// broker hears as acknowledgements.
type ackCounter struct {
	url        string
	pubacks    atomic.Int64
	subscribes atomic.Int64
}

func newAckCounter(t testing.TB, brokerURL string) *ackCounter {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &ackCounter{url: "tcp://" + l.Addr().String()}
	var conns sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		conns.Wait()
	})
	target := strings.TrimPrefix(brokerURL, "tcp://")
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			conns.Add(2)
			go func() { // broker to client: as it comes
				defer conns.Done()
				io.Copy(c, b)
				c.Close()
			}()
			go func() { // client to broker: packet by packet, counting
				defer conns.Done()
				defer b.Close()
				for {
					pkt, err := readPacket(c)
					if err != nil {
						return
					}
					if _, err := b.Write(pkt); err != nil {
						return
					}
					switch pkt[0] >> 4 {
					case 4: // PUBACK
						a.pubacks.Add(1)
					case 8: // SUBSCRIBE
						a.subscribes.Add(1)
					}
				}
			}()
		}
	}()
	return a
}

// readPacket reads one MQTT control packet: the fixed header byte, the
// remaining length (a varint of up to four bytes) and the rest.
func readPacket(r io.Reader) ([]byte, error) {
	hdr := make([]byte, 1, 5)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, err
	}
	n, shift := 0, 0
	for i := 0; ; i++ {
		var b [1]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, err
		}
		hdr = append(hdr, b[0])
		n |= int(b[0]&0x7f) << shift
		if b[0]&0x80 == 0 {
			break
		}
		if shift += 7; i == 3 {
			return nil, errors.New("bad remaining length")
		}
	}
	pkt := append(hdr, make([]byte, n)...)
	_, err := io.ReadFull(r, pkt[len(hdr):])
	return pkt, err
}

// seqs collects the "seq" values (as Record.Value) that reach it, in order.
type seqs struct {
	mu  sync.Mutex
	got []int
}

type seqCollector struct {
	graph.BaseOperator
	s *seqs
}

func (c seqCollector) ProcessRecord(_ int, r *graph.Record) error {
	c.s.mu.Lock()
	c.s.got = append(c.s.got, int(r.Value))
	c.s.mu.Unlock()
	return nil
}

func (s *seqs) snapshot() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.got...)
}

// publishSeqs publishes readings seq from..to-1 to topic at QoS 1 and waits
// for the broker's acknowledgements (to the publisher).
func publishSeqs(t testing.TB, c paho.Client, topic string, from, to int) {
	t.Helper()
	var toks []paho.Token
	for i := from; i < to; i++ {
		toks = append(toks, c.Publish(topic, 1, false, fmt.Sprintf(`{"seq":%d}`, i)))
	}
	for _, tok := range toks {
		if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
}

// TestIngestLogFullDisk fills the disk under the ingest log (appends fail
// with ENOSPC at the commit) while messages arrive: the broker must hear no
// acknowledgement for any of them, nothing acknowledged before may be lost,
// the failures must be counted and logged (and retried with backoff, not
// once per message), and when space returns every message must be logged,
// acknowledged and processed, in order, once.
func TestIngestLogFullDisk(t *testing.T) {
	forEachBroker(t, func(t *testing.T, br testBroker) {
		proxy := newAckCounter(t, br.url)
		var full atomic.Bool
		logs, err := ingest.OpenLogs(filepath.Join(t.TempDir(), "ingest"), ingest.LogOptions{WriteFault: func() error {
			if full.Load() {
				return syscall.ENOSPC
			}
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer logs.Close()
		var logged testlog.Buffer
		metrics := new(SourceMetrics)
		presubscribe(t, br.url, "full-0", "full/+/t")
		got := new(seqs)
		var b graph.Builder
		src := b.Source("mqtt", 1, NewSource(SourceConfig{
			Name: "mqtt", Topics: []string{"full/+/t"}, Logs: logs, Metrics: metrics, MaxInflight: 50,
			Client:   ClientConfig{Broker: proxy.url, ClientID: "full", Logger: slog.New(slog.NewTextHandler(&logged, nil))},
			Decoding: Decoding{ValueField: "seq"},
		}))
		b.Operator("collect", 1, func(int) graph.Operator { return seqCollector{s: got} }, []graph.Input{graph.In(src, graph.Forward())})
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		stop := runInBackground(t, topo, runtime.Options{Checkpoints: checkpoint.DefaultConfig()})
		defer stop()
		pub := client(t, br.url, "full-publisher", true)
		defer pub.Disconnect(100)
		// Publish once the source is connected: a broker may deliver what
		// it queued for an offline session in any order (mochi does).
		testwait.For(t, 20*time.Second, "the source's subscription", func() bool { return proxy.subscribes.Load() > 0 })

		publishSeqs(t, pub, "full/d1/t", 0, 100)
		testwait.For(t, 20*time.Second, "100 messages logged, acknowledged and processed", func() bool {
			return proxy.pubacks.Load() == 100 && len(got.snapshot()) == 100
		})

		full.Store(true)
		publishSeqs(t, pub, "full/d1/t", 100, 300)
		testwait.For(t, 20*time.Second, "the 200 messages received and appends failing", func() bool {
			return metrics.Received.Load() == 300 && metrics.AppendFailures.Load() >= 3
		})
		if n := proxy.pubacks.Load(); n != 100 {
			t.Fatalf("the broker heard %d acknowledgements while the disk was full, want the 100 from before", n-100)
		}
		if n := metrics.Logged.Load(); n != 100 {
			t.Fatalf("%d messages counted as logged on a full disk, want 100", n)
		}
		if n := len(got.snapshot()); n != 100 {
			t.Fatalf("%d records processed, want 100: only logged messages may be", n)
		}
		if n := metrics.AppendFailures.Load(); n > 50 {
			t.Fatalf("%d failed appends for 200 messages: retries are not backing off", n)
		}
		if log := logged.String(); !strings.Contains(log, "ingest log append failed") || !strings.Contains(log, "no space left on device") {
			t.Fatalf("no clear error in the log:\n%s", log)
		}
		if h := logs.Health(); h.RefusingSince.IsZero() || time.Since(h.RefusingSince) > time.Minute ||
			!strings.Contains(h.RefusingError, "ingest log mqtt/0") || !strings.Contains(h.RefusingError, "no space left on device") {
			t.Fatalf("the logs' health does not say that they refuse appends, since when and why: %+v", h)
		}

		full.Store(false)
		testwait.For(t, 20*time.Second, "all 300 messages logged, acknowledged and processed", func() bool {
			return proxy.pubacks.Load() == 300 && metrics.Logged.Load() == 300 && len(got.snapshot()) == 300
		})
		if h := logs.Health(); !h.RefusingSince.IsZero() || h.RefusingError != "" {
			t.Fatalf("the logs' health still says they refuse appends: %+v", h)
		}
		stop()
		for i, seq := range got.snapshot() {
			if seq != i {
				t.Fatalf("record %d has seq %d: lost, duplicated or reordered: %v", i, seq, got.snapshot())
			}
		}
		if !strings.Contains(logged.String(), "ingest log append succeeded again") {
			t.Fatalf("the recovery is not logged:\n%s", logged.String())
		}
		// The log itself holds every message once, in order, after the
		// offsets of the first 100.
		l, err := logs.Log("mqtt/0")
		if err != nil {
			t.Fatal(err)
		}
		next, err := l.Read(1, 1000, func(off uint64, m ingest.Message) error {
			if want := fmt.Sprintf(`{"seq":%d}`, off-1); string(m.Payload) != want {
				return fmt.Errorf("offset %d holds %s, want %s", off, m.Payload, want)
			}
			return nil
		})
		if err != nil || next != 301 {
			t.Fatalf("reading the log: next %d, %v; want 301", next, err)
		}
		if failures := metrics.AppendFailures.Load(); failures == 0 {
			t.Fatal("no failure counted")
		}
	})
}

// BenchmarkIngestSlowDisk measures, side by side in one run, how fast the
// durable source drains a backlog of messages from mosquitto into the
// ingest log and acknowledges them, on the disk of the machine and on a
// slow one (every commit held 20 ms longer, as by a slow fsync). Group
// commit must keep the slow disk at half the fast rate or more: what
// arrives while a commit is written joins the next one, so groups grow as
// commits slow down (msgs/commit shows it), as far as the broker's
// in-flight window lets them (the test broker's, 1000, which the source is
// told).
func BenchmarkIngestSlowDisk(b *testing.B) {
	br := mosquittoBroker(b)
	const n = 20_000
	pub := client(b, br.url, "slow-publisher", true)
	defer pub.Disconnect(100)
	// drain returns how long the backlog took and how many commits it
	// needed.
	drain := func(name string, delay time.Duration, round int) (time.Duration, int64) {
		id := fmt.Sprintf("slow-%s-%d", name, round)
		topic := id + "/d/t"
		presubscribe(b, br.url, id+"-0", topic)
		publishSeqs(b, pub, topic, 0, n) // queued in the broker's session
		var commits atomic.Int64
		logs, err := ingest.OpenLogs(filepath.Join(b.TempDir(), "ingest"), ingest.LogOptions{WriteFault: func() error {
			commits.Add(1)
			time.Sleep(delay)
			return nil
		}})
		if err != nil {
			b.Fatal(err)
		}
		defer logs.Close()
		metrics := new(SourceMetrics)
		var bld graph.Builder
		src := bld.Source("mqtt", 1, NewSource(SourceConfig{Name: "mqtt", Client: ClientConfig{Broker: br.url, ClientID: id},
			Topics: []string{topic}, Logs: logs, Metrics: metrics, Decoding: Decoding{Format: Raw}, MaxInflight: 1000}))
		bld.Operator("discard", 1, func(int) graph.Operator { return seqCollector{s: new(seqs)} }, []graph.Input{graph.In(src, graph.Forward())})
		topo, err := bld.Build()
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		stop := runInBackground(b, topo, runtime.Options{Checkpoints: checkpoint.DefaultConfig()})
		defer stop()
		if !testwait.PollEvery(5*time.Minute, time.Millisecond, func() bool { return metrics.Logged.Load() == n }) {
			b.Fatalf("the backlog was not logged in 5 minutes: %d of %d", metrics.Logged.Load(), n)
		}
		return time.Since(start), commits.Load()
	}
	var fast, slow time.Duration
	var fastCommits, slowCommits int64
	b.ResetTimer()
	for i := range b.N {
		d, c := drain("fast", 0, i)
		fast, fastCommits = fast+d, fastCommits+c
		d, c = drain("slow", 20*time.Millisecond, i)
		slow, slowCommits = slow+d, slowCommits+c
	}
	fastRate := float64(b.N*n) / fast.Seconds()
	slowRate := float64(b.N*n) / slow.Seconds()
	b.ReportMetric(fastRate, "fast-msgs/s")
	b.ReportMetric(slowRate, "slow-msgs/s")
	b.ReportMetric(100*slowRate/fastRate, "slow-%-of-fast")
	b.ReportMetric(float64(b.N*n)/float64(fastCommits), "fast-msgs/commit")
	b.ReportMetric(float64(b.N*n)/float64(slowCommits), "slow-msgs/commit")
	b.ReportMetric(0, "ns/op")
}
