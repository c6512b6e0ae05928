package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/needs"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// terminal is a tmux server of the test's own, running one program in an
// 80x24 window.
type terminal struct {
	socket string // tmux -L name
}

func startTerminal(t *testing.T, command ...string) *terminal {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		needs.Missing(t, "tmux", "apt-get install tmux", "CAIRN_REQUIRE_TMUX")
	}
	term := &terminal{socket: fmt.Sprintf("cairn-test-%d", os.Getpid())}
	args := append([]string{"-L", term.socket, "-f", "/dev/null", "new-session", "-d", "-s", "top", "-x", "80", "-y", "24"}, command...)
	if out, err := exec.Command("tmux", args...).CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("tmux", "-L", term.socket, "kill-server").Run() })
	return term
}

// screen is what the terminal shows now.
func (term *terminal) screen(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("tmux", "-L", term.socket, "capture-pane", "-p", "-t", "top").Output()
	if err != nil {
		t.Fatalf("tmux capture-pane: %v", err)
	}
	return string(out)
}

func (term *terminal) keys(t *testing.T, keys ...string) {
	t.Helper()
	if out, err := exec.Command("tmux", append([]string{"-L", term.socket, "send-keys", "-t", "top"}, keys...)...).CombinedOutput(); err != nil {
		t.Fatalf("tmux send-keys: %v\n%s", err, out)
	}
}

// await polls the screen (a terminal has no change events) until it
// matches re, and returns the match.
func (term *terminal) await(t *testing.T, re *regexp.Regexp, d time.Duration) []string {
	t.Helper()
	var s string
	var m []string
	if !testwait.Poll(d, func() bool {
		s = term.screen(t)
		m = re.FindStringSubmatch(s)
		return m != nil
	}) {
		t.Fatalf("the screen never matched %v in %v; it shows:\n%s", re, d, s)
	}
	return m
}

// awaitExit waits until the program quits, which ends the session.
func (term *terminal) awaitExit(t *testing.T, d time.Duration) {
	t.Helper()
	if !testwait.Poll(d, func() bool { return exec.Command("tmux", "-L", term.socket, "has-session", "-t", "top").Run() != nil }) {
		t.Fatalf("the program did not quit in %v; it shows:\n%s", d, term.screen(t))
	}
}

// TestTopInTmux runs `cairn top` in a real terminal (tmux, 80x24) against
// the real agent running configs/skew.yaml, whose join aligns behind a slow
// scoring step: the history lists a completed checkpoint, the stall is
// highlighted and names the lagging input, and stays readable after it
// ended, in the header for a few seconds and in the Stalls panel; the
// graph shows each operator's event-time lag; after the agent is killed
// the UI says so, then picks up the restarted agent and what it restored.
func TestTopInTmux(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dataDir := t.TempDir()
	skew, err := os.ReadFile(filepath.Join("..", "..", "configs", "skew.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "skew.yaml")
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	if !strings.Contains(string(skew), "127.0.0.1:${CAIRN_SKEW_PORT:-18831}") {
		t.Fatal("configs/skew.yaml's broker does not listen on 127.0.0.1:${CAIRN_SKEW_PORT:-18831}")
	}
	if err := os.WriteFile(config, []byte(strings.Replace(string(skew), "127.0.0.1:${CAIRN_SKEW_PORT:-18831}", listen, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startAgent(t, bin, config, "--data-dir", dataDir)
	p.Await(t, completeLine, 60*time.Second)

	term := startTerminal(t, bin, "top", "--data-dir", dataDir, "--stall", "100ms") // the join aligns for about 300ms
	term.await(t, regexp.MustCompile(`cairn top .* skew.yaml · exactly-once · running`), 20*time.Second)

	term.keys(t, "Tab", "Tab")
	term.await(t, regexp.MustCompile(`\[History\]`), 10*time.Second)
	// Any completed row: on a slow machine the first may have scrolled
	// off, and one that took more than half the interval says LATE
	// instead (under qemu, behind the scoring step's backlog, each did).
	term.await(t, regexp.MustCompile(`(?m)^\d+\s+(?:completed|LATE)\s+\d\d:\d\d:\d\d`), 20*time.Second)

	term.keys(t, "Tab") // to the Stalls panel
	stall := term.await(t, regexp.MustCompile(`▲ STALL (drift/0) waits \S+ for (score/0) \(backlog \d+`), 60*time.Second)
	t.Logf("stall seen: %s waiting on %s", stall[1], stall[2])
	// Ended, it stays readable: in the header for a few seconds, and in
	// the Stalls panel's list.
	term.await(t, regexp.MustCompile(`▲ STALL drift/0 waited \S+ for score/0 \(backlog \d+\S*\) · #\d+ · ended \S+ ago`), 30*time.Second)
	row := term.await(t, regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d #(\d+)\s+drift/0\s+score/0\s+(\S+)\s+\S+\s+aligned`), 30*time.Second)
	t.Logf("in the Stalls panel: checkpoint #%s, %s", row[1], row[2])
	// The graph shows how far each operator's event time trails the clock.
	term.keys(t, "Tab")
	term.await(t, regexp.MustCompile(`OPERATOR\s+PAR\s+IN/s\s+OUT/s\s+QUEUED\s+EV LAG`), 10*time.Second)
	// The simulator's readings carry the clock of the run: the join trails
	// it by seconds (or minutes, behind the scoring step's backlog on a
	// slow machine), never the hours or days of a wrong clock.
	term.await(t, regexp.MustCompile(`(?m)^drift\s+\d+\s+\S+\s+\S+\s+\S+\s+(\d+ms|\d+(\.\d)?s|\d+m\d\ds)\s`), 10*time.Second)

	p.Kill()
	term.await(t, regexp.MustCompile(`unreachable since \d\d:\d\d:\d\d · last seen running *\n⟳ reconnecting, attempt \d+: `), 20*time.Second)

	p = startAgent(t, bin, config, "--data-dir", dataDir)
	restored := p.Await(t, restoreLine, 60*time.Second)[1]
	term.await(t, regexp.MustCompile(`restored local #`+restored+` `), 30*time.Second)
	term.await(t, regexp.MustCompile(`reconnected: the agent restarted and restored local checkpoint `+restored), 10*time.Second)
	t.Logf("screen after the restart:\n%s", term.screen(t))

	term.keys(t, "q")
	term.awaitExit(t, 10*time.Second)
}
