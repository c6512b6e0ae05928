package mqttio

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/ingest"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
	"github.com/cairn-edge/cairn/runtime"
)

func TestParseTopicPattern(t *testing.T) {
	filter, fields, err := ParseTopicPattern("sensors/{device}/telemetry")
	if err != nil || filter != "sensors/+/telemetry" || fields[1] != "device" {
		t.Fatalf("got %q %v %v", filter, fields, err)
	}
	for _, bad := range []string{"a/{}/b", "a/x{y}/b", "a/#/b"} {
		if _, _, err := ParseTopicPattern(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// client connects a plain paho client and waits for the connection.
func client(t testing.TB, url, id string, clean bool) paho.Client {
	t.Helper()
	o := paho.NewClientOptions().AddBroker(url).SetClientID(id).SetCleanSession(clean).
		SetAutoReconnect(true).SetConnectRetry(true).SetConnectRetryInterval(200 * time.Millisecond).SetOrderMatters(true)
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connecting %s: %v", id, tok.Error())
	}
	return c
}

// presubscribe creates a persistent session for id with filter, as an
// earlier run would have, so the broker queues messages for it.
func presubscribe(t testing.TB, url, id, filter string) {
	c := client(t, url, id, false)
	if tok := c.Subscribe(filter, 1, nil); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	c.Disconnect(100)
}

// outputs collects a sink's messages and checks them: for a running count
// per key, the deduplicated values of key k must be exactly 1..want[k].
type outputs struct {
	mu    sync.Mutex
	ids   map[string]bool
	dups  int
	seen  map[string]map[float64]string // key → count → id
	twice []string                      // a count seen under two ids: a duplicate output
	want  map[string]int
	done  chan struct{}
}

func collect(t testing.TB, url, id string, want map[string]int) *outputs {
	o := &outputs{ids: map[string]bool{}, seen: map[string]map[float64]string{}, want: want, done: make(chan struct{})}
	c := client(t, url, id, false)
	t.Cleanup(func() { c.Disconnect(100) })
	tok := c.Subscribe("out/#", 1, func(_ paho.Client, m paho.Message) {
		var out Output
		if err := json.Unmarshal(m.Payload(), &out); err != nil {
			t.Errorf("bad output %q: %v", m.Payload(), err)
			return
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.ids[out.ID] {
			o.dups++
			return
		}
		o.ids[out.ID] = true
		if o.seen[out.Key] == nil {
			o.seen[out.Key] = map[float64]string{}
		}
		if prev, ok := o.seen[out.Key][out.Value]; ok {
			o.twice = append(o.twice, fmt.Sprintf("%s=%v as %s and %s", out.Key, out.Value, prev, out.ID))
		}
		o.seen[out.Key][out.Value] = out.ID
		if o.complete() {
			select {
			case <-o.done:
			default:
				close(o.done)
			}
		}
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe out/#: %v", tok.Error())
	}
	return o
}

func (o *outputs) complete() bool {
	for k, n := range o.want {
		if len(o.seen[k]) < n {
			return false
		}
	}
	return true
}

// check verifies the outputs once complete.
func (o *outputs) check(t testing.TB) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.twice) > 0 {
		t.Fatalf("%d outputs repeated under new ids (records counted twice), e.g. %s", len(o.twice), o.twice[0])
	}
	for k, n := range o.want {
		for c := 1; c <= n; c++ {
			if _, ok := o.seen[k][float64(c)]; !ok {
				t.Fatalf("key %s: count %d never published", k, c)
			}
		}
		if len(o.seen[k]) != n {
			t.Fatalf("key %s: %d distinct counts, want %d", k, len(o.seen[k]), n)
		}
	}
}

// runInBackground runs topo until the returned function is called, which
// stops it and fails the test if the job failed. Calling it again does
// nothing, so it can be both deferred and called.
func runInBackground(t testing.TB, topo *graph.Topology, opts runtime.Options) func() {
	t.Helper()
	job, err := runtime.New(topo, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- job.Run(ctx) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			if err := <-ran; err != nil {
				t.Error(err)
			}
		})
	}
}

