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

// rowsConfig shapes each reading into a row of its own (a map with
// fields: the topic's levels, the temperature in Fahrenheit, the
// humidity renamed) and keeps, per site, line and device (a composite
// key), every second of event time, the hottest reading, the average
// humidity and how many came.
const rowsConfig = `agent:
  data_dir: %s
brokers:
  local:
    url: %s
    client_id: rows
checkpoints:
  interval: 300ms
sources:
  - id: readings
    broker: local
    topics: ["plant/{site}/{line}/{device}"]
    value: temperature
    time: ts
    idle_timeout: 1s
    fields: {temperature: number, humidity: number}
operators:
  - id: shaped
    type: map
    inputs: [readings]
    fields:
      site: site
      line: line
      device: device
      temp_f: temperature * 9 / 5 + 32
      hum: humidity
  - id: stats
    type: window
    inputs: [shaped]
    key_by: [site, line, device]
    window: {kind: tumbling, size: 1s}
    aggregates:
      temp_f_max: max(temp_f)
      hum_avg: avg(hum)
      n: count()
sinks:
  - id: out
    input: stats
    broker: local
    topic: "plant/out/{key}"
`

// TestShapedRowsByCompositeKeyAcrossKill9 runs rowsConfig through the
// binary against mosquitto, with a kill -9 half way: each window of each
// site, line and device is published once, under the readable key of
// its three parts ("north/line-2/dev-7", a % in a part escaped), with
// the figures a plain computation over the readings sent gives.
func TestShapedRowsByCompositeKeyAcrossKill9(t *testing.T) {
	const windows, perWindow = 6, 5
	type where struct{ site, line, device, key string }
	places := []where{{"north", "line-2", "dev-7", "north/line-2/dev-7"}, {"north", "line-1", "dev-7", "north/line-1/dev-7"},
		{"south", "line-2", "dev%1", "south/line-2/dev%251"}}
	type reading struct {
		at                    where
		ts                    int64
		temperature, humidity float64
	}
	r := newBrokerRun(t, "rows", rowsConfig)
	rows := watchRows(t, paho.NewClientOptions().AddBroker(r.broker.URL).SetClientID("rows-watcher"), "plant/out/#")

	base := time.Now().Add(-3 * time.Minute).Truncate(time.Second).UnixMilli()
	var sent []reading
	for w := range windows {
		for i := range perWindow {
			for p, at := range places {
				// Values whose sums and Fahrenheit a float64 holds exactly.
				sent = append(sent, reading{at: at, ts: base + int64(w)*1000 + int64(i)*150,
					temperature: 20 + float64((w*7+i*3+p)%16)*5/9, humidity: 40 + float64((w*5+i*11+p*3)%40)/4})
			}
		}
	}
	send := func(rs []reading) {
		for _, x := range rs {
			publish(t, r.pub, fmt.Sprintf("plant/%s/%s/%s", x.at.site, x.at.line, x.at.device),
				fmt.Sprintf(`{"temperature":%v,"humidity":%v,"ts":%d}`, x.temperature, x.humidity, x.ts))
		}
	}

	first := r.start(t)
	r.awaitSubscribed(t, "readings", "plant/+/+/+")
	half := len(sent) / 2
	send(sent[:half])
	cairntest.AwaitStatus(t, r.socket, "a few windows out", time.Minute, func(st api.Status) bool {
		return st.RecordsOut("stats") >= int64(len(places))
	})
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	second := r.start(t)
	r.awaitSubscribed(t, "readings", "plant/+/+/+")
	send(sent[half:])

	type window struct {
		key   string
		start int64
	}
	model := map[window][]reading{}
	for _, x := range sent {
		k := window{x.at.key, x.ts - x.ts%1000}
		model[k] = append(model[k], x)
	}
	var got map[string]map[string]any
	testwait.For(t, time.Minute, fmt.Sprintf("%d windows", len(model)), func() bool {
		got = rows.byID(t)
		return len(got) >= len(model)
	})
	seen := map[window]string{}
	for id, row := range got {
		k := window{key: fmt.Sprint(row["key"]), start: int64(row["start"].(float64))}
		if other, ok := seen[k]; ok {
			t.Fatalf("window %v published under two ids, %s and %s", k, other, id)
		}
		seen[k] = id
		rs, ok := model[k]
		if !ok {
			t.Fatalf("output %s is of no window sent (a key of its parts, escaped, is one of %v): %v", id, places, row)
		}
		hottest, hum := 0.0, 0.0
		for _, x := range rs {
			hottest, hum = max(hottest, x.temperature*9/5+32), hum+x.humidity
		}
		want := map[string]float64{"n": float64(len(rs)), "temp_f_max": hottest, "hum_avg": hum / float64(len(rs)), "count": float64(len(rs))}
		for name, w := range want {
			if g, _ := row[name].(float64); g != w {
				t.Errorf("window %v: %s is %v, want %v (%v)", k, name, row[name], w, row)
			}
		}
	}
	if err := second.Stop(time.Minute); err != nil {
		t.Fatalf("agent stopped with %v", err)
	}
}
