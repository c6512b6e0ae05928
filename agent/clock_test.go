package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/ingest"
	"github.com/cairn-edge/cairn/internal/testing/testlog"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
	"github.com/cairn-edge/cairn/mqttio"
	"github.com/cairn-edge/cairn/runtime"
)

// year is 365 days: 56 of them take a clock from 2026 to 1970.
const year = 365 * 24 * time.Hour

// wallSteps are the steps of the wall clock the tests take: NTP
// correcting a drift, and a device that booted in 1970 setting its clock
// (or one set back there).
var wallSteps = []struct {
	name string
	d    time.Duration
}{{"+1h", time.Hour}, {"-1h", -time.Hour}, {"+56y", 56 * year}, {"-56y", -56 * year}}

// stepWall steps the wall clock by d, apart from the monotonic clock,
// until the test ends.
func stepWall(t *testing.T, d time.Duration) {
	wallStep.Add(int64(d))
	t.Cleanup(func() { wallStep.Store(0) })
}

// TestStatusAgesAcrossWallClockSteps: a step of the wall clock moves the
// status's time and every time in it by the step, and changes no age, no
// "since" and no rate a day, in the status, the fleet status or the
// metrics. In a bubble, whose clock moves only as the test sleeps, so
// that the figures are exact.
func TestStatusAgesAcrossWallClockSteps(t *testing.T) {
	for _, step := range wallSteps {
		t.Run(step.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { statusAcrossStep(t, step.d) })
		})
	}
}

func statusAcrossStep(t *testing.T, step time.Duration) {
	start := time.Now() // the agent's and its job's start
	// The kernel's count of the agent's writes: 1 MiB a minute, 1,440 MiB
	// a day.
	w := &wear{kernel: func() (int64, error) { return int64(time.Since(start)/time.Minute) << 20, nil }}
	w.sample(start)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.run(ctx)
	logs, err := ingest.OpenLogs(t.TempDir(), ingest.LogOptions{WriteFault: func() error { return errors.New("no space left on device") }})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	s := &state{wear: w, stalls: newStalls(), logs: logs}
	metrics := &exporter{state: s, checkpoints: newCheckpointMetrics()}

	// At 100 s on the job's clock, an alignment of 3 s ends; at 5 min a
	// broker's clients all connect, and an ingest log refuses an append.
	time.Sleep(100 * time.Second)
	s.stalls.aligned(start, runtime.Aligned{Task: checkpoint.TaskID{Operator: "drift"}, ID: 4, Started: 97 * time.Second,
		Duration: 3 * time.Second, WaitedFor: checkpoint.TaskID{Operator: "score"}})
	time.Sleep(200 * time.Second)
	broker := mqttio.BrokerStatus{Clients: 2, Connected: 2, Since: time.Now()}
	l, err := logs.Log("fleet")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append([]ingest.Message{{Topic: "t", Payload: []byte("{}"), Received: time.Now()}}); err == nil {
		t.Fatal("an append went through the fault")
	}

	type seen struct {
		st             api.Status
		gateway        api.GatewayStatus
		broker         api.Broker
		unacknowledged float64 // the metric, seconds
	}
	look := func() seen {
		var b strings.Builder
		metrics.write(&b)
		e, err := parseExposition(b.String())
		if err != nil {
			t.Fatal(err)
		}
		st := s.status()
		return seen{st, gatewayStatus(st, statusBroker{agent: "cairn-gw", interval: 10 * time.Second}, "v", time.Time{}, time.Now()), brokerStatus("plant", broker, readClocks()),
			e.values["cairn_input_unacknowledged_seconds{}"]}
	}
	time.Sleep(10 * time.Minute) // 15 minutes in
	before := look()
	stepWall(t, step)
	time.Sleep(15 * time.Minute)
	after := look()

	const passed = 15 * 60_000 // ms, on the monotonic clock
	if d := after.st.TimeUnixMS - before.st.TimeUnixMS; d != passed+step.Milliseconds() {
		t.Errorf("the status's time moved %dms; want the %v that passed and the step %v", d, passed*time.Millisecond, step)
	}
	for _, x := range []seen{before, after} {
		if x.st.Disk.PerDayBytes != 1440<<20 {
			t.Errorf("%d bytes a day over %gs; want 1,440 MiB", x.st.Disk.PerDayBytes, x.st.Disk.PerDaySpanSeconds)
		}
	}
	for _, x := range []seen{before, after} {
		if g := x.gateway; g.Time != x.st.TimeUnixMS || g.Stall == nil || !g.Stall.Ended || g.Stall.DurationMS != 3000 {
			t.Fatalf("fleet status %+v, stall %+v; want the status's time and #4's stall of 3s", g, g.Stall)
		}
	}
	ages := func(x seen) []int64 {
		at := x.st.TimeUnixMS
		return []int64{at - x.st.Stalls[0].StartedUnixMS, x.gateway.Stall.EndedAgoMS, at - x.broker.SinceUnixMS,
			at - x.st.Ingest.NotAcknowledgingSinceUnixMS, int64(x.unacknowledged * 1000), int64(x.st.Disk.PerDaySpanSeconds * 1000)}
	}
	b, a := ages(before), ages(after)
	// At 15 minutes: the stall started 900-97 s ago and ended 800 s ago,
	// the broker's clients connected and the log refused 600 s ago, and
	// the rate a day is of 900 s.
	want := []int64{803_000, 800_000, 600_000, 600_000, 600_000, 900_000}
	for i, what := range []string{"the stall's start", "the stall's end", "the broker's since", "not acknowledging since",
		"cairn_input_unacknowledged_seconds", "the span of the rate a day"} {
		if b[i] != want[i] || a[i] != want[i]+passed {
			t.Errorf("%s: %dms ago, then %dms after a step of %v; want %d and %d", what, b[i], a[i], step, want[i], want[i]+passed)
		}
	}
}