// countPipeline is an MQTT source on sensors/{device}/telemetry, a keyed
// count, and an MQTT sink to out/{key}.
func countPipeline(t testing.TB, url, id string, logs *ingest.Logs, srcMetrics *SourceMetrics) *graph.Topology {
	return countPipelineN(t, url, id, 1, logs, srcMetrics)
}

// countPipelineN is countPipeline with a source of parallelism par.
func countPipelineN(t testing.TB, url, id string, par int, logs *ingest.Logs, srcMetrics *SourceMetrics) *graph.Topology {
	t.Helper()
	filter, fields, err := ParseTopicPattern("sensors/{device}/telemetry")
	if err != nil {
		t.Fatal(err)
	}
	var b graph.Builder
	src := b.Source("mqtt", par, NewSource(SourceConfig{
		Name: "mqtt", Client: ClientConfig{Broker: url, ClientID: id}, Topics: []string{filter},
		Decoding: Decoding{TopicFields: fields, KeyField: "device", ValueField: "temp"},
		Logs:     logs, Metrics: srcMetrics, DeadLetterTopic: "dead/" + id,
	}))
	cnt := b.Operator("count", 2, graph.Count(), []graph.Input{graph.In(src, graph.Hash(nil))})
	b.Operator("out", 1, NewSink(SinkConfig{Client: ClientConfig{Broker: url, ClientID: id}, Topic: "out/{key}"}),
		[]graph.Input{graph.In(cnt, graph.Rebalance())})
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// publish sends n readings over devices at QoS 1 and returns the count per
// device.
func publish(t testing.TB, url string, n, devices int) map[string]int {
	c := client(t, url, fmt.Sprintf("publisher-%d", time.Now().UnixNano()), true)
	defer c.Disconnect(100)
	want := map[string]int{}
	var toks []paho.Token
	for i := range n {
		dev := fmt.Sprintf("d%02d", i*7%devices)
		want[dev]++
		toks = append(toks, c.Publish("sensors/"+dev+"/telemetry", 1, false, fmt.Sprintf(`{"temp":%d.5,"seq":%d}`, i%40, i)))
	}
	for _, tok := range toks {
		if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	delivered(t, c)
	return want
}

// delivered returns once the broker has handed every message c published
// to the sessions that subscribe to it. mochi acknowledges a publish before
// it delivers it, and a session taken over meanwhile (a source connecting
// to its presubscribed session) loses the message; a broker handles a
// client's packets in order, so the acknowledgement of one more publish,
// to a topic nobody subscribes to, says the ones before it are delivered.
func delivered(t testing.TB, c paho.Client) {
	t.Helper()
	if tok := c.Publish("cairn-test/delivered", 1, false, "fence"); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("publish the fence: %v", tok.Error())
	}
}

func TestSourceToSinkThroughBroker(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b testBroker) {
		id := "cairn-test"
		presubscribe(t, b.url, id+"-0", "sensors/+/telemetry")
		logs, err := ingest.OpenLogs(filepath.Join(t.TempDir(), "ingest"), ingest.LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer logs.Close()
		want := publish(t, b.url, 3000, 20)
		// Malformed input goes to the dead letters and stops nothing.
		bad := client(t, b.url, "bad-publisher", true)
		for _, p := range []string{`{not json`, `{"temp":"hot"}`, `[1,2]`, `{"temp":1` + strings.Repeat(" ", 300<<10) + `}`} {
			if tok := bad.Publish("sensors/dx/telemetry", 1, false, p); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
				t.Fatalf("publish: %v", tok.Error())
			}
		}
		delivered(t, bad)
		bad.Disconnect(100)
		out := collect(t, b.url, "consumer", want)
		deadSeen := make(chan ingest.ShownDeadLetter, 10)
		dlc := client(t, b.url, "dead-letter-consumer", true)
		defer dlc.Disconnect(100)
		if tok := dlc.Subscribe("dead/"+id, 1, func(_ paho.Client, m paho.Message) {
			var dl ingest.ShownDeadLetter
			if json.Unmarshal(m.Payload(), &dl) == nil {
				deadSeen <- dl
			}
		}); tok.Wait() && tok.Error() != nil {
			t.Fatal(tok.Error())
		}

		metrics := new(SourceMetrics)
		cfg := checkpoint.DefaultConfig()
		cfg.Interval = 20 * time.Millisecond
		stop := runInBackground(t, countPipeline(t, b.url, id, logs, metrics), runtime.Options{Checkpoints: cfg})
		defer stop()
		testwait.Recv(t, out.done, 30*time.Second, "every count at the sink")
		// The malformed messages came last, in a group of their own.
		testwait.For(t, 30*time.Second, "the dead letters counted", func() bool { return metrics.DeadLetters.Load() >= 4 })
		// They are published as they are read, without waiting for the
		// broker: wait for them before the source stops.
		var published []ingest.ShownDeadLetter
		for range 4 {
			published = append(published, testwait.Recv(t, deadSeen, 10*time.Second, "a dead letter on the dead-letter topic"))
		}
		stop()
		out.check(t)
		if got := metrics.DeadLetters.Load(); got != 4 {
			t.Fatalf("%d dead letters counted, want 4", got)
		}
		dls, err := logs.DeadLetters(0, 10)
		if err != nil || len(dls) != 4 {
			t.Fatalf("DeadLetters = %d, %v; want 4", len(dls), err)
		}
		for _, dl := range published {
			if dl.Reason == "" || dl.Topic != "sensors/dx/telemetry" || dl.Seq == 0 || dl.Time.IsZero() || dl.PayloadBytes == 0 {
				t.Fatalf("dead letter on the topic: %+v", dl)
			}
		}
		// Of a payload over the limit, the ingest log holds a byte more
		// than the limit (enough to tell, and never more than a record can
		// hold), and its dead letter keeps what every dead letter keeps, and
		// that length.
		for _, dl := range dls {
			if strings.Contains(dl.Reason, "over the limit") && (len(dl.Payload) != ingest.MaxDeadLetterPayload || dl.Size != 256<<10+1) {
				t.Errorf("the dead letter of a payload of %d bytes keeps %d of them and says it had %d, want %d of %d",
					300<<10+10, len(dl.Payload), dl.Size, ingest.MaxDeadLetterPayload, 256<<10+1)
			}
		}
		reasons := fmt.Sprint(dls[0].Reason, "|", dls[1].Reason, "|", dls[2].Reason, "|", dls[3].Reason)
		for _, want := range []string{"malformed JSON", `value field "temp" is a string, want a number`, "not an object", "over the limit of"} {
			if !strings.Contains(reasons, want) {
				t.Errorf("dead letter reasons %q lack %q", reasons, want)
			}
		}
	})
}

