package main

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

const backlogConfig = `agent:
  data_dir: %s
  max_output_backlog: 256KiB
checkpoints:
  interval: 100ms
brokers:
  local:
    embedded: true
    listen: 127.0.0.1:%d
  out:
    url: %s
    client_id: backlog-agent
sources:
  - id: fleet
    simulator: {devices: 20, rate: 2000}
  - id: readings
    broker: local
    topics: ["in/{device}"]
    key: device
operators:
  - id: counts
    type: count
    inputs: [fleet, readings]
    key_by: key
sinks:
  - id: out
    input: counts
    broker: out
    topic: backlog/{key}
`

// TestOutputBacklogHoldsInput stops the sink's broker (a real mosquitto)
// under load. The sink's output, which it cannot drop, grows to
// agent.max_output_backlog; then the sources hold: checkpoints go on and
// stay small, no more records enter the graph, and MQTT readings are still
// logged and acknowledged (I8). When the broker comes back the backlog
// drains, the sources read again, and a subscriber with a persistent
// session sees every key's running count without a gap, the readings'
// too.
func TestOutputBacklogHoldsInput(t *testing.T) {
	t.Parallel() // its own broker, ports and directories; it mostly waits, with deadlines of a minute
	broker := mosquittotest.Start(t, t.TempDir(), nil)
	bin := cairntest.Build(t, "cairn")

	outputs := watchOutputs(t, paho.NewClientOptions().AddBroker(broker.URL).SetClientID("backlog-watcher").
		SetCleanSession(false).SetAutoReconnect(true).SetConnectRetry(true).SetConnectRetryInterval(100*time.Millisecond).
		SetMaxReconnectInterval(200*time.Millisecond), "backlog/#")

	dir := t.TempDir()
	data, file := filepath.Join(dir, "data"), filepath.Join(dir, "pipeline.yaml")
	local := freePort(t)
	replaceFile(t, file, fmt.Sprintf(backlogConfig, data, local, broker.URL))
	p := startAgent(t, bin, file)
	socket := filepath.Join(data, "cairn.sock")
	sourceOut := func(st api.Status) int64 { return st.RecordsOut("fleet") }
	cairntest.AwaitStatus(t, socket, "3 checkpoints", time.Minute, func(st api.Status) bool { return st.Checkpoints.Completed >= 3 })

	broker.Stop()
	held := cairntest.AwaitStatus(t, socket, "the input to be held", time.Minute, func(st api.Status) bool { return st.InputHeld })
	// Checkpoints go on while the input is held, and the backlog in them
	// stays near the limit: no record enters the graph.
	st := cairntest.AwaitStatus(t, socket, "5 more checkpoints while held", time.Minute,
		func(st api.Status) bool { return st.Checkpoints.Completed >= held.Checkpoints.Completed+5 })
	later := cairntest.AwaitStatus(t, socket, "5 more checkpoints while held", time.Minute,
		func(s api.Status) bool { return s.Checkpoints.Completed >= st.Checkpoints.Completed+5 })
	if !later.InputHeld || sourceOut(later) != sourceOut(st) {
		t.Fatalf("while the broker is away: held %v, the source emitted %d then %d records", later.InputHeld, sourceOut(st), sourceOut(later))
	}
	// MQTT input is acknowledged (so logged, I8) while held, and waits
	// in the ingest log.
	const readings = 100
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(fmt.Sprintf("tcp://127.0.0.1:%d", local)).SetClientID("backlog-feeder"))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("feeder: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	for range readings {
		if tok := pub.Publish("in/probe", 1, false, `{"v":1}`); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("a reading was not acknowledged while the input was held: %v", tok.Error())
		}
	}
	waiting := cairntest.AwaitStatus(t, socket, "the readings to wait in the ingest log", time.Minute,
		func(s api.Status) bool { return s.IngestLag >= readings })
	if !waiting.InputHeld || waiting.RecordsOut("readings") != later.RecordsOut("readings") {
		t.Fatalf("held %v; the MQTT source emitted %d, then %d records", waiting.InputHeld, later.RecordsOut("readings"), waiting.RecordsOut("readings"))
	}
	const limit = 256 << 10
	if later.OutputBacklogBytes > 2*limit || later.Checkpoints.LastCompleted.SizeBytes > 4*limit {
		t.Fatalf("backlog %d B, last checkpoint %d B: not bounded by the limit of %d B",
			later.OutputBacklogBytes, later.Checkpoints.LastCompleted.SizeBytes, limit)
	}

	if err := broker.Restart(); err != nil {
		t.Fatal(err)
	}
	resumed := cairntest.AwaitStatus(t, socket, "the input to read again", time.Minute, func(s api.Status) bool { return !s.InputHeld })
	cairntest.AwaitStatus(t, socket, "the source to emit again", time.Minute, func(s api.Status) bool { return sourceOut(s) > sourceOut(resumed)+1000 })
	// Each device's count when the input was held: the subscriber must get
	// past it, every device, once the backlog has drained, and count every
	// reading.
	outage := sourceOut(later) / 20
	var past, probes int
	if !testwait.Poll(time.Minute, func() bool {
		past, probes = 0, 0
		outputs.read(func(counts map[string][]float64) {
			for key, cs := range counts {
				if key != "probe" && int64(len(cs)) > outage {
					past++
				}
			}
			probes = len(counts["probe"])
		})
		return past == 20 && probes == readings
	}) {
		t.Fatalf("after a minute %d of 20 devices had counts past the outage (about %d each), and %d of %d readings were counted",
			past, outage, probes, readings)
	}
	p.Signal(syscall.SIGTERM)
	if err := p.Wait(); err != nil {
		t.Fatalf("agent stopped with %v", err)
	}

	// Every key's counts arrived in order without a gap.
	var bad string
	outputs.read(func(counts map[string][]float64) {
		for key, cs := range counts {
			for i, c := range cs {
				if c != float64(i+1) && bad == "" {
					bad = fmt.Sprintf("key %s: count %v arrived as the %dth, after %v", key, c, i+1, cs[max(0, i-3):i])
					bad += "; what arrived for it, repeats included:\n" + outputs.arrivals(key, i-5, i+5)
				}
			}
		}
	})
	if bad != "" {
		t.Fatal(bad)
	}
}
