package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

var writeAvgSavepoint = flag.String("compat.write", "",
	"a cairn built before windows took many aggregates, to write "+avgSavepoint+" with instead of reading it")

// avgSavepoint is a savepoint that cairn at 308b52f, before windows took
// many aggregates, wrote of avgConfig: three devices' open windows of
// four readings each (go test ./cmd/cairn -run TestSavepointOfAnAvgWindow
// -compat.write=/path/to/that/cairn writes it again).
const avgSavepoint = "testdata/savepoint-window-avg.cairn"

// avgConfig averages each device's readings over 10 s windows of their
// event time.
const avgConfig = `agent:
  data_dir: %s
brokers:
  local:
    url: %s
    client_id: compat
checkpoints:
  interval: 300ms
sources:
  - id: readings
    broker: local
    topics: ["compat/{device}"]
    key: device
    value: temp
    time: ts
operators:
  - id: avg
    type: window
    inputs: [readings]
    key_by: key
    window: {kind: tumbling, size: 10s}
    aggregate: avg
sinks:
  - id: out
    input: avg
    broker: local
    topic: "compat/out/{key}"
`

// TestSavepointOfAnAvgWindowBeforeAggregates: the windows of an
// `aggregate: avg` window in a savepoint an older cairn wrote restore
// into this one. It closes them with two more readings of each device
// (and one of the next window): each device's average is of all six
// readings, four of them from before the savepoint.
func TestSavepointOfAnAvgWindowBeforeAggregates(t *testing.T) {
	const base int64 = 1_700_000_000_000
	r := newBrokerRun(t, "compat", avgConfig)
	reading := func(device, i int) {
		publish(t, r.pub, fmt.Sprintf("compat/d%d", device), fmt.Sprintf(`{"temp":%d.5,"ts":%d}`, 20+4*device+i, base+int64(i)*1000))
	}
	if *writeAvgSavepoint != "" {
		r.bin = *writeAvgSavepoint
		agent := r.start(t)
		r.awaitSubscribed(t, "readings", "compat/+")
		for d := range 3 {
			for i := range 4 {
				reading(d, i)
			}
		}
		cairntest.AwaitStatus(t, r.socket, "the readings read", time.Minute, func(st api.Status) bool { return st.RecordsOut("readings") == 12 })
		if out, err := exec.Command(r.bin, "stop", "--savepoint", "window-avg.cairn", "-c", r.file).CombinedOutput(); err != nil {
			t.Fatalf("cairn stop --savepoint: %v\n%s", err, out)
		}
		if err := agent.Wait(); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(r.data, "savepoints", "window-avg.cairn"))
		if err == nil {
			err = os.WriteFile(avgSavepoint, data, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s, %d bytes", avgSavepoint, len(data))
		return
	}

	rows := watchRows(t, paho.NewClientOptions().AddBroker(r.broker.URL).SetClientID("compat-watcher"), "compat/out/#")
	file, err := filepath.Abs(avgSavepoint)
	if err != nil {
		t.Fatal(err)
	}
	agent := r.start(t, "--from-savepoint", file)
	agent.Await(t, restoreLine, time.Minute)
	r.awaitSubscribed(t, "readings", "compat/+")
	for d := range 3 {
		reading(d, 4)
		reading(d, 5)
	}
	for d := range 3 {
		reading(d, 10) // the next window's, which closes the first
	}
	var got map[string]map[string]any
	testwait.For(t, time.Minute, "the three windows", func() bool {
		got = rows.byID(t)
		return len(got) >= 3
	})
	for _, row := range got {
		var d int
		if _, err := fmt.Sscanf(fmt.Sprint(row["key"]), "d%d", &d); err != nil {
			t.Fatalf("output of no device: %v", row)
		}
		// The average of 20 + 4d + i + 0.5 for i from 0 to 5.
		want := map[string]any{"value": float64(23 + 4*d), "count": 6.0, "aggregate": "avg", "start": float64(base), "end": float64(base + 10_000)}
		for field, w := range want {
			if row[field] != w {
				t.Errorf("d%d: %s is %v, want %v: %v", d, field, row[field], w, row)
			}
		}
	}
	if err := agent.Stop(time.Minute); err != nil {
		t.Fatal(err)
	}
}
