package mqttio

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/ingest"
	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
	"github.com/cairn-edge/cairn/internal/testing/testlog"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
	"github.com/cairn-edge/cairn/runtime"
)

// recorder gathers what an operator's subtasks process: every key's
// values, in the order processed.
type recorder struct {
	mu     sync.Mutex
	seen   map[string][]int
	n, end int
	done   chan struct{}
}

func newRecorder(end int) *recorder {
	return &recorder{seen: map[string][]int{}, end: end, done: make(chan struct{})}
}

func (r *recorder) operator(int) graph.Operator { return recordOp{r: r} }

type recordOp struct {
	graph.BaseOperator
	r *recorder
}

func (o recordOp) ProcessRecord(_ int, rec *graph.Record) error {
	r := o.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[rec.Key] = append(r.seen[rec.Key], int(rec.Value))
	if r.n++; r.n == r.end {
		close(r.done)
	}
	return nil
}

// check verifies that every key's values are 0, 1, ... want[key]-1, each
// once and in order.
func (r *recorder) check(t *testing.T, want map[string]int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, n := range want {
		got := r.seen[k]
		seq := make([]int, n)
		for i := range seq {
			seq[i] = i
		}
		if !slices.Equal(got, seq) {
			t.Errorf("device %s: %d values %v, want 0..%d in order", k, len(got), got, n-1)
		}
	}
}

// recordPipeline is an MQTT source of parallelism 2 on
// sensors/{device}/telemetry, keyed by device, each record's value the
// reading's seq, and rec's operator.
func recordPipeline(t *testing.T, url, id string, logs *ingest.Logs, rec *recorder) (*graph.Topology, *SourceMetrics) {
	t.Helper()
	filter, fields, err := ParseTopicPattern("sensors/{device}/telemetry")
	if err != nil {
		t.Fatal(err)
	}
	metrics := new(SourceMetrics)
	var b graph.Builder
	src := b.Source("mqtt", 2, NewSource(SourceConfig{
		Name: "mqtt", Client: ClientConfig{Broker: url, ClientID: id}, Topics: []string{filter},
		Decoding: Decoding{TopicFields: fields, KeyField: "device", ValueField: "seq"},
		Logs:     logs, Metrics: metrics, SyncInterval: 20 * time.Millisecond,
	}))
	b.Operator("record", 2, rec.operator, []graph.Input{graph.In(src, graph.Hash(nil))})
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo, metrics
}

