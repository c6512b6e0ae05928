package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
	"github.com/cairn-edge/cairn/mqttio"
)

// outputWatcher is a subscriber of a sink's output: each key's values in
// the order they arrived, repeated ids dropped (the sink's guarantee is
// exactly-once after dropping them), and every message as it arrived,
// repeats included.
type outputWatcher struct {
	mu     sync.Mutex
	values map[string][]float64
	ids    map[string]bool
	all    []mqttio.Output
}

// watchOutputs connects a client made from opts, subscribes it to filter
// at QoS 1, and keeps what it hears until the test ends.
func watchOutputs(t *testing.T, opts *paho.ClientOptions, filter string) *outputWatcher {
	t.Helper()
	w := &outputWatcher{values: make(map[string][]float64), ids: make(map[string]bool)}
	subscribeFor(t, opts, filter, func(payload []byte) {
		var out mqttio.Output
		if err := json.Unmarshal(payload, &out); err != nil {
			t.Errorf("output %q: %v", payload, err)
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.all = append(w.all, out)
		if !w.ids[out.ID] {
			w.ids[out.ID] = true
			w.values[out.Key] = append(w.values[out.Key], out.Value)
		}
	})
	return w
}

// subscribeFor connects a client made from opts, subscribes it to filter
// at QoS 1, and hands each message's payload, in order, to heard until
// the test ends.
func subscribeFor(t *testing.T, opts *paho.ClientOptions, filter string, heard func(payload []byte)) {
	t.Helper()
	c := paho.NewClient(opts.SetOrderMatters(true).SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) { heard(m.Payload()) }))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("output subscriber: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	if tok := c.Subscribe(filter, 1, nil); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe to %s: %v", filter, tok.Error())
	}
}

// read calls f with each key's values heard so far, which f must not
// keep.
func (w *outputWatcher) read(f func(values map[string][]float64)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(w.values)
}

// arrivals lists, one per line, what arrived for key (id and value,
// repeats included) from its from-th distinct value to its to-th; the
// caller holds the watcher locked (read).
func (w *outputWatcher) arrivals(key string, from, to int) string {
	var b strings.Builder
	seen := make(map[string]bool)
	for _, o := range w.all {
		if o.Key != key {
			continue
		}
		if n := len(seen); n >= max(from, 0) && n <= to {
			fmt.Fprintf(&b, "  %s %v\n", o.ID, o.Value)
		}
		seen[o.ID] = true
	}
	return b.String()
}

// await returns once f holds for the values heard, and fails the test
// if it does not within d.
func (w *outputWatcher) await(t *testing.T, d time.Duration, what string, f func(values map[string][]float64) bool) {
	t.Helper()
	w.awaitAll(t, d, what, func([]mqttio.Output) bool { return f(w.values) })
}

// awaitAll returns every message heard, repeats included, once f holds
// for them; it fails the test if f does not hold within d. f is called
// with the watcher locked.
func (w *outputWatcher) awaitAll(t *testing.T, d time.Duration, what string, f func(all []mqttio.Output) bool) []mqttio.Output {
	t.Helper()
	var all []mqttio.Output
	if testwait.Poll(d, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		if f(w.all) {
			all = slices.Clone(w.all)
		}
		return all != nil
	}) {
		return all
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	heard := make([]string, 0, len(w.values))
	for _, k := range slices.Sorted(maps.Keys(w.values)) {
		heard = append(heard, fmt.Sprintf("%s:%d", k, len(w.values[k])))
	}
	t.Fatalf("waited %v for %s; values heard per key: %s", d, what, strings.Join(heard, " "))
	return nil
}

// awaitCounts waits at most d until every key of want has had the counts
// 1..want[key], each once and in order: a count per reading, none lost or
// counted twice. Each time they are not yet there it calls between, if
// set.
func (w *outputWatcher) awaitCounts(t *testing.T, d time.Duration, want map[string]int, between func()) {
	t.Helper()
	var heard string
	if !testwait.Poll(d, func() bool {
		w.mu.Lock()
		done := true
		for k, n := range want {
			cs := w.values[k]
			done = done && len(cs) == n
			for i, c := range cs {
				done = done && c == float64(i+1)
			}
		}
		heard = fmt.Sprint(w.values)
		w.mu.Unlock()
		if done {
			return true
		}
		if between != nil {
			between()
		}
		return false
	}) {
		t.Fatalf("each key's counts must go 1..%v once; after %v: %s", want, d, heard)
	}
}

// brokerRun is what the tests of readings through a real mosquitto start
// from: the broker, the built binary, a pipeline file (its config
// formatted with the data directory and the broker's URL), and a
// connected publisher.
type brokerRun struct {
	broker                  *mosquittotest.Broker
	name                    string
	bin, data, file, socket string
	pub                     paho.Client
	// started is how many subscriptions the broker had logged when start
	// last started an agent.
	started int
}

// newBrokerRun sets up a brokerRun; name prefixes its clients' ids, and
// the config's broker names it as its client_id.
func newBrokerRun(t *testing.T, name, config string) *brokerRun {
	t.Helper()
	r := &brokerRun{broker: mosquittotest.Start(t, t.TempDir(), nil), name: name, bin: cairntest.Build(t, "cairn")}
	dir := t.TempDir()
	r.data, r.file = filepath.Join(dir, "data"), filepath.Join(dir, "pipeline.yaml")
	r.socket = filepath.Join(r.data, "cairn.sock")
	if err := os.WriteFile(r.file, fmt.Appendf(nil, config, r.data, r.broker.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	r.pub = paho.NewClient(paho.NewClientOptions().AddBroker(r.broker.URL).SetClientID(name + "-feeder"))
	if tok := r.pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("feeder: %v", tok.Error())
	}
	t.Cleanup(func() { r.pub.Disconnect(100) })
	return r
}

// start starts an agent on the run's pipeline file (startAgent), for
// awaitSubscribed to wait for its subscriptions.
func (r *brokerRun) start(t *testing.T, args ...string) *cairntest.Proc {
	t.Helper()
	r.started = len(r.broker.Subscriptions())
	return startAgent(t, r.bin, r.file, args...)
}

// awaitSubscribed returns once the client of source (of parallelism 1)
// of the agent start started last has subscribed to filter, as the
// broker logs it: from then on every message published to filter reaches
// the source. It publishes nothing, so the records the source reads are
// the test's readings alone, and a status count of them is exact.
func (r *brokerRun) awaitSubscribed(t *testing.T, source, filter string) {
	t.Helper()
	want := mosquittotest.Subscription{Client: r.name + "-" + source + "-0", QoS: 1, Filter: filter}
	testwait.For(t, time.Minute, fmt.Sprintf("%s's subscription to %s", want.Client, filter), func() bool {
		return slices.Contains(r.broker.Subscriptions()[r.started:], want)
	})
}
