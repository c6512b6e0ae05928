package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os/exec"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/bench"
	"github.com/cairn-edge/cairn/internal/mosquittotest"
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

// TestBenchWear runs `cairn bench wear --json` on the built binary with
// short windows: the figures of each load agree with each other and with
// what the loads are, and the agent's own counts are there. (A baseline
// is measured by the same code, first.)
func TestBenchWear(t *testing.T) {
	mosquittotest.Require(t)
	bin := buildCairn(t)
	out, err := exec.Command(bin, "bench", "wear", "--json", "--devices", "20",
		"--wear-duration", "3s", "--idle-duration", "2s", "--busy-rate", "1000", "--busy-duration", "3s").Output()
	if err != nil {
		t.Fatalf("cairn bench wear --json: %v\n%s", err, out)
	}
	var r bench.WearResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("not the wear result: %v\n%s", err, out)
	}
	if r.Devices != 20 || r.BusyRate != 1000 || r.Baseline != nil || r.Cairn.Binary != bin {
		t.Fatalf("sizes and binaries not as asked:\n%s", out)
	}
	run := r.Cairn
	for name, f := range map[string]bench.WearFigures{"reference": run.Reference, "busy": run.Busy} {
		// 20 devices a second over 3 s, 1000 a second over 3 s: within
		// a third either way.
		want := 60.0
		if name == "busy" {
			want = 3000
		}
		if !f.AgentCounts || math.Abs(float64(f.Messages)-want) > want/3 || f.Seconds < 3 {
			t.Fatalf("%s load: %d messages in %.1f s, agent counts %v; want about %v in 3 s:\n%s", name, f.Messages, f.Seconds, f.AgentCounts, want, out)
		}
		if f.WrittenBytes <= 0 || math.Abs(f.WrittenPerMessage-float64(f.WrittenBytes)/float64(f.Messages)) > 1e-6*f.WrittenPerMessage ||
			math.Abs(f.WrittenVsInputRatio-float64(f.WrittenBytes)/float64(f.InputBytes)) > 1e-6*f.WrittenVsInputRatio {
			t.Fatalf("%s load: written figures disagree:\n%s", name, out)
		}
		// Every message is in the ingest log, which syncs what it writes.
		if f.IngestWrittenBytes <= 0 || f.IngestSyncsPerSec <= 0 {
			t.Fatalf("%s load: nothing ingested or synced:\n%s", name, out)
		}
		// CPU time comes in clock ticks (10 ms): the reference load's
		// 60 messages may take less than one.
		if name == "busy" && (f.CPUMicrosPerMessage <= 0 || f.BareCPUMicrosPerMessage <= 0) {
			t.Fatalf("%s load: no CPU spent:\n%s", name, out)
		}
		if got := f.IngestSyncsPerSec + f.CheckpointSyncsPerSec; math.Abs(f.SyncsPerSec-got) > 1e-6*got {
			t.Fatalf("%s load: %v syncs/s is not ingest's and checkpoints' %v:\n%s", name, f.SyncsPerSec, got, out)
		}
	}
	// The PUBACKs of the reference load wait for the ingest log's
	// sync, once a second: none comes back later than two.
	if f := run.Reference; f.AckP50MS <= 0 || f.AckP50MS > f.AckP99MS || f.AckP99MS > 2000 {
		t.Fatalf("publish → PUBACK p50 %v, p99 %v ms:\n%s", f.AckP50MS, f.AckP99MS, out)
	}
	if idle := run.Idle; idle.Messages != 0 || idle.IngestWrittenBytes != 0 {
		t.Fatalf("idle: %d messages, ingest wrote %d bytes:\n%s", idle.Messages, idle.IngestWrittenBytes, out)
	}
}
