package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// fleetConfig is a gateway's pipeline, one file for the fleet: the
// gateway's name comes from the environment (GATEWAY). A join of a
// fleet's readings, through a scoring step, with a reference fleet's:
// fast, or with the scoring step slow (slowScore), which makes the join's
// alignments wait for it.
const fleetConfig = `agent:
  data_dir: data
brokers:
  plant:
    url: %s
    client_id: ${GATEWAY}
    keepalive: %s
    status_topic: gateways/${GATEWAY}/status
    status_interval: 1s
checkpoints:
  interval: 2s
sources:
  - id: fleet
    simulator: {devices: 50, rate: 3000, skew: 0.7}
    out_of_orderness: 1s
  - id: reference
    simulator: {devices: 50, rate: 100, seed: 7}
    out_of_orderness: 1s
operators:
  - id: score
    type: filter
    inputs: [fleet]
    expr: %q
  - id: drift
    type: join
    inputs: [score, reference]
    key_by: key
    window: {kind: tumbling, size: 10s}
    aggregate: avg
sinks:
  - id: out
    input: drift
    broker: plant
    topic: plant/${GATEWAY}/drift/{key}
`

// The slow step takes about 1 ms a reading here (30,000 steps of expr's
// VM), a third of what the 3,000 readings a second of the fleet need on
// any machine this runs on, so a backlog builds in front of it and the
// join's alignments wait. A tenth of that kept up on an idle machine
// now and then, and no stall came.
const (
	fastScore = "value > -1000"
	slowScore = "reduce(1..30000, #acc + # * value, 0) > 0"
	keepalive = 2 * time.Second
)

// fleetGateway is one agent of the fleet test.
type fleetGateway struct {
	name, file string
	agent      *cairntest.Proc
}

func (g *fleetGateway) write(t *testing.T, url, score string) {
	t.Helper()
	tmp := g.file + ".new"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, fleetConfig, url, keepalive, score), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, g.file); err != nil {
		t.Fatal(err)
	}
}

func (g *fleetGateway) start(t *testing.T, bin string) {
	t.Helper()
	g.agent = cairntest.StartEnv(t, nil, []string{"GATEWAY=" + g.name}, bin, "run", "-c", g.file)
	g.agent.Await(t, regexp.MustCompile(`msg="pipeline running"`), 60*time.Second)
}

// firstRow is the fleet table's first gateway row on screen.
func firstRow(screen string) string {
	lines := strings.Split(screen, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "  GATEWAY ") && i+1 < len(lines) {
			return lines[i+1]
		}
	}
	return ""
}

// awaitFirst polls the screen until its first row matches re and returns
// how long that took.
func (term *terminal) awaitFirst(t *testing.T, re *regexp.Regexp, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var s string
	if !testwait.PollEvery(d, 20*time.Millisecond, func() bool {
		s = term.screen(t)
		return re.MatchString(firstRow(s))
	}) {
		t.Fatalf("the first row never matched %v in %v; the screen shows:\n%s", re, d, s)
	}
	return time.Since(start)
}