// TestParallelSourcePartitionsTopics runs two source subtasks, each on a
// session of its own that subscribes to every topic: each subtask logs the
// messages of its topics and skips the others, so each is logged and
// counted once.
func TestParallelSourcePartitionsTopics(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b testBroker) {
		id := "cairn-parallel"
		for i := range 2 {
			presubscribe(t, b.url, fmt.Sprintf("%s-%d", id, i), "sensors/+/telemetry")
		}
		logs, err := ingest.OpenLogs(filepath.Join(t.TempDir(), "ingest"), ingest.LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer logs.Close()
		want := publish(t, b.url, 2000, 10)
		out := collect(t, b.url, "parallel-consumer", want)
		metrics := new(SourceMetrics)
		cfg := checkpoint.DefaultConfig()
		cfg.Interval = 20 * time.Millisecond
		stop := runInBackground(t, countPipelineN(t, b.url, id, 2, logs, metrics), runtime.Options{Checkpoints: cfg})
		defer stop()
		testwait.Recv(t, out.done, 30*time.Second, "every count at the sink")
		stop()
		out.check(t)
		if got, skipped := metrics.Logged.Load(), metrics.Skipped.Load(); got != 2000 || skipped != 2000 {
			t.Fatalf("the two subtasks logged %d messages and skipped %d, want 2000 and 2000", got, skipped)
		}
		checkPartitioned(t, logs, "mqtt", 2)
	})
}

