package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

// TestSavepointMovesStateToAnotherAgent writes a savepoint from a running
// agent and starts a second agent, on an empty data directory, from it; a
// pipeline that lost an operator is refused unless told to drop its state.
func TestSavepointMovesStateToAnotherAgent(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte(e2eToken), 0o600)
	write := func(name, data string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	first := write("first.yaml", fmt.Sprintf(e2eConfig, filepath.Join(dir, "one"), freePort(t), freePort(t), token, freePort(t)))
	p := startAgent(t, bin, first)
	p.Await(t, completeLine, 30*time.Second)
	out, err := exec.Command(bin, "savepoint", "-c", first).Output()
	if err != nil {
		t.Fatalf("cairn savepoint: %v", err)
	}
	sp := strings.TrimSpace(string(out))
	id := regexp.MustCompile(`savepoint-(\d+)\.cairn$`).FindStringSubmatch(sp)
	if id == nil {
		t.Fatalf("cairn savepoint printed %q", sp)
	}
	p.Signal(syscall.SIGTERM)
	p.Await(t, finalLine, 30*time.Second)
	p.Wait()

	// A pipeline without the window operator refuses the savepoint's state.
	second := fmt.Sprintf(e2eConfig, filepath.Join(dir, "two"), freePort(t), freePort(t), token, freePort(t))
	noWindow := write("nowindow.yaml", strings.Replace(strings.Replace(second, "  - id: avg\n", "  - id: avg2\n", 1), "input: avg\n", "input: avg2\n", 1))
	cmd := exec.Command(bin, "run", "-c", noWindow, "--from-savepoint", sp)
	msg, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(string(msg), "holds state of operators the pipeline does not have: avg") {
		t.Fatalf("a savepoint with a dropped operator: %v\n%s", err, msg)
	}

	q := startAgent(t, bin, write("second.yaml", second), "--from-savepoint", sp)
	if got := q.Await(t, restoreLine, 30*time.Second)[1]; got != id[1] {
		t.Fatalf("restored checkpoint %s, want the savepoint's %s", got, id[1])
	}
	q.Await(t, completeLine, 30*time.Second)
	out, err = exec.Command(bin, "status", "--json", "--data-dir", filepath.Join(dir, "two")).Output()
	if err != nil {
		t.Fatal(err)
	}
	var st api.Status
	if json.Unmarshal(out, &st) != nil || st.RestoredFrom == nil || st.RestoredFrom.Source != "savepoint" || fmt.Sprint(st.RestoredFrom.ID) != id[1] {
		t.Fatalf("status of the agent started from the savepoint:\n%s", out)
	}
}

// TestSavepointsAreRetained takes three savepoints of an agent that keeps
// two: the oldest file is deleted, the two newest stay.
func TestSavepointsAreRetained(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	config, data := filepath.Join(dir, "pipeline.yaml"), filepath.Join(dir, "data")
	text := fmt.Sprintf("agent:\n  data_dir: %s\n  retained_savepoints: 2\ncheckpoints:\n  interval: 1h\nsources:\n  - id: fleet\n    simulator: {devices: 5, rate: 100}\n"+
		"operators:\n  - id: counts\n    type: count\n    inputs: [fleet]\n    key_by: key\n", data)
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	startAgent(t, bin, config)
	cairntest.AwaitStatus(t, filepath.Join(data, "cairn.sock"), "the agent running", 30*time.Second, func(st api.Status) bool { return st.State == "running" })
	var paths []string
	for range 3 {
		code, out, stderr := cairntest.Run(t, bin, "savepoint", "-c", config)
		if code != 0 {
			t.Fatalf("cairn savepoint: exit status %d\n%s", code, stderr)
		}
		paths = append(paths, strings.TrimSpace(out))
	}
	for i, path := range paths {
		_, err := os.Stat(path)
		if kept := i > 0; kept != (err == nil) {
			t.Fatalf("savepoint %d of 3 (%s): kept %v (%v), want only the 2 newest", i+1, path, err == nil, err)
		}
	}
}

// TestCheckpointsSaysWhatTheyAre lists the checkpoints of an at-least-once
// agent, running and stopped: their kind is at-least-once, not aligned,
// and --verify reads their state and finds it whole.
func TestCheckpointsSaysWhatTheyAre(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	config, data := filepath.Join(dir, "pipeline.yaml"), filepath.Join(dir, "data")
	text := fmt.Sprintf("agent:\n  data_dir: %s\ncheckpoints:\n  interval: 100ms\n  mode: at-least-once\nsources:\n  - id: fleet\n    simulator: {devices: 5, rate: 100}\n"+
		"operators:\n  - id: counts\n    type: count\n    inputs: [fleet]\n    key_by: key\n", data)
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\d+ +\d+ B +\d+ ms +\d+ ms +(true|false) +(\S+(?: \S+)?) +\d+ B +- +(ok|DAMAGED.*)$`)
	check := func(when string) {
		t.Helper()
		out, err := exec.Command(bin, "checkpoints", "--verify", "-c", config).CombinedOutput()
		rows := row.FindAllStringSubmatch(string(out), -1)
		if err != nil || len(rows) == 0 || !strings.Contains(string(out), "STATE") {
			t.Fatalf("cairn checkpoints --verify of the %s agent: %v\n%s", when, err, out)
		}
		for _, r := range rows {
			if r[2] != "at-least-once" || r[3] != "ok" {
				t.Fatalf("the %s agent's checkpoint %q: kind %q, state %q; want at-least-once and ok\n%s", when, r[0], r[2], r[3], out)
			}
		}
	}
	p := startAgent(t, bin, config)
	for range 3 {
		p.Await(t, completeLine, 30*time.Second)
	}
	check("running")
	p.Signal(syscall.SIGTERM)
	p.Await(t, finalLine, 30*time.Second)
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	check("stopped")
}
