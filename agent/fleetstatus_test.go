package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
	"github.com/cairn-edge/cairn/internal/testing/testlog"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// skewedGateway is the status of a gateway running configs/skew.yaml
// whose join aligns behind a slow scoring step, with a second broker
// down: at 11:07:45 UTC, 1_795_000_065_000.
func skewedGateway() api.Status {
	const now = 1_795_000_065_000
	return api.Status{
		Agent: "cairn-gw-07", Pipeline: "/etc/cairn/plant-3/pipeline.yaml", State: "running", Mode: "exactly-once",
		UptimeSeconds: 9132.4, TimeUnixMS: now,
		Checkpoints: api.Checkpoints{Completed: 912, Failed: 1, Late: 2, IntervalMS: 10_000,
			LastCompleted: &api.CheckpointInfo{ID: 941, Status: "completed", DurationMS: 6_200, SizeBytes: 73_400, AlignmentMS: 5_900, Incremental: true, Late: true}},
		DeadLetters: 3, IngestLag: 1_200, OutputBacklogBytes: 2_100,
		Memory:      api.Memory{Resident: 46_500_000, HeapLive: 18_200_000, HeapGoal: 36_400_000, Limit: 96 << 20},
		Disk:        api.Disk{WrittenBytes: 2_100_000, PerDayBytes: 41_000_000},
		ConfigError: `pipeline.yaml:3:9: broker "plant": password or password_file, not both`,
		Brokers: []api.Broker{
			{ID: "local", Connected: true, Clients: 4, ConnectedClients: 4, SinceUnixMS: now - 9_000_000},
			{ID: "plant", Clients: 1, SinceUnixMS: now - 60_000, LastError: "dial tcp: lookup operator:hunter2@plant.example: no such host", LastErrorUnixMS: now - 5_000},
		},
		Operators: []api.Operator{
			{ID: "fleet", Parallelism: 1, WatermarkUnixMS: now - 1_100, WatermarkLagMS: 1_100, Subtasks: []api.Subtask{{Index: 0, RecordsOut: 9_000_000}}},
			{ID: "score", Parallelism: 1, WatermarkUnixMS: now - 3_400, WatermarkLagMS: 3_400, Subtasks: []api.Subtask{{Index: 0, Queued: 512, Rejected: 4}}},
			{ID: "drift", Parallelism: 1, WatermarkUnixMS: now - 3_400, WatermarkLagMS: 3_400, Subtasks: []api.Subtask{{Index: 0, Queued: 3, Alignment: &api.Alignment{
				CheckpointID: 942, ElapsedMS: 1_600, BufferedRecords: 41, Blocking: true,
				Channels: []api.Channel{{From: "score/0", Queued: 3}, {From: "fleet/0", Arrived: true}}}}}},
		},
		InFlight: []api.InFlight{{ID: 942, ElapsedMS: 1_710, Acked: 3, Total: 4}},
		History: []api.CheckpointInfo{
			{ID: 939, Status: "failed", Cause: "expired", TriggeredUnixMS: now - 75_000, DurationMS: 60_000},
			{ID: 940, Status: "completed", TriggeredUnixMS: now - 14_000, DurationMS: 5_800, Late: true},
			{ID: 941, Status: "completed", TriggeredUnixMS: now - 8_000, DurationMS: 6_200, Late: true, Incremental: true},
		},
		Stalls: []api.Stall{
			{CheckpointID: 940, Subtask: "drift/0", WaitedFor: "score/0", StartedUnixMS: now - 13_000, DurationMS: 5_000, Backlog: 900, Outcome: "aligned"},
			{CheckpointID: 941, Subtask: "drift/0", WaitedFor: "score/0", StartedUnixMS: now - 7_800, DurationMS: 5_900, Backlog: 1_020, Outcome: "aligned"},
		},
	}
}