// readings publishes n readings over devices, continuing every device's
// sequence in seq, and waits until the broker has them.
func readings(t *testing.T, url string, n, devices int, seq map[string]int) {
	t.Helper()
	c := client(t, url, fmt.Sprintf("publisher-%d", time.Now().UnixNano()), true)
	defer c.Disconnect(100)
	var toks []interface {
		WaitTimeout(time.Duration) bool
		Error() error
	}
	for i := range n {
		dev := fmt.Sprintf("d%02d", i%devices)
		toks = append(toks, c.Publish("sensors/"+dev+"/telemetry", 1, false, fmt.Sprintf(`{"seq":%d}`, seq[dev])))
		seq[dev]++
	}
	for _, tok := range toks {
		if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	delivered(t, c)
}

// TestParallelSourceKeepsItsInputAcrossBrokerRestarts restarts mosquitto
// under a source of parallelism 2 and publishes while the broker is back
// but the source has not yet reconnected (a gate holds its connections):
// every reading is processed once, and each device's in order.
func TestParallelSourceKeepsItsInputAcrossBrokerRestarts(t *testing.T) {
	dir := t.TempDir()
	broker := mosquittotest.Start(t, dir, nil)
	gate := mosquittotest.NewGate(t, broker.URL)
	id := "cairn-restart"
	for i := range 2 {
		presubscribe(t, broker.URL, fmt.Sprintf("%s-%d", id, i), "sensors/+/telemetry")
	}
	logs, err := ingest.OpenLogs(filepath.Join(dir, "ingest"), ingest.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	const devices, perPhase = 10, 300
	rec := newRecorder(4 * perPhase)
	topo, metrics := recordPipeline(t, gate.URL, id, logs, rec)
	cfg := checkpoint.DefaultConfig()
	cfg.Interval = 50 * time.Millisecond
	stop := runInBackground(t, topo, runtime.Options{Checkpoints: cfg})
	defer stop()

	seq := map[string]int{}
	readings(t, broker.URL, perPhase, devices, seq) // before
	readings(t, broker.URL, perPhase, devices, seq) // in flight at the restart, perhaps
	gate.Shut()
	if err := broker.Restart(); err != nil {
		t.Fatal(err)
	}
	readings(t, broker.URL, perPhase, devices, seq) // the source not yet back
	gate.Open()
	readings(t, broker.URL, perPhase, devices, seq) // after
	select {
	case <-rec.done:
	case <-time.After(30 * time.Second):
	}
	stop()
	rec.check(t, seq)
	if got := metrics.Logged.Load(); got != 4*perPhase {
		t.Errorf("logged %d messages, want %d", got, 4*perPhase)
	}
	checkPartitioned(t, logs, "mqtt", 2)
}

// TestMosquittoKeepsPlainNotSharedSubscriptions records what the design
// rests on (docs/DESIGN.md, section 1): across a restart with persistence
// on, mosquitto keeps a persistent session's plain subscriptions and its
// queued messages, but not its shared subscriptions (2.0 saves only the
// plain ones), so what is published after the restart reaches a shared
// subscriber only once it subscribes again. While the broker runs, it
// queues for offline members of a shared subscription their turns of it.
func TestMosquittoKeepsPlainNotSharedSubscriptions(t *testing.T) {
	broker := mosquittotest.Start(t, t.TempDir(), nil)
	sessions := map[string]string{"plain": "t/#", "shared-a": "$share/g/t/#", "shared-b": "$share/g/t/#"}
	for id, filter := range sessions {
		presubscribe(t, broker.URL, id, filter)
	}
	publishAll := func(phase string) {
		c := client(t, broker.URL, "publisher-"+phase, true)
		defer c.Disconnect(100)
		for i := range 4 {
			if tok := c.Publish(fmt.Sprintf("t/%d", i), 1, false, fmt.Sprintf("%s-%d", phase, i)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				t.Fatalf("publish: %v", tok.Error())
			}
		}
	}
	publishAll("before") // every session offline
	if err := broker.Restart(); err != nil {
		t.Fatal(err)
	}
	publishAll("after")
	got := map[string][]string{}
	for id := range sessions {
		got[id] = queued(t, broker.URL, id)
	}
	if want := []string{"before-0", "before-1", "before-2", "before-3", "after-0", "after-1", "after-2", "after-3"}; !slices.Equal(got["plain"], want) {
		t.Errorf("the plain subscriber's session held %v, want %v", got["plain"], want)
	}
	shared := slices.Sorted(slices.Values(append(slices.Clone(got["shared-a"]), got["shared-b"]...)))
	if want := []string{"before-0", "before-1", "before-2", "before-3"}; !slices.Equal(shared, want) {
		t.Errorf("the shared subscribers' sessions held %v and %v, want %v between them: what was queued before the restart, nothing after it",
			got["shared-a"], got["shared-b"], want)
	}
	if len(got["shared-a"]) != 2 {
		t.Errorf("the offline members of a shared subscription were queued %v and %v, want two messages each", got["shared-a"], got["shared-b"])
	}
}

// queued connects to id's persistent session without subscribing and
// returns the payloads its queue held: what arrives before a fence the
// client sends itself, which the broker queues behind them.
func queued(t *testing.T, url, id string) []string {
	t.Helper()
	var mu sync.Mutex
	var got []string
	fence := make(chan struct{}, 1)
	o := paho.NewClientOptions().AddBroker(url).SetClientID(id).SetCleanSession(false).SetOrderMatters(true).
		SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
			if m.Topic() == "fence/"+id {
				fence <- struct{}{}
				return
			}
			mu.Lock()
			got = append(got, string(m.Payload()))
			mu.Unlock()
		})
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connecting %s: %v", id, tok.Error())
	}
	defer c.Disconnect(100)
	if tok := c.Subscribe("fence/"+id, 1, nil); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	if tok := c.Publish("fence/"+id, 1, false, "fence"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publish: %v", tok.Error())
	}
	testwait.Recv(t, fence, 10*time.Second, "the fence behind "+id+"'s queue")
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(got)
}

