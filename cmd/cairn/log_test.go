package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

// TestLogSummaryInJSON runs the agent at the default log level with
// log_format json and checkpoints every 100ms: every line is a JSON object,
// no checkpoint is logged one by one at info level, the first one is, and
// the summary counts the others.
func TestLogSummaryInJSON(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	config := filepath.Join(dir, "pipeline.yaml")
	text := fmt.Sprintf("agent:\n  data_dir: %s\n  log_format: json\n  log_summary_interval: 1s\ncheckpoints:\n  interval: 100ms\n"+
		"sources:\n  - id: fleet\n    simulator: {devices: 5, rate: 100}\n"+
		"operators:\n  - id: counts\n    type: count\n    inputs: [fleet]\n    key_by: key\n", filepath.Join(dir, "data"))
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	p := cairntest.Start(t, nil, bin, "run", "-c", config)
	// A summary a second counts the checkpoints of that second (the first
	// may count fewer, the pipeline starting).
	deadline := time.Now().Add(30 * time.Second)
	for completed := 0; completed < 2; {
		summary := p.Await(t, regexp.MustCompile(`"msg":"checkpoints".*"completed":(\d+)`), time.Until(deadline))
		fmt.Sscan(summary[1], &completed)
	}
	p.Signal(syscall.SIGTERM)
	p.Await(t, regexp.MustCompile(`"msg":"final checkpoint complete"`), 30*time.Second)
	p.Await(t, regexp.MustCompile(`"msg":"cairn stopped"`), 30*time.Second)
	firsts := 0
	for i, line := range strings.Split(strings.TrimRight(p.Log(), "\n"), "\n") {
		var l struct {
			Level, Msg string
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("line %d is not JSON (%v): %q", i+1, err, line)
		}
		switch l.Msg {
		case "checkpoint complete":
			t.Fatalf("a checkpoint logged one by one at level %s: %s", l.Level, line)
		case "first checkpoint complete":
			firsts++
		}
	}
	if firsts != 1 {
		t.Fatalf("%d lines say the first checkpoint completed, want 1:\n%s", firsts, p.Log())
	}
}
