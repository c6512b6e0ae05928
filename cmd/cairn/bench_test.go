package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os/exec"
	"strings"
	"testing"
)

// TestBenchPipeline runs `cairn bench pipeline` on the built binary with
// small sizes: with --json it prints one object whose figures and ratio
// agree with each other; without, a table; an unknown scenario is a usage
// error.
func TestBenchPipeline(t *testing.T) {
	bin := buildCairn(t)
	out, err := exec.Command(bin, "bench", "pipeline", "--json", "--records", "200000", "--keys", "100", "--interval", "1ms").Output()
	if err != nil {
		t.Fatalf("cairn bench pipeline --json: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one line of JSON, got:\n%s", out)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	number := func(name string) float64 {
		t.Helper()
		v, ok := r[name].(float64)
		if !ok {
			t.Fatalf("field %q is %v, want a number:\n%s", name, r[name], out)
		}
		return v
	}
	if r["scenario"] != "pipeline" || number("records") != 200000 || number("keys") != 100 || number("checkpoint_interval_ms") != 1 {
		t.Fatalf("scenario and sizes not as asked:\n%s", out)
	}
	off, on := number("off_records_per_sec"), number("on_records_per_sec")
	if off <= 0 || on <= 0 || number("off_allocs_per_record") < 0 || number("on_allocs_per_record") < 0 {
		t.Fatalf("rates must be positive, allocations not negative:\n%s", out)
	}
	if number("checkpoints") < 1 {
		t.Fatalf("no checkpoint completed in the run with checkpoints on:\n%s", out)
	}
	// The overhead is time on over time off, for the same records: the
	// rate off over the rate on.
	if ratio := number("checkpoint_overhead_ratio"); math.Abs(ratio-off/on) > 1e-9*ratio {
		t.Fatalf("checkpoint_overhead_ratio %v, but the rates give %v:\n%s", ratio, off/on, out)
	}

	out, err = exec.Command(bin, "bench", "--records", "20000", "pipeline").Output()
	if err != nil || !strings.HasPrefix(string(out), "pipeline\n") || !strings.Contains(string(out), "checkpoint overhead (time on / off)") {
		t.Fatalf("cairn bench pipeline (a table): %v\n%s", err, out)
	}

	cmd := exec.Command(bin, "bench", "warp-drive")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), `unknown scenario "warp-drive"`) {
		t.Fatalf("unknown scenario: %v, %q; want exit status 2 and a message", err, stderr.String())
	}
}
