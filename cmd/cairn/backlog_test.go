package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/mosquittotest"
	"github.com/cairn-edge/cairn/mqttio"
)

const backlogConfig = `agent:
  data_dir: %s
  max_output_backlog: 256KiB
checkpoints:
  interval: 100ms
brokers:
  out:
    url: %s
    client_id: backlog-agent
sources:
  - id: fleet
    simulator: {devices: 20, rate: 2000}
operators:
  - id: counts
    type: count
    inputs: [fleet]
    key_by: key
sinks:
  - id: out
    input: counts
    broker: out
    topic: backlog/{key}
`

// TestOutputBacklogHoldsInput stops the sink's broker (a real mosquitto)
// under load. The sink's output, which it cannot drop, grows to
// agent.max_output_backlog; then the source holds: checkpoints go on and
// stay small, and no more records enter the graph. When the broker comes
// back the backlog drains, the source reads again, and a subscriber with a
// persistent session sees every key's running count without a gap.
func TestOutputBacklogHoldsInput(t *testing.T) {
	broker := mosquittotest.Start(t, t.TempDir(), nil)
	bin := buildCairn(t)

	var mu sync.Mutex
	counts := make(map[string][]float64) // key → counts received, repeated ids dropped
	ids := make(map[string]bool)
	sub := paho.NewClient(paho.NewClientOptions().AddBroker(broker.URL).SetClientID("backlog-watcher").
		SetCleanSession(false).SetAutoReconnect(true).SetConnectRetry(true).SetConnectRetryInterval(100 * time.Millisecond).
		SetMaxReconnectInterval(200 * time.Millisecond).SetOrderMatters(true).
		SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
			var out mqttio.Output
			if err := json.Unmarshal(m.Payload(), &out); err != nil {
				t.Errorf("output %q: %v", m.Payload(), err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if !ids[out.ID] {
				ids[out.ID] = true
				counts[out.Key] = append(counts[out.Key], out.Value)
			}
		}))
	if tok := sub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscriber: %v", tok.Error())
	}
	if tok := sub.Subscribe("backlog/#", 1, nil); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	defer sub.Disconnect(100)

	dir := t.TempDir()
	data, file := filepath.Join(dir, "data"), filepath.Join(dir, "pipeline.yaml")
	replaceFile(t, file, fmt.Sprintf(backlogConfig, data, broker.URL))
	p := startAgent(t, bin, file)
	defer func() { p.cmd.Process.Kill(); p.cmd.Wait() }()
	p.drain()
	socket := filepath.Join(data, "cairn.sock")
	sourceOut := func(st api.Status) int64 {
		var n int64
		for _, op := range st.Operators {
			if op.ID == "fleet" {
				for _, s := range op.Subtasks {
					n += s.RecordsOut
				}
			}
		}
		return n
	}
	awaitStatus(t, socket, "3 checkpoints", time.Minute, func(st api.Status) bool { return st.Checkpoints.Completed >= 3 })

	broker.Stop()
	held := awaitStatus(t, socket, "the input to be held", time.Minute, func(st api.Status) bool { return st.InputHeld })
	// Checkpoints go on while the input is held, and the backlog in them
	// stays near the limit: no record enters the graph.
	st := awaitStatus(t, socket, "5 more checkpoints while held", time.Minute,
		func(st api.Status) bool { return st.Checkpoints.Completed >= held.Checkpoints.Completed+5 })
	later := awaitStatus(t, socket, "5 more checkpoints while held", time.Minute,
		func(s api.Status) bool { return s.Checkpoints.Completed >= st.Checkpoints.Completed+5 })
	if !later.InputHeld || sourceOut(later) != sourceOut(st) {
		t.Fatalf("while the broker is away: held %v, the source emitted %d then %d records", later.InputHeld, sourceOut(st), sourceOut(later))
	}
	const limit = 256 << 10
	if later.OutputBacklogBytes > 2*limit || later.Checkpoints.LastCompleted.SizeBytes > 4*limit {
		t.Fatalf("backlog %d B, last checkpoint %d B: not bounded by the limit of %d B",
			later.OutputBacklogBytes, later.Checkpoints.LastCompleted.SizeBytes, limit)
	}

	if err := broker.Restart(); err != nil {
		t.Fatal(err)
	}
	resumed := awaitStatus(t, socket, "the input to read again", time.Minute, func(s api.Status) bool { return !s.InputHeld })
	awaitStatus(t, socket, "the source to emit again", time.Minute, func(s api.Status) bool { return sourceOut(s) > sourceOut(resumed)+1000 })
	// Each key's count when the input was held: the subscriber must get
	// past it, every key, once the backlog has drained.
	outage := sourceOut(later) / 20
	deadline := time.Now().Add(time.Minute)
	for {
		mu.Lock()
		past := 0
		for _, cs := range counts {
			if int64(len(cs)) > outage {
				past++
			}
		}
		mu.Unlock()
		if past == 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute %d of 20 keys had counts past the outage (about %d each)", past, outage)
		}
		time.Sleep(50 * time.Millisecond) // polling what the subscriber received
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("agent stopped with %v", err)
	}

	// Every key's counts arrived in order without a gap.
	mu.Lock()
	defer mu.Unlock()
	for key, cs := range counts {
		for i, c := range cs {
			if c != float64(i+1) {
				t.Fatalf("key %s: count %v arrived as the %dth, after %v", key, c, i+1, cs[max(0, i-3):i])
			}
		}
	}
}
