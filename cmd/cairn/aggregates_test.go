package main

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// figuresConfig is the pipeline every plant asks for first: per device,
// every second of event time, the average temperature, the highest
// humidity, the 95th percentile of vibration and how many readings came,
// in one window and one message. The source goes idle after a second
// without readings, so the last windows close without a later one.
const figuresConfig = `agent:
  data_dir: %s
brokers:
  local:
    url: %s
    client_id: figures
checkpoints:
  interval: 300ms
sources:
  - id: readings
    broker: local
    topics: ["plant/{device}"]
    key: device
    value: temperature
    time: ts
    idle_timeout: 1s
    fields: {temperature: number, humidity: number, vibration: number}
operators:
  - id: stats
    type: window
    inputs: [readings]
    key_by: key
    window: {kind: tumbling, size: 1s}
    aggregates:
      temp_avg: avg(temperature)
      hum_max: max(humidity)
      vib_p95: p95(vibration)
      n: count()
sinks:
  - id: out
    input: stats
    broker: local
    topic: "plant/out/{key}"
`

// figure is one reading of figuresConfig's, as sent.
type figure struct {
	device                           string
	ts                               int64
	temperature, humidity, vibration float64
}

// rowWatcher keeps the messages a subscription hears, decoded as objects.
type rowWatcher struct {
	mu   sync.Mutex
	rows []map[string]any
}

// watchRows connects a client made from opts, subscribes it to filter at
// QoS 1, and keeps what it hears until the test ends.
func watchRows(t *testing.T, opts *paho.ClientOptions, filter string) *rowWatcher {
	t.Helper()
	w := &rowWatcher{}
	subscribeFor(t, opts, filter, func(payload []byte) {
		var row map[string]any
		if err := json.Unmarshal(payload, &row); err != nil {
			t.Errorf("output %q: %v", payload, err)
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.rows = append(w.rows, row)
	})
	return w
}

// byID returns the rows heard so far by their id, failing the test if
// one id came with two different rows.
func (w *rowWatcher) byID(t *testing.T) map[string]map[string]any {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]map[string]any, len(w.rows))
	for _, row := range w.rows {
		id, _ := row["id"].(string)
		if prev, ok := out[id]; ok && fmt.Sprint(prev) != fmt.Sprint(row) {
			t.Fatalf("output %s published twice, differently:\n%v\n%v", id, prev, row)
		}
		out[id] = row
	}
	return out
}

// TestFourFiguresPerDeviceAcrossKill9 runs the four-figure window through
// the binary against mosquitto, with a kill -9 half way: each device's
// each window is published under one id, as one message carrying all
// four figures, exact (the 95th percentile within the sketch's bound of
// the true one) as a plain computation over the readings sent gives them.
func TestFourFiguresPerDeviceAcrossKill9(t *testing.T) {
	const devices, windows, perWindow = 4, 12, 10
	r := newBrokerRun(t, "figures", figuresConfig)
	rows := watchRows(t, paho.NewClientOptions().AddBroker(r.broker.URL).SetClientID("figures-watcher"), "plant/out/#")

	// Readings of the last minutes, a window a second, with values a
	// float64 holds exactly, so that a sum is the same in any order.
	base := time.Now().Add(-3 * time.Minute).Truncate(time.Second).UnixMilli()
	var sent []figure
	for w := range windows {
		for i := range perWindow {
			for d := range devices {
				sent = append(sent, figure{
					device:      fmt.Sprintf("m%d", d),
					ts:          base + int64(w)*1000 + int64(i)*100,
					temperature: 20 + float64((w*7+i*3+d)%16)/4,
					humidity:    40 + float64((w*5+i*11+d*3)%40),
					vibration:   0.125 * float64(1+(w*13+i*7+d*5)%37),
				})
			}
		}
	}
	send := func(fs []figure) {
		for _, f := range fs {
			publish(t, r.pub, "plant/"+f.device, fmt.Sprintf(`{"temperature":%v,"humidity":%v,"vibration":%v,"ts":%d}`,
				f.temperature, f.humidity, f.vibration, f.ts))
		}
	}

	first := r.start(t)
	r.awaitSubscribed(t, "readings", "plant/+")
	half := len(sent) / 2
	send(sent[:half])
	cairntest.AwaitStatus(t, r.socket, "a few windows out", time.Minute, func(st api.Status) bool {
		return st.RecordsOut("stats") >= devices
	})
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	second := r.start(t)
	r.awaitSubscribed(t, "readings", "plant/+")
	send(sent[half:])

	// The model: each device's windows, from what was sent.
	type window struct {
		device string
		start  int64
	}
	model := map[window][]figure{}
	for _, f := range sent {
		k := window{f.device, f.ts - f.ts%1000}
		model[k] = append(model[k], f)
	}
	var got map[string]map[string]any
	testwait.For(t, 2*time.Minute, fmt.Sprintf("%d windows", len(model)), func() bool {
		got = rows.byID(t)
		return len(got) >= len(model)
	})
	seen := map[window]string{}
	for id, row := range got {
		k := window{device: fmt.Sprint(row["key"]), start: int64(row["start"].(float64))}
		if other, ok := seen[k]; ok {
			t.Fatalf("window %v published under two ids, %s and %s", k, other, id)
		}
		seen[k] = id
		fs, ok := model[k]
		if !ok {
			t.Fatalf("output %s is of no window sent: %v", id, row)
		}
		var temps, hums, vibs []float64
		for _, f := range fs {
			temps, hums, vibs = append(temps, f.temperature), append(hums, f.humidity), append(vibs, f.vibration)
		}
		sum := 0.0
		for _, v := range temps {
			sum += v
		}
		want := map[string]float64{"n": float64(len(fs)), "temp_avg": sum / float64(len(fs)), "hum_max": slices.Max(hums),
			"end": float64(k.start + 1000), "time": float64(k.start + 999), "count": float64(len(fs))}
		for name, w := range want {
			if g, _ := row[name].(float64); g != w {
				t.Errorf("window %v: %s is %v, want %v (%v)", k, name, row[name], w, row)
			}
		}
		if lo, hi := quantileBounds(vibs, 0.95); !(row["vib_p95"].(float64) >= lo && row["vib_p95"].(float64) <= hi) {
			t.Errorf("window %v: vib_p95 is %v, want it within [%v, %v]", k, row["vib_p95"], lo, hi)
		}
		for _, absent := range []string{"value", "aggregate"} {
			if _, ok := row[absent]; ok {
				t.Errorf("window %v: the message has %q: %v", k, absent, row)
			}
		}
	}
	if err := second.Stop(time.Minute); err != nil {
		t.Fatalf("agent stopped with %v", err)
	}
}

// quantileBounds is the range a sketch with graph's relative accuracy may
// give for quantile q of values: the values at the ranks around q (n - 1),
// widened by the accuracy.
func quantileBounds(values []float64, q float64) (lo, hi float64) {
	s := slices.Sorted(slices.Values(values))
	rank := q * float64(len(s)-1)
	lo, hi = s[int(math.Floor(rank))], s[int(math.Ceil(rank))]
	return lo * (1 - graph.QuantileRelativeAccuracy), hi * (1 + graph.QuantileRelativeAccuracy)
}