// TestGatewayStatus: the fleet status of a skewed gateway says what the
// fleet view ranks by, in few bytes, and nothing secret.
func TestGatewayStatus(t *testing.T) {
	st := skewedGateway()
	now := time.UnixMilli(st.TimeUnixMS)
	g := gatewayStatus(st, statusBroker{agent: "cairn-gw-07", interval: 10 * time.Second}, "v0.4.0", now.Add(-10*time.Second), now)
	c := g.Checkpoints
	if c.RecentFailed != 1 || c.RecentLate != 2 || c.Late != 2 || c.LastFailed == nil || c.LastFailed.ID != 939 || c.LastFailed.Cause != "expired" {
		t.Errorf("checkpoints %+v", c)
	}
	if l := c.Last; l == nil || l.ID != 941 || l.Kind != "incremental" || !l.Late || l.AgeMS != 1_800 {
		t.Errorf("last checkpoint %+v: want #941, incremental, late, completed 1.8s ago", l)
	}
	// The longest since the last message: #941's 5.9s, ended 1.9s ago,
	// over the 1.6s one in progress.
	if s := g.Stall; s == nil || s.Subtask != "drift/0" || s.WaitsFor != "score/0" || s.DurationMS != 5_900 || !s.Ended || s.EndedAgoMS != 1_900 || s.Checkpoint != 941 {
		t.Errorf("stall %+v: want #941's drift/0 waiting 5.9s for score/0, ended 1.9s ago", s)
	}
	if g.Pipeline != "pipeline.yaml" || g.Rejected != 4 || g.WatermarkLagMS != 3_400 || !g.ConfigRejected || len(g.Brokers) != 2 || g.Brokers[1].Up {
		t.Errorf("status %+v", g)
	}
	// A status since which no stall ended shows the one in progress.
	later := gatewayStatus(st, statusBroker{agent: "cairn-gw-07", interval: 10 * time.Second}, "v0.4.0", now, now)
	if s := later.Stall; s == nil || s.Ended || s.DurationMS != 1_600 || s.WaitsFor != "score/0" || s.Backlog != 3+512 {
		t.Errorf("stall in progress %+v: want drift/0 waiting 1.6s for score/0 with 515 before it", s)
	}
	b := encodeGateway(g)
	for _, secret := range []string{"hunter2", "plant.example", "password", "/etc/cairn"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the status shows %q:\n%s", secret, b)
		}
	}
	var back api.GatewayStatus
	if err := json.Unmarshal(b, &back); err != nil || back.V != api.GatewayVersion || back.Agent != "cairn-gw-07" {
		t.Fatalf("decoded %+v, %v", back, err)
	}
	t.Logf("%d bytes: %s", len(b), b)
	if len(b) > 1024 {
		t.Errorf("the status of a troubled gateway is %d bytes, more than 1 KiB", len(b))
	}
}

// TestGatewayChanged: what is published at once, and what waits for the
// interval.
func TestGatewayChanged(t *testing.T) {
	st := skewedGateway()
	now := time.UnixMilli(st.TimeUnixMS)
	base := gatewayStatus(st, statusBroker{agent: "cairn-gw-07", interval: time.Second}, "v", now, now)
	for _, tc := range []struct {
		what    string
		change  func(*api.Status)
		changed bool
	}{
		{"nothing", func(*api.Status) {}, false},
		{"uptime and lag", func(s *api.Status) { s.UptimeSeconds++; s.IngestLag *= 2; s.Memory.Resident++ }, false},
		{"more dead letters", func(s *api.Status) { s.DeadLetters++ }, false},
		{"the first dead letter", func(s *api.Status) { s.DeadLetters = 0 }, true},
		{"the state", func(s *api.Status) { s.State = "stopping" }, true},
		{"a failure", func(s *api.Status) { s.Checkpoints.Failed++ }, true},
		{"a late checkpoint", func(s *api.Status) { s.Checkpoints.Late++ }, true},
		{"a broker back", func(s *api.Status) { s.Brokers[1].Connected = true }, true},
		{"the input held", func(s *api.Status) { s.InputHeld = true }, true},
		{"the file accepted", func(s *api.Status) { s.ConfigError = "" }, true},
	} {
		next := skewedGateway()
		next.Brokers = append([]api.Broker(nil), next.Brokers...)
		tc.change(&next)
		if got := gatewayChanged(base, gatewayStatus(next, statusBroker{agent: "cairn-gw-07", interval: time.Second}, "v", now, now)); got != tc.changed {
			t.Errorf("%s: changed %v, want %v", tc.what, got, tc.changed)
		}
	}
}

// subscriber is a client of the broker that gathers what comes on the
// status topic and its JSON sibling, in order.
type subscriber struct {
	mu   sync.Mutex
	msgs []received
}

type received struct {
	topic    string
	payload  string
	retained bool
}

