package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/procfs"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

var (
	fleetGateways = flag.Int("fleet.gateways", 1000, "TestFleetTopAtScale: simulated gateways")
	fleetMeasure  = flag.Duration("fleet.measure", 15*time.Second, "TestFleetTopAtScale: how long cairn top --fleet's CPU is measured")
)

// simulatedStatus is gateway i's status at now, as an agent publishes it:
// most healthy, every 50th with a stall, every 97th with a failed
// checkpoint, every 31st with dead letters.
func simulatedStatus(i int, now time.Time) api.GatewayStatus {
	st := api.GatewayStatus{V: api.GatewayVersion, Agent: fmt.Sprintf("cairn-gw-%04d", i), Version: "v0.4.0", Pipeline: "pipeline.yaml",
		State: "running", Time: now.UnixMilli(), IntervalMS: 10_000, UptimeS: 86_400 + int64(i), Mode: "exactly-once",
		Checkpoints: api.GatewayCheckpoints{IntervalMS: 10_000, Completed: 8_640 + int64(i),
			Last: &api.GatewayCheckpoint{ID: uint64(now.Unix()/10 + int64(i)), AgeMS: int64(i % 10_000), DurationMS: 35, AlignmentMS: 4, Size: 52_000, Kind: "incremental"}},
		IngestLag: int64(i % 13), WatermarkLagMS: 1_100,
		Brokers: []api.GatewayBroker{{Name: "plant", Up: true, Clients: 4, Connected: 4, Since: now.Add(-24 * time.Hour).UnixMilli()}},
		Memory:  api.GatewayMemory{Resident: 46_000_000, HeapLive: 18_000_000, Limit: 96 << 20}, DiskPerDay: 41_000_000}
	if i%50 == 0 {
		st.Stall = &api.GatewayStall{Subtask: "drift/0", WaitsFor: "score/0", DurationMS: 1_600, Backlog: 515, Checkpoint: st.Checkpoints.Last.ID + 1}
	}
	if i%97 == 0 {
		st.Checkpoints.Failed, st.Checkpoints.RecentFailed = 1, 1
		st.Checkpoints.LastFailed = &api.GatewayFailure{ID: st.Checkpoints.Last.ID - 3, AgeMS: 40_000, Cause: "expired"}
	}
	if i%31 == 0 {
		st.DeadLetters = int64(i % 7)
	}
	return st
}

// TestFleetTopAtScale runs `cairn top --fleet` in a real terminal on a
// broker where -fleet.gateways simulated gateways (1,000) have left their
// status, retained, and each publishes a new one every 10s (100 messages a
// second in all): it shows them all, stays responsive (a filter typed
// finds one gateway among them), and its CPU and memory are measured
// over -fleet.measure and logged.
func TestFleetTopAtScale(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	broker := mosquittotest.Start(t, t.TempDir(), nil)
	n := *fleetGateways
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(broker.URL).SetClientID("fleet-simulator"))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	var published, bytesOut atomic.Int64
	publish := func(i int) paho.Token {
		topic := fmt.Sprintf("gateways/gw-%04d/status", i)
		b, err := json.Marshal(simulatedStatus(i, time.Now()))
		if err != nil {
			t.Error(err)
			return nil
		}
		pub.Publish(topic, 1, true, "online")
		published.Add(1)
		bytesOut.Add(int64(len(b)))
		return pub.Publish(topic+"/json", 1, true, b)
	}
	var toks []paho.Token
	for i := 1; i <= n; i++ { // what they left, retained, before the view starts
		toks = append(toks, publish(i))
	}
	for _, tok := range toks {
		if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	t.Logf("%d statuses, %d bytes on average", n, bytesOut.Load()/int64(n))
	stop := make(chan struct{})
	done := make(chan struct{})
	var failed atomic.Int64
	go func() { // then each gateway once every 10s
		defer close(done)
		tick := time.NewTicker(10 * time.Second / time.Duration(n))
		defer tick.Stop()
		for i := 0; ; i = (i + 1) % n {
			select {
			case <-tick.C:
				if tok := publish(i + 1); tok != nil {
					go func() {
						if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
							failed.Add(1)
						}
					}()
				}
			case <-stop:
				return
			}
		}
	}()
	defer func() {
		close(stop)
		<-done
		if n := failed.Load(); n > 0 {
			t.Errorf("%d statuses not published", n)
		}
	}()

	term := startTerminal(t, bin, "top", "--fleet", "--broker", broker.URL, "--topic", "gateways/+/status")
	start := time.Now()
	pid := panePid(t, term)
	term.await(t, regexp.MustCompile(fmt.Sprintf(`%d gateways · %d up · 0 down · %d failing · %d stalled`, n, n, n/97, n/50)), 60*time.Second)
	startCPU, err := procfs.CPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("all %d gateways shown %v after the view started, their %d retained messages taken in %v of CPU", n,
		time.Since(start).Round(time.Millisecond), 2*n, startCPU)
	if row := firstRow(term.screen(t)); !strings.Contains(row, "gw-0097") || !strings.Contains(row, "failed: #") {
		t.Fatalf("the first failing gateway is not first:\n%s", term.screen(t))
	}

	cpu0, err := procfs.CPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	pub0, wall0 := published.Load(), time.Now()
	// Responsive under the flow: a filter typed finds one gateway.
	term.keys(t, "/", "g", "w", "-", "0", "7", "7", "7", "Enter")
	typed := time.Now()
	term.await(t, regexp.MustCompile(`(?m)^› gw-0777\s+running`), 5*time.Second)
	t.Logf("the filter gw-0777 typed and shown in %v", time.Since(typed).Round(time.Millisecond))
	term.keys(t, "Escape")
	<-time.After(*fleetMeasure - time.Since(wall0)) // the measurement's length: no wait for anything
	cpu1, err := procfs.CPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	wall, msgs := time.Since(wall0), published.Load()-pub0
	rss, peak, err := procfs.Memory(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cairn top --fleet, %d gateways, %.0f statuses/s for %v: CPU %v (%.1f%% of a core), resident %.1f MB (peak %.1f MB)",
		n, float64(msgs)/wall.Seconds(), wall.Round(time.Second), cpu1-cpu0, 100*(cpu1-cpu0).Seconds()/wall.Seconds(),
		float64(rss)/1e6, float64(peak)/1e6)
	term.await(t, regexp.MustCompile(fmt.Sprintf(`%d gateways`, n)), 5*time.Second)
	term.keys(t, "q")
	term.awaitExit(t, 10*time.Second)
}

// panePid is the pid of the program the terminal runs, once it runs it:
// tmux forks the pane's process, which then executes the program (under
// qemu, the test asked before it had, now and then).
func panePid(t *testing.T, term *terminal) int {
	t.Helper()
	out, err := exec.Command("tmux", "-L", term.socket, "display-message", "-p", "-t", "top", "#{pane_pid}").Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	var comm []byte
	if !testwait.Poll(10*time.Second, func() bool {
		comm, err = os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		return err == nil && strings.TrimSpace(string(comm)) == "cairn"
	}) {
		t.Fatalf("the terminal runs pid %d, %q, not cairn: %v", pid, comm, err)
	}
	return pid
}