// TestFleetTopInTmux runs three real agents that publish their status to
// one mosquitto and `cairn top --fleet` in a real terminal (tmux, 80x24):
// all three show; one killed with -9, and one frozen (SIGSTOP: its
// connections stay open, silent), each shows OFFLINE, first, within 1.5
// times its keepalive; restarted, it recovers; one whose pipeline gets a
// slow scoring step rises to the top with its stall named, and goes back
// when the step is fast again.
func TestFleetTopInTmux(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	broker := mosquittotest.Start(t, t.TempDir(), nil)
	dir := t.TempDir()
	var gws []*fleetGateway
	for _, name := range []string{"gw-1", "gw-2", "gw-3"} {
		g := &fleetGateway{name: name, file: filepath.Join(dir, name, "pipeline.yaml")}
		if err := os.Mkdir(filepath.Dir(g.file), 0o700); err != nil {
			t.Fatal(err)
		}
		g.write(t, broker.URL, fastScore)
		g.start(t, bin)
		gws = append(gws, g)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, g := range gws {
				t.Logf("%s's log:\n%s", g.name, g.agent.Log())
			}
		}
	})
	// The fleet's file names the broker and, in its status_topic, where a
	// gateway's name goes: the view watches gateways/+/status.
	term := startTerminal(t, bin, "top", "--fleet", "-c", gws[0].file, "--stall", "100ms")
	term.await(t, regexp.MustCompile(`tcp://127\.0\.0\.1:\d+ gateways/\+/status\n3 gateways · 3 up · 0 down`), 30*time.Second)
	for _, g := range gws {
		term.await(t, regexp.MustCompile(`(?m)^[› ] `+g.name+`\s+running `), 30*time.Second)
	}

	// kill -9: the kernel closes its connections, and mosquitto publishes
	// their wills at once.
	gws[2].agent.Kill()
	took := term.awaitFirst(t, regexp.MustCompile(`^[› ] gw-3\s+OFFLINE\s+offline since`), 10*time.Second)
	t.Logf("gw-3 killed with -9: shown OFFLINE, first, after %v (keepalive %v)", took.Round(time.Millisecond), keepalive)
	if took > keepalive*3/2 {
		t.Errorf("gw-3 shown offline %v after kill -9; want within 1.5 × its keepalive, %v", took, keepalive*3/2)
	}
	term.await(t, regexp.MustCompile(`3 gateways · 2 up · 1 down`), 5*time.Second)
	gws[2].start(t, bin)
	term.await(t, regexp.MustCompile(`3 gateways · 3 up · 0 down`), 30*time.Second)
	term.await(t, regexp.MustCompile(`(?m)^[› ] gw-3\s+running `), 10*time.Second)

	// SIGSTOP: its connections stay open and say nothing; mosquitto
	// publishes the wills once 1.5 keepalives passed without a packet.
	gws[0].agent.Signal(syscall.SIGSTOP)
	stopped := true
	defer func() {
		if stopped {
			gws[0].agent.Signal(syscall.SIGCONT)
		}
	}()
	took = term.awaitFirst(t, regexp.MustCompile(`^[› ] gw-1\s+OFFLINE`), 20*time.Second)
	t.Logf("gw-1 frozen with SIGSTOP: shown OFFLINE, first, after %v (keepalive %v)", took.Round(time.Millisecond), keepalive)
	// The broker's, by its keepalive: 1.5 keepalives (the MQTT bound)
	// after the last packet of the frozen agent's quietest client: each
	// of its clients (status, sinks) has offline as its will, and one
	// with nothing to send sends a PINGREQ when it sent nothing for a
	// keepalive, as paho looks every quarter of one: up to 1.25
	// keepalives before the freeze, so not before a quarter of one
	// (0.5s; under qemu, 1.3s once: a bound of 2s, which took the status
	// client's packet every second for the last, failed). mosquitto 2.0
	// counts the silence in whole seconds and looks at keepalives every
	// 6s (src/keepalive.c: last_keepalive_check + 5 < now): up to 1s and
	// 6s more (2.9s to 9.0s here).
	if low, high := keepalive/4, keepalive*3/2+(1+6+1)*time.Second; took < low || took > high {
		t.Errorf("gw-1 shown offline %v after it froze; want from %v (its keepalive ran out) to %v", took, low, high)
	}
	gws[0].agent.Signal(syscall.SIGCONT)
	stopped = false
	term.await(t, regexp.MustCompile(`3 gateways · 3 up · 0 down`), 30*time.Second)

	// A slow step: gw-2's join waits for it at every checkpoint.
	gws[1].write(t, broker.URL, slowScore)
	stall := term.await(t, regexp.MustCompile(`(?m)^[› ] (gw-2)\s+running\s+▲ drift/0 wait(?:s|ed) (\S+) for score/0`), 60*time.Second)
	t.Logf("gw-2 with a slow step: first, stalled %s; the screen:\n%s", stall[2], term.screen(t))
	// gw-2 sorts first: for its stall, or, where the slow step holds its
	// checkpoint in flight for 10 s (qemu-arm), for that, which is worse.
	term.awaitFirst(t, regexp.MustCompile(`^[› ] gw-2\s+running\s+(?:▲ drift/0 wait|failing: a checkpoint in flight)`), 10*time.Second)
	term.await(t, regexp.MustCompile(`· 1 stalled`), 10*time.Second)
	gws[1].write(t, broker.URL, fastScore)
	term.await(t, regexp.MustCompile(`3 gateways · 3 up · 0 down\s*\n`), 60*time.Second) // no stall counted
	if s := term.screen(t); strings.Contains(s, "▲") {
		t.Fatalf("a stall is still shown after the step is fast again:\n%s", s)
	}

	// Enter shows a gateway's detail: its checkpoints from its statuses.
	term.keys(t, "Enter")
	term.await(t, regexp.MustCompile(`── Checkpoints its statuses told of`), 10*time.Second)
	term.await(t, regexp.MustCompile(`(?m)^\d+\s+completed\s+\d\d:\d\d:\d\d`), 10*time.Second)
	term.keys(t, "Escape")
	term.await(t, regexp.MustCompile(`  GATEWAY `), 10*time.Second) // before q, which right after Escape reads as alt+q
	term.keys(t, "q")
	term.awaitExit(t, 10*time.Second)
}
