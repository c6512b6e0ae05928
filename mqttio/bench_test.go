package mqttio

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/runtime"
)

// BenchmarkIngestLogAppend measures durable appends: groups of 1000
// messages of about 100 bytes, one fsynced transaction per group.
func BenchmarkIngestLogAppend(b *testing.B) {
	db, err := OpenLogDB(filepath.Join(b.TempDir(), "ingest.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	l, err := db.Log("bench/0")
	if err != nil {
		b.Fatal(err)
	}
	group := make([]Message, 1000)
	for i := range group {
		p := []byte(fmt.Sprintf(`{"device":"d%03d","temp":21.5,"humidity":40,"seq":%08d}`, i%100, i))
		group[i] = Message{Topic: "sensors/d042/telemetry", Payload: p, Received: time.Now(), PacketID: uint16(i), Sum: PayloadSum("t", p)}
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := l.Append(group); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(group))/time.Since(start).Seconds(), "msgs/s")
	b.ReportMetric(0, "ns/op")
}

// publishN publishes n readings to topic prefix at QoS 1 and waits for the
// broker's acknowledgements.
func publishN(b *testing.B, c paho.Client, prefix string, n int) {
	toks := make([]paho.Token, 0, n)
	for i := range n {
		toks = append(toks, c.Publish(fmt.Sprintf("%s/d%03d/telemetry", prefix, i%100), 1, false,
			fmt.Sprintf(`{"temp":%d.5,"humidity":40,"seq":%d}`, i%40, i)))
	}
	for _, t := range toks {
		if t.Wait(); t.Error() != nil {
			b.Fatal(t.Error())
		}
	}
}

// counter signals when a target number of records has reached it.
type counter struct {
	graph.BaseOperator
	n      *atomic.Int64
	target *atomic.Int64
	done   chan struct{}
}

func (c counter) ProcessRecord(int, *graph.Record) error {
	if c.n.Add(1) == c.target.Load() {
		c.done <- struct{}{}
	}
	return nil
}

// BenchmarkMQTTThroughput measures, in one run, messages per second from a
// publisher through mosquitto into (a) a bare paho subscriber that only
// counts and (b) cairn: durable ingest log, JSON decoding, a pipeline
// ending in a counter, with checkpoints every 100 ms.
func BenchmarkMQTTThroughput(b *testing.B) {
	br := mosquittoBroker(b)
	const n = 20_000
	pub := client(b, br.url, "bench-publisher", true)
	defer pub.Disconnect(100)

	// (a) the bare subscriber
	var bareN atomic.Int64
	bareDone := make(chan struct{}, 1)
	bare := client(b, br.url, "bench-bare", true)
	defer bare.Disconnect(100)
	if tok := bare.Subscribe("bare/+/telemetry", 1, func(paho.Client, paho.Message) {
		if bareN.Add(1)%n == 0 {
			bareDone <- struct{}{}
		}
	}); tok.Wait() && tok.Error() != nil {
		b.Fatal(tok.Error())
	}

	// (b) cairn
	presubscribe(b, br.url, "bench-cairn-0", "cairn/+/telemetry")
	logs, err := OpenLogDB(filepath.Join(b.TempDir(), "ingest.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer logs.Close()
	filter, fields, _ := ParseTopicPattern("cairn/{device}/telemetry")
	var got, target atomic.Int64
	done := make(chan struct{}, 1)
	var bld graph.Builder
	src := bld.Source("mqtt", 1, NewSource(SourceConfig{Name: "mqtt", Client: ClientConfig{Broker: br.url, ClientID: "bench-cairn"},
		Topics: []string{filter}, Logs: logs, Decoding: Decoding{TopicFields: fields, KeyField: "device", ValueField: "temp"}}))
	bld.Operator("count", 1, func(int) graph.Operator { return counter{n: &got, target: &target, done: done} },
		[]graph.Input{graph.In(src, graph.Forward())})
	topo, err := bld.Build()
	if err != nil {
		b.Fatal(err)
	}
	cfg := checkpoint.DefaultConfig()
	cfg.Interval = 100 * time.Millisecond
	defer runInBackground(b, topo, runtime.Options{Checkpoints: cfg})()

	var bareTime, cairnTime time.Duration
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		publishN(b, pub, "bare", n)
		waitFor(b, bareDone, time.Minute, "the bare subscriber")
		bareTime += time.Since(start)

		target.Store(int64((i + 1) * n))
		start = time.Now()
		publishN(b, pub, "cairn", n)
		waitFor(b, done, time.Minute, "cairn")
		cairnTime += time.Since(start)
	}
	bareRate := float64(b.N*n) / bareTime.Seconds()
	cairnRate := float64(b.N*n) / cairnTime.Seconds()
	b.ReportMetric(bareRate, "bare-msgs/s")
	b.ReportMetric(cairnRate, "cairn-msgs/s")
	b.ReportMetric(100*cairnRate/bareRate, "%-of-bare")
	b.ReportMetric(0, "ns/op")
}