const clockPipeline = `agent:
  data_dir: %s
checkpoints:
  interval: 200ms
sources:
  - id: fleet
    simulator: {devices: 10, rate: 100}
operators:
  - id: counts
    type: count
    inputs: [fleet]
    key_by: key
`

// TestWallClockStepsThroughTheAgent runs an agent and steps its wall
// clock: the times of its status move by the step, the checkpoints'
// ages in the status and the fleet status stay what passed, and their
// durations and late verdicts do not change.
func TestWallClockStepsThroughTheAgent(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, clockPipeline, filepath.Join(dir, "data")), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := new(testlog.Buffer)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- Run(ctx, file, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("%v\n%s", err, logs)
		}
	}()
	client := api.NewClient(SocketPath(filepath.Join(dir, "data")))
	status := func() api.Status {
		t.Helper()
		st, err := client.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	testwait.For(t, time.Minute, "three checkpoints", func() bool {
		st, err := client.Status(context.Background())
		return err == nil && len(st.History) >= 3
	})
	for _, s := range wallSteps {
		step := s.d
		before := status()
		stepWall(t, step)
		after := status()
		wallStep.Store(0)
		up := int64(after.UptimeSeconds * 1000)
		passed := up - int64(before.UptimeSeconds*1000)
		if moved := after.TimeUnixMS - before.TimeUnixMS - step.Milliseconds(); moved < passed-1000 || moved > passed+1000 {
			t.Errorf("step %v: the status's time moved %dms besides the step; %dms passed", step, moved, passed)
		}
		for _, h := range after.History {
			if age := after.TimeUnixMS - h.TriggeredUnixMS; age < 0 || age > up {
				t.Errorf("step %v: checkpoint #%d was triggered %dms ago, the job is %dms old", step, h.ID, age, up)
			}
			for _, b := range before.History {
				if b.ID != h.ID {
					continue
				}
				if moved := h.TriggeredUnixMS - b.TriggeredUnixMS - step.Milliseconds(); moved < -2 || moved > 2 {
					t.Errorf("step %v: checkpoint #%d's trigger time moved %dms besides the step", step, h.ID, moved)
				}
				if h.DurationMS != b.DurationMS || h.Late != b.Late {
					t.Errorf("step %v: checkpoint #%d took %dms, late %v; before the step %dms, late %v", step, h.ID, h.DurationMS, h.Late, b.DurationMS, b.Late)
				}
			}
		}
		g := gatewayStatus(after, statusBroker{agent: "cairn-gw", interval: time.Second}, "v", time.Time{}, time.Now())
		if l := g.Checkpoints.Last; l == nil || l.AgeMS > up || g.Time != after.TimeUnixMS {
			t.Errorf("step %v: fleet status at %d, last checkpoint %+v; want one completed within the job's %dms", step, g.Time, l, up)
		}
	}
}