func subscribe(t *testing.T, url, filter string) *subscriber {
	t.Helper()
	s := &subscriber{}
	c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(fmt.Sprintf("watcher-%d", time.Now().UnixNano())))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connecting to %s: %v", url, tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	if tok := c.Subscribe(filter, 1, func(_ paho.Client, m paho.Message) {
		s.mu.Lock()
		s.msgs = append(s.msgs, received{m.Topic(), string(m.Payload()), m.Retained()})
		s.mu.Unlock()
	}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribing: %v", tok.Error())
	}
	return s
}

// await returns the first message from the i-th on that satisfies ok,
// and its place.
func (s *subscriber) await(t *testing.T, from int, what string, ok func(received) bool) (received, int) {
	t.Helper()
	var got received
	at := -1
	testwait.For(t, 20*time.Second, what, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i := from; i < len(s.msgs); i++ {
			if ok(s.msgs[i]) {
				got, at = s.msgs[i], i
				return true
			}
		}
		return false
	})
	return got, at
}

func gatewayJSON(t *testing.T, r received) api.GatewayStatus {
	t.Helper()
	var g api.GatewayStatus
	if err := json.Unmarshal([]byte(r.payload), &g); err != nil {
		t.Fatalf("%s: %q: %v", r.topic, r.payload, err)
	}
	return g
}

const fleetPipeline = `agent:
  data_dir: %s
brokers:
  local:
    url: %s
    client_id: gw-07
    status_topic: plant/gw-07/status
    status_interval: 1h
checkpoints:
  interval: 100ms
sources:
  - id: fleet
    simulator: {devices: 10, rate: 100}
operators:
  - id: counts
    type: count
    inputs: [fleet]
    key_by: key
sinks:
  - id: out
    input: counts
    broker: local
    topic: plant/gw-07/counts/{key}
`

// TestFleetStatusOnTheBroker runs an agent whose broker has a status
// topic: its status comes as JSON beside online, retained, named by the
// broker's client id, at once on a change that matters though the
// interval is an hour (the pipeline running, a change of the file
// refused), and when it stops, its last status says so and the status
// topic says offline.
func TestFleetStatusOnTheBroker(t *testing.T) {
	dir := t.TempDir()
	// mosquitto: the embedded broker acknowledges a publish before it
	// delivers it, and closes with the agent.
	url := mosquittotest.Start(t, t.TempDir(), nil).URL
	file := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, fleetPipeline, filepath.Join(dir, "data"), url), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := new(testlog.Buffer)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- Run(ctx, file, Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), Build: BuildInfo{Version: "v9.8.7"}})
	}()
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-ran
		}
	}()
	watch := subscribe(t, url, "plant/gw-07/status/#")
	isJSON := func(r received) bool { return r.topic == "plant/gw-07/status/json" }
	running, at := watch.await(t, 0, "a status saying running", func(r received) bool {
		return isJSON(r) && gatewayJSON(t, r).State == "running"
	})
	g := gatewayJSON(t, running)
	if g.V != 1 || g.Agent != "gw-07" || g.Version != "v9.8.7" || g.Pipeline != "pipeline.yaml" || g.IntervalMS != 3_600_000 || len(g.Brokers) != 1 || g.Brokers[0].Name != "local" {
		t.Fatalf("status %s", running.payload)
	}
	t.Logf("the status is %d bytes: %s", len(running.payload), running.payload)
	watch.await(t, 0, "online", func(r received) bool { return r.topic == "plant/gw-07/status" && r.payload == "online" })

	// A later subscriber gets the newest status at once, retained.
	late := subscribe(t, url, "plant/gw-07/status/json")
	if r, _ := late.await(t, 0, "the retained status", func(r received) bool { return true }); !r.retained {
		t.Fatalf("the status %+v is not retained", r)
	}

	// A change of the file that cannot be applied is published at once.
	if err := os.WriteFile(file, []byte("sources: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	watch.await(t, at+1, "a status saying the change was refused", func(r received) bool {
		return isJSON(r) && gatewayJSON(t, r).ConfigRejected
	})

	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	stopped = true
	_, last := watch.await(t, at+1, "the last status, stopped", func(r received) bool { return isJSON(r) && gatewayJSON(t, r).State == "stopped" })
	watch.await(t, last+1, "offline after it", func(r received) bool { return r.topic == "plant/gw-07/status" && r.payload == "offline" })
}
