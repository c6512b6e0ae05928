package main

import (
	"fmt"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// lookupConfig adds to each reading its device's set point, which a
// controller publishes retained.
const lookupConfig = `agent:
  data_dir: %s
brokers:
  local:
    url: %s
    client_id: lookup
checkpoints:
  interval: 300ms
sources:
  - id: setpoints
    broker: local
    topics: ["setpoints/{device}"]
    key: device
    value: target
    fields: {target: number, mode: string}
  - id: readings
    broker: local
    topics: ["plant/{device}"]
    key: device
    value: temperature
    fields: {temperature: number, seq: number}
operators:
  - id: checked
    type: lookup_join
    inputs: [readings, setpoints]
    key_by: key
sinks:
  - id: out
    input: checked
    broker: local
    topic: "plant/checked/{key}"
`

// TestReadingsMeetTheirSetPointsAcrossKill9 runs a lookup join through
// the binary against mosquitto: set points published retained, readings,
// a kill -9 while they are joined, the set points changed after the
// restart, more readings. Each reading is published joined with the set
// point its device had when it came, exactly: the first set points' for
// the readings before the change, though the restart replays some of
// them and the broker sends the retained set points again; the new ones'
// after it. None is dropped for want of a set point.
func TestReadingsMeetTheirSetPointsAcrossKill9(t *testing.T) {
	const devices, perHalf = 4, 10
	r := newBrokerRun(t, "lookup", lookupConfig)
	rows := watchRows(t, paho.NewClientOptions().AddBroker(r.broker.URL).SetClientID("lookup-watcher"), "plant/checked/#")
	setpoint := func(d, round int) (target float64, mode string) {
		return float64(20 + 10*round + d), []string{"auto", "eco"}[round]
	}
	publishSetpoints := func(round int) {
		for d := range devices {
			target, mode := setpoint(d, round)
			topic, body := fmt.Sprintf("setpoints/m%d", d), fmt.Sprintf(`{"target":%v,"mode":%q}`, target, mode)
			if tok := r.pub.Publish(topic, 1, true, body); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				t.Fatalf("publish to %s: %v", topic, tok.Error())
			}
		}
	}
	sendReadings := func(half int) {
		for i := range perHalf {
			for d := range devices {
				seq := half*perHalf + i
				publish(t, r.pub, fmt.Sprintf("plant/m%d", d), fmt.Sprintf(`{"temperature":%v,"seq":%d}`, 18+float64(seq)/4, seq))
			}
		}
	}
	// checkpointedAfter waits until the sources have read n set points
	// and a checkpoint triggered after that completed: the join holds
	// them, in a checkpoint a restart restores.
	checkpointedAfter := func(n int64) {
		var since int64
		cairntest.AwaitStatus(t, r.socket, fmt.Sprintf("%d set points read", n), time.Minute, func(st api.Status) bool {
			if l := st.Checkpoints.LastCompleted; l != nil {
				since = int64(l.ID)
			}
			return st.RecordsOut("setpoints") >= n
		})
		cairntest.AwaitStatus(t, r.socket, "a checkpoint after them", time.Minute, func(st api.Status) bool {
			return st.Checkpoints.LastCompleted != nil && int64(st.Checkpoints.LastCompleted.ID) > since+1
		})
	}
	// joined returns the readings published so far, by device and
	// sequence number, failing the test if one was published twice
	// differently.
	type reading struct {
		device string
		seq    int
	}
	joined := func() map[reading]map[string]any {
		out := map[reading]map[string]any{}
		for _, row := range rows.byID(t) {
			p, _ := row["payload"].(map[string]any)
			k := reading{fmt.Sprint(row["key"]), int(p["seq"].(float64))}
			if prev, ok := out[k]; ok && fmt.Sprint(prev["payload"]) != fmt.Sprint(p) {
				t.Fatalf("reading %v published twice, differently:\n%v\n%v", k, prev, row)
			}
			out[k] = row
		}
		return out
	}

	first := r.start(t)
	r.awaitSubscribed(t, "setpoints", "setpoints/+")
	r.awaitSubscribed(t, "readings", "plant/+")
	publishSetpoints(0)
	checkpointedAfter(devices)
	sendReadings(0)
	cairntest.AwaitStatus(t, r.socket, "readings joined", time.Minute, func(st api.Status) bool {
		return st.RecordsOut("checked") >= 2*devices
	})
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}

	second := r.start(t)
	r.awaitSubscribed(t, "setpoints", "setpoints/+")
	r.awaitSubscribed(t, "readings", "plant/+")
	testwait.For(t, time.Minute, "the readings before the kill", func() bool { return len(joined()) >= devices*perHalf })
	publishSetpoints(1)
	checkpointedAfter(2 * devices) // the retained ones sent again on subscribing, and the new
	sendReadings(1)
	var got map[reading]map[string]any
	testwait.For(t, time.Minute, "every reading", func() bool { got = joined(); return len(got) >= 2*devices*perHalf })

	for k, row := range got {
		round := k.seq / perHalf
		if k.seq < 0 || round > 1 {
			t.Fatalf("output of no reading sent: %v", row)
		}
		d := int(k.device[1] - '0')
		target, mode := setpoint(d, round)
		p := row["payload"].(map[string]any)
		want := map[string]any{"temperature": 18 + float64(k.seq)/4, "setpoints_target": target, "setpoints_value": target,
			"setpoints_mode": mode, "device": k.device, "setpoints_device": k.device}
		for name, w := range want {
			if p[name] != w {
				t.Errorf("reading %v: %s is %v, want %v (%v)", k, name, p[name], w, row)
			}
		}
		if _, ok := p["setpoints_time"].(float64); !ok || row["value"] != want["temperature"] {
			t.Errorf("reading %v: no set point's time, or another value: %v", k, row)
		}
	}
	cairntest.AwaitStatus(t, r.socket, "the join's counts", time.Minute, func(st api.Status) bool {
		for _, op := range st.Operators {
			if op.ID == "checked" && op.UnmatchedRecords != 0 {
				t.Fatalf("the join dropped %d readings for want of a set point", op.UnmatchedRecords)
			}
		}
		return true
	})
	if err := second.Stop(time.Minute); err != nil {
		t.Fatalf("agent stopped with %v", err)
	}
}