// TestParallelSourceDropsAnEarlierSharedSubscription starts a source of
// parallelism 2 on sessions that still hold the shared subscription an
// earlier cairn spread it by: each subtask drops it once subscribed
// (mosquitto logs the unsubscription), and every reading is logged once.
// (A broker sends a client one copy of a message however many of its
// subscriptions match, mosquitto and mochi alike, so the two overlapping
// for a moment cost no duplicate.)
func TestParallelSourceDropsAnEarlierSharedSubscription(t *testing.T) {
	mosquittotest.Require(t)
	dir := t.TempDir()
	blog := new(testlog.Buffer)
	broker, err := mosquittotest.Run(dir, fmt.Sprintf(mosquittotest.TestSettings, dir)+"log_type unsubscribe\n", blog)
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Stop()
	id := "cairn-earlier"
	for i := range 2 {
		presubscribe(t, broker.URL, fmt.Sprintf("%s-%d", id, i), "sensors/+/telemetry")
		presubscribe(t, broker.URL, fmt.Sprintf("%s-%d", id, i), "$share/"+id+"/sensors/+/telemetry")
	}
	logs, err := ingest.OpenLogs(filepath.Join(dir, "ingest"), ingest.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	const n = 400
	rec := newRecorder(n)
	topo, metrics := recordPipeline(t, broker.URL, id, logs, rec)
	cfg := checkpoint.DefaultConfig()
	cfg.Interval = 50 * time.Millisecond
	stop := runInBackground(t, topo, runtime.Options{Checkpoints: cfg})
	defer stop()
	for i := range 2 {
		unsubscribed := fmt.Sprintf("%s-%d $share/%s/sensors/+/telemetry", id, i, id)
		testwait.For(t, 10*time.Second, "mosquitto to log "+unsubscribed, func() bool { return strings.Contains(blog.String(), unsubscribed) })
	}
	seq := map[string]int{}
	readings(t, broker.URL, n, 10, seq)
	testwait.Recv(t, rec.done, 30*time.Second, "every reading")
	stop()
	rec.check(t, seq)
	if got := metrics.Logged.Load(); got != n {
		t.Errorf("logged %d messages, want %d", got, n)
	}
}

// TestParallelSourceRefusesASharedSubscription: a source of parallelism
// above 1 needs every message on each subtask's session, which a shared
// subscription in its topics would spread instead.
func TestParallelSourceRefusesASharedSubscription(t *testing.T) {
	var b graph.Builder
	src := b.Source("mqtt", 2, NewSource(SourceConfig{Name: "mqtt", Client: ClientConfig{Broker: "tcp://127.0.0.1:1", ClientID: "x"},
		Topics: []string{"$share/g/sensors/+"}, AtMostOnce: true}))
	b.Operator("record", 1, newRecorder(1).operator, []graph.Input{graph.In(src, graph.Rebalance())})
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	job, err := runtime.New(topo, runtime.Options{Checkpoints: checkpoint.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Run(t.Context()); err == nil || !strings.Contains(err.Error(), `topic "$share/g/sensors/+" is a shared subscription`) {
		t.Fatalf("a source of parallelism 2 on a shared subscription ran: %v", err)
	}
}
