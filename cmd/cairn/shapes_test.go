package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

const shapesConfig = `agent:
  data_dir: %s
brokers:
  local:
    url: %s
    client_id: shapes
checkpoints:
  interval: 200ms
sources:
  - id: readings
    broker: local
    topics: ["shapes/in/{device}"]
    key: device
    value: temp
    time: ts
    dead_letter_topic: shapes/dead
operators:
  - {id: per-device, type: window, inputs: [readings], key_by: key, window: {kind: tumbling, size: 1s}, aggregate: avg}
  - {id: counts, type: count, inputs: [readings], key_by: key}
  - {id: alarm, type: threshold, inputs: [readings], key_by: key, high: 30, low: 20}
sinks:
  - id: avg
    input: per-device
    broker: local
    topic: shapes/avg/{key}
    output:
      time: both
      names: {key: device, value: temperature}
      add: {gateway: gw-7}
  - id: counts-v1
    input: counts
    broker: local
    topic: shapes/count/{key}
    output: {version: 1}
  - {id: alarms, input: alarm, broker: local, topic: "shapes/alarm/{key}"}
`

// TestOutputShapes publishes readings through a running agent and reads
// what its sinks and its dead-letter topic carry: version 2 (the
// default) with its fields renamed and added and times both ways, version
// 1 as before (no "v"), an alarm with its reading as its value, and a
// dead letter on the topic in the very shape `cairn deadletters --json`
// prints it, a payload that is no text in base64.
func TestOutputShapes(t *testing.T) {
	r := newBrokerRun(t, "shapes", shapesConfig)
	var mu sync.Mutex
	heard := map[string][]map[string]any{} // by topic's second level
	raw := map[string][]string{}
	sub := paho.NewClient(paho.NewClientOptions().AddBroker(r.broker.URL).SetClientID("shapes-watcher").
		SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
			var v map[string]any
			json.Unmarshal(m.Payload(), &v)
			kind := strings.Split(m.Topic(), "/")[1]
			mu.Lock()
			heard[kind] = append(heard[kind], v)
			raw[kind] = append(raw[kind], string(m.Payload()))
			mu.Unlock()
		}))
	if tok := sub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	defer sub.Disconnect(100)
	if tok := sub.Subscribe("shapes/#", 1, nil); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	agent := r.start(t)
	defer agent.Stop(time.Minute)
	r.awaitSubscribed(t, "readings", "shapes/in/+")
	const at = 1_700_000_000_000
	for i, temp := range []float64{25, 35, 36, 15} {
		r.pub.Publish("shapes/in/d1", 1, false, fmt.Sprintf(`{"temp": %v, "ts": %d}`, temp, at+int64(i)*1000)).Wait()
	}
	r.pub.Publish("shapes/in/d1", 1, false, []byte{0xff, 0xfe, 'x'}).Wait()
	testwait.For(t, time.Minute, "windows, counts, alarms and a dead letter", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(heard["avg"]) >= 3 && len(heard["count"]) >= 4 && len(heard["alarm"]) >= 2 && len(heard["dead"]) >= 1
	})
	mu.Lock()
	defer mu.Unlock()

	var window map[string]any
	for _, w := range heard["avg"] {
		if w["device"] == "d1" && w["start"] == float64(at) {
			window = w
		}
	}
	if window == nil || window["v"] != float64(2) || window["operator"] != "per-device" || window["aggregate"] != "avg" ||
		window["temperature"] != float64(25) || window["count"] != float64(1) || window["end"] != float64(at+1000) ||
		window["start_rfc3339"] != "2023-11-14T22:13:20.000Z" || window["time"] != float64(at+999) || window["gateway"] != "gw-7" ||
		window["key"] != nil || window["value"] != nil {
		t.Errorf("a window's output, version 2, key and value renamed, a gateway added, times both ways: %v\nheard %s", window, raw["avg"])
	}
	for _, c := range heard["count"] {
		if _, ok := c["v"]; ok || c["id"] == nil || c["key"] == nil || c["value"] == nil {
			t.Errorf("a count's output, version 1: %v", c)
		}
	}
	raised := heard["alarm"][0]
	if raised["raised"] != true || raised["value"] != float64(35) || raised["operator"] != "alarm" {
		t.Errorf("an alarm: %v, want raised by the reading 35", raised)
	}

	// The dead letter on its topic is the line `cairn deadletters --json`
	// prints for it.
	var onTopic api.DeadLetter
	if err := json.Unmarshal([]byte(raw["dead"][len(raw["dead"])-1]), &onTopic); err != nil || onTopic.PayloadEncoding != "base64" || onTopic.Payload != "//54" {
		t.Fatalf("dead letter on the topic: %v, %s", err, raw["dead"])
	}
	out, err := exec.Command(r.bin, "deadletters", "--json", "-c", r.file).Output()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for line := range strings.Lines(string(out)) {
		var dl api.DeadLetter
		json.Unmarshal([]byte(line), &dl)
		if dl.Seq == onTopic.Seq {
			found = true
			if strings.TrimSpace(line) != raw["dead"][len(raw["dead"])-1] {
				t.Errorf("the dead letter on the topic:\n%s\nand as cairn deadletters --json prints it:\n%s", raw["dead"][len(raw["dead"])-1], line)
			}
		}
	}
	if !found || onTopic.Seq == 0 {
		t.Errorf("dead letter %d on the topic is not listed:\n%s", onTopic.Seq, out)
	}
	cairntest.AwaitStatus(t, r.socket, "running", time.Minute, func(st api.Status) bool { return st.State == "running" })
}
