package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

// sinkTopicConfig counts readings per device, the key a payload field,
// and publishes each count to a topic with the key in it.
const sinkTopicConfig = `agent:
  data_dir: %s
  max_output_backlog: 64KiB
brokers:
  local:
    url: %s
    client_id: sinktopic
checkpoints:
  interval: 100ms
sources:
  - id: readings
    broker: local
    topics: [sinktopic/in]
    key: device
    value: seq
operators:
  - id: counts
    type: count
    inputs: [readings]
    key_by: key
sinks:
  - id: out
    input: counts
    broker: local
    topic: "sinktopic/out/{key}/count"
`

// TestSinkTopicPoisonKey feeds a running agent readings of devices of
// which one, "a#b", makes a topic with a wildcard in it, which mosquitto
// answers by dropping the sink's connection. The sink rejects those
// counts as dead letters (in status, the log and cairn deadletters, with
// the reason) and publishes every other device's counts, before and after
// the poison; the pipeline never holds its input. A device id that is a
// number of 7 digits is a key as it was written, and a valid topic level.
func TestSinkTopicPoisonKey(t *testing.T) {
	r := newBrokerRun(t, "sinktopic", sinkTopicConfig)
	bin, file, socket, pub := r.bin, r.file, r.socket, r.pub
	outputs := watchOutputs(t, paho.NewClientOptions().AddBroker(r.broker.URL).SetClientID("sinktopic-watcher"), "sinktopic/out/#")

	agent := r.start(t)
	r.awaitSubscribed(t, "readings", "sinktopic/in")
	var held atomic.Bool
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() { // the input must never be held
		defer close(watched)
		client := api.NewClient(socket)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond): // polling the control API
			}
			if st, err := client.Status(t.Context()); err == nil && st.InputHeld {
				held.Store(true)
			}
		}
	}()

	devices := []string{`"d0"`, `"a#b"`, `"d1"`, `1234567`, `"d2"`}
	want := map[string]int{}
	poison := int64(0)
	for i := range 400 {
		dev := devices[i%len(devices)]
		if dev == `"a#b"` {
			poison++
		} else {
			want[strings.Trim(dev, `"`)]++
		}
		if tok := pub.Publish("sinktopic/in", 1, false, fmt.Sprintf(`{"device":%s,"seq":%d}`, dev, i)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	agent.Await(t, regexp.MustCompile(`level=WARN msg="operator rejected a record" operator=out subtask=0 on_error=dead-letter `+
		regexp.QuoteMeta(`reason="sink out: topic \"sinktopic/out/a#b/count\" is not a valid MQTT topic: contains the wildcard #" stored=true`)), time.Minute)

	outputs.awaitCounts(t, time.Minute, want, nil)
	outputs.read(func(counts map[string][]float64) {
		if len(counts["a#b"]) > 0 {
			t.Errorf("a#b's counts were published: %v", counts["a#b"])
		}
	})
	st := cairntest.AwaitStatus(t, socket, "every poison count rejected", time.Minute, func(st api.Status) bool {
		for _, op := range st.Operators {
			if op.ID == "out" {
				return op.Rejected() == poison
			}
		}
		return false
	})
	close(stop)
	<-watched
	if st.State != "running" || st.InputHeld || held.Load() {
		t.Fatalf("state %q, input held %v (ever: %v); want running, never held", st.State, st.InputHeld, held.Load())
	}

	out, err := exec.Command(bin, "deadletters", "--json", "-c", file).Output()
	if err != nil {
		t.Fatalf("cairn deadletters: %v", err)
	}
	n := 0
	for line := range strings.Lines(string(out)) {
		var dl api.DeadLetter
		if err := json.Unmarshal([]byte(line), &dl); err != nil {
			t.Fatalf("cairn deadletters --json printed %q: %v", line, err)
		}
		if dl.Operator != "out/0" || dl.Reason != `sink out: topic "sinktopic/out/a#b/count" is not a valid MQTT topic: contains the wildcard #` ||
			!strings.Contains(dl.Payload, `"key":"a#b"`) {
			t.Fatalf("dead letter %+v, want one of sink out/0 with the record and the reason", dl)
		}
		n++
	}
	// At most 10 an operator's a minute are stored; the count is exact.
	if n < 1 || n > 10 {
		t.Fatalf("%d dead letters, want 1 to 10 of the %d rejected:\n%s", n, poison, out)
	}
	agent.Signal(syscall.SIGTERM)
	if err := agent.Wait(); err != nil {
		t.Fatalf("agent stopped with %v", err)
	}
}
