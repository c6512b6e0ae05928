package main

import (
	"fmt"
	"slices"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

// emptyKeyConfig has the gateway pipeline's shape (configs/gateway.yaml:
// the device from a topic level as the key, a keyed window), a count keyed
// by a payload field that is the key of another source, and a count keyed
// by a payload field with key_by.
const emptyKeyConfig = `agent:
  data_dir: %s
brokers:
  plant:
    url: %s
    client_id: emptykey
checkpoints:
  interval: 200ms
sources:
  - id: telemetry
    broker: plant
    topics:
      - sensors/{device}/telemetry
    key: device
    value: temp
    time: ts
  - id: events
    broker: plant
    topics: [events/x]
    key: k
    value: v
operators:
  - id: per-device
    type: window
    inputs: [telemetry]
    key_by: key
    window: {kind: tumbling, size: 1s}
    aggregate: count
  - id: per-k
    type: count
    inputs: [events]
    key_by: key
  - id: per-site
    type: count
    inputs: [telemetry]
    key_by: site
sinks:
  - {id: out-k, input: per-k, broker: plant, topic: "emptykey/k/{key}"}
  - {id: out-site, input: per-site, broker: plant, topic: "emptykey/site/{key}"}
  - {id: out-device, input: per-device, broker: plant, topic: "emptykey/device/{key}"}
`

// TestEmptyKeysAreKeys: a device that publishes to sensors//telemetry (an
// empty topic level), sends {"k": ""} where k is the key, or "site": ""
// where the operator is keyed by site, has the empty key: its readings
// are counted under it like any other's, across a kill -9 and the replay
// that follows, and the agent never stops. An empty key stopped the job
// once, on every restart again.
func TestEmptyKeysAreKeys(t *testing.T) {
	r := newBrokerRun(t, "emptykey", emptyKeyConfig)
	watch := func(sink string) *outputWatcher {
		return watchOutputs(t, paho.NewClientOptions().AddBroker(r.broker.URL).SetClientID("emptykey-"+sink), "emptykey/"+sink+"/#")
	}
	byK, bySite, byDevice := watch("k"), watch("site"), watch("device")
	publish := func(topic, payload string) {
		if tok := r.pub.Publish(topic, 1, false, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	feed := func(from, to int) {
		for i := from; i < to; i++ {
			ts := 1_700_000_000_000 + int64(i)*1000 // a window a reading
			publish("sensors//telemetry", fmt.Sprintf(`{"temp": %d, "ts": %d, "site": ""}`, i, ts))
			publish("sensors/d1/telemetry", fmt.Sprintf(`{"temp": %d, "ts": %d, "site": "north"}`, i, ts))
			publish("events/x", fmt.Sprintf(`{"k": "", "v": %d}`, i))
		}
	}
	first := r.start(t)
	r.awaitSubscribed(t, "telemetry", "sensors/+/telemetry")
	r.awaitSubscribed(t, "events", "events/x")
	feed(0, 20)
	cairntest.AwaitStatus(t, r.socket, "the first readings counted", time.Minute, func(st api.Status) bool {
		return st.RecordsOut("per-k") >= 10
	})
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}

	second := r.start(t)
	feed(20, 40)
	// The empty key's counts go 1..40 once, as north's do; the device
	// with the empty name has a window a second, each of one reading, as
	// d1 does: 39 of them closed by the watermarks of the 40 readings.
	byK.awaitCounts(t, time.Minute, map[string]int{"": 40}, nil)
	bySite.awaitCounts(t, time.Minute, map[string]int{"": 40, "north": 40}, nil)
	byDevice.await(t, time.Minute, "39 windows of the empty device and of d1", func(values map[string][]float64) bool {
		return len(values[""]) == 39 && len(values["d1"]) == 39 && !slices.ContainsFunc(values[""], func(v float64) bool { return v != 1 })
	})
	st := cairntest.AwaitStatus(t, r.socket, "the agent running", time.Minute, func(st api.Status) bool { return st.State == "running" })
	for _, op := range st.Operators {
		if op.Rejected() != 0 {
			t.Errorf("%s rejected %d records; an empty key is a key", op.ID, op.Rejected())
		}
	}
	if err := second.Stop(time.Minute); err != nil {
		t.Fatalf("agent stopped with %v", err)
	}
}