// checkPartitioned checks that every subtask's log of source name, of
// parallelism n, holds only messages of its topics, and that each holds
// some.
func checkPartitioned(t *testing.T, logs *ingest.Logs, name string, n int) {
	t.Helper()
	for i := range n {
		l, err := logs.Log(fmt.Sprintf("%s/%d", name, i))
		if err != nil {
			t.Fatal(err)
		}
		topics := map[string]bool{}
		if _, err := l.Read(l.First(), int(l.Next()-l.First()), func(_ uint64, m ingest.Message) error {
			topics[m.Topic] = true
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(topics) == 0 {
			t.Errorf("subtask %d logged no topic", i)
		}
		for topic := range topics {
			if s := topicSubtask(topic, n); s != i {
				t.Errorf("subtask %d logged %s, a topic of subtask %d", i, topic, s)
			}
		}
	}
}

// TestSourceOffsets checks the log positions a source keeps: a checkpoint
// from elsewhere continues an empty log at its offset, an offset past a
// log's end is refused, and truncation keeps the input of the retained
// checkpoints.
func TestSourceOffsets(t *testing.T) {
	db, err := ingest.OpenLogs(filepath.Join(t.TempDir(), "ingest"), ingest.LogOptions{SegmentBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l, _ := db.Log("fresh/0")
	if err := l.SkipTo(5000); err != nil || l.First() != 5000 || l.Next() != 5000 {
		t.Fatalf("SkipTo on an empty log: %v, [%d, %d)", err, l.First(), l.Next())
	}
	if first, _ := l.Append([]ingest.Message{{Topic: "t"}}); first != 5000 {
		t.Fatalf("first message after SkipTo at %d, want 5000", first)
	}
	if err := l.SkipTo(9000); err == nil || !strings.Contains(err.Error(), "the log lost its end") {
		t.Fatalf("SkipTo past a non-empty log's end = %v", err)
	}

	src := &source{cfg: SourceConfig{RetainCheckpoints: 2}}
	src.log, _ = db.Log("retain/0")
	for range 3 * ingest.RedeliveryWindow / 10 {
		if _, err := src.log.Append(make([]ingest.Message, 10)); err != nil {
			t.Fatal(err)
		}
	}
	for _, off := range []uint64{2000, 4000, 6000} {
		if err := src.CommitOffset(off); err != nil {
			t.Fatal(err)
		}
	}
	// Whole segments of 1 KiB hold about 160 empty messages.
	if got := src.log.First(); got > 4000 || got < 4000-200 {
		t.Fatalf("after commits at 2000, 4000, 6000 with 2 retained, the log starts at %d, want the segment holding 4000", got)
	}
}

// TestSinkRejectsWhatItCannotEncode: a record JSON cannot encode is
// rejected (graph.RecordError: counted, logged once a minute, a dead
// letter), counted apart as unencodable, and the sink goes on.
func TestSinkRejectsWhatItCannotEncode(t *testing.T) {
	metrics := new(SinkMetrics)
	s := NewSink(SinkConfig{Topic: "out", Metrics: metrics})(0)
	var rejected *graph.RecordError
	if err := s.ProcessRecord(0, &graph.Record{Key: "k", Value: math.NaN()}); !errors.As(err, &rejected) || !strings.Contains(err.Error(), "cannot be encoded as JSON") {
		t.Fatalf("a NaN: %v, want it rejected", err)
	}
	if err := s.ProcessRecord(0, &graph.Record{Key: "k", Value: 1}); err != nil {
		t.Fatal(err)
	}
	if metrics.Unencodable.Load() != 1 || metrics.Staged.Load() != 1 {
		t.Fatalf("unencodable %d, staged %d; want 1 and 1", metrics.Unencodable.Load(), metrics.Staged.Load())
	}
}

// TestCommitOffsetRetainsAsTheStoreDoes: checkpoints completed at the
// offset of the one before (as those that changed nothing are, which the
// store keeps no record of) do not push the truncation past the older
// checkpoints the store retains.
func TestCommitOffsetRetainsAsTheStoreDoes(t *testing.T) {
	logs, err := ingest.OpenLogs(t.TempDir(), ingest.LogOptions{SegmentBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	l, err := logs.Log("src/0")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 400 { // groups that do not deflate: a segment holds about 1300 messages
		group := make([]ingest.Message, 100)
		for i := range group {
			group[i] = ingest.Message{Topic: "a/t", Payload: binary.LittleEndian.AppendUint64(nil, rng.Uint64())}
		}
		if _, err := l.Append(group); err != nil {
			t.Fatal(err)
		}
	}
	s := &source{log: l, cfg: SourceConfig{RetainCheckpoints: 3}}
	for _, offset := range []uint64{10_000, 20_000, 30_000, 30_000, 30_000, 30_000} {
		if err := s.CommitOffset(offset); err != nil {
			t.Fatal(err)
		}
	}
	if l.First() > 10_000 {
		t.Fatalf("the log starts at %d, past checkpoint offset 10000, which the store retains", l.First())
	}
	if err := s.CommitOffset(35_000); err != nil || l.First() > 20_000 || l.First() <= 10_000 {
		t.Fatalf("after a fourth checkpoint the log starts at %d (%v), want past 10000 and at most 20000", l.First(), err)
	}
}

func TestCheckBrokerURL(t *testing.T) {
	for raw, wantTLS := range map[string]bool{
		"tcp://broker:1883": false, "mqtt://10.0.0.1:1883": false, "ssl://b.example:8883": true, "TLS://b:8883": true,
		"mqtts://b:8883": true, "tcp://[::1]:1883": false, "ws://b/mqtt": false, "wss://b:443/mqtt": true,
		"unix:///run/mosquitto.sock": false, "tcp://user:secret@b:1883": false,
	} {
		if usesTLS, err := CheckBrokerURL(raw); err != nil || usesTLS != wantTLS {
			t.Errorf("%s: TLS %v, %v; want %v, nil", raw, usesTLS, err, wantTLS)
		}
	}
	for raw, want := range map[string]string{
		"broker.example:1883":          `URL "broker.example:1883" has no scheme: write tcp://broker.example:1883 (or ssl:// for TLS)`,
		"localhost":                    `write tcp://localhost:1883 (or ssl:// for TLS)`,
		"http://b:80":                  `URL "http://b:80": scheme "http" is none of tcp, mqtt, ssl, tls, mqtts, mqtt+ssl, tcps, ws, wss, unix`,
		"tcp://b":                      `URL "tcp://b" has no port: write tcp://b:1883`,
		"ssl://b":                      `write ssl://b:8883`,
		"tcp://:1883":                  `URL "tcp://:1883" names no host: write tcp://HOST:1883`,
		"tcp://b:70000":                `port 70000 is outside 1..65535`,
		"tcp://b:0":                    `port 0 is outside 1..65535`,
		"tcp://user:secret@b:http":     `URL "tcp://user:xxxxx@b:http": invalid port ":http" after host`,
		"tcp://user:secret@b":          `URL "tcp://user:xxxxx@b" has no port`,
		"user:secret@b:1883":           `URL "user:xxxxx@b:1883" has no scheme`,
		"unix://":                      `names no socket`,
		"://b:1883":                    `has no scheme`,
		"tcp://user:secret@b:1883/%zz": `URL "tcp://user:xxxxx@b:1883/%zz": invalid URL escape "%zz"`,
	} {
		_, err := CheckBrokerURL(raw)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: %v, want %q (and no password)", raw, err, want)
		}
	}
	// CheckBrokerURL knows the schemes dial knows.
	for _, scheme := range append(brokerSchemes, "http") {
		_, err := dial(&url.URL{Scheme: scheme, Host: "127.0.0.1:1"}, *paho.NewClientOptions(), 0)
		if unknown := err != nil && strings.Contains(err.Error(), "unknown scheme"); unknown != (scheme == "http") {
			t.Errorf("dial with scheme %s: %v", scheme, err)
		}
	}
}
