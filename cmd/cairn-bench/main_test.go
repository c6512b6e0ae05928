package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/bench"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
)

func TestMain(m *testing.M) { os.Exit(cairntest.Main(m)) }

// benchRun runs the built cairn-bench with args and returns its exit
// status and output.
func benchRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return cairntest.Run(t, cairntest.Build(t, "cairn-bench"), args...)
}

// TestPipeline runs `cairn-bench pipeline` with small sizes: with --json
// it prints one object whose figures and ratio agree with each other;
// without, a table.
func TestPipeline(t *testing.T) {
	code, out, errOut := benchRun(t, "pipeline", "--json", "--records", "200000", "--keys", "100", "--interval", "1ms")
	if code != 0 {
		t.Fatalf("cairn-bench pipeline --json: exit status %d\n%s%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
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

	code, out, errOut = benchRun(t, "--records", "20000", "pipeline")
	if code != 0 || !strings.HasPrefix(out, "pipeline\n") || !strings.Contains(out, "checkpoint overhead (time on / off)") {
		t.Fatalf("cairn-bench pipeline (a table): exit status %d\n%s%s", code, out, errOut)
	}
}

// TestUsage: asked for help, cairn-bench and its bare subscriber print
// their usage on stdout and exit 0; a usage error prints it on stderr and
// exits 2, and so does an unknown scenario, naming it.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"--json", "-h"}} {
		if code, out, errOut := benchRun(t, args...); code != 0 || !strings.HasPrefix(out, "usage: cairn-bench ") || !strings.Contains(out, "-cairn") || errOut != "" {
			t.Errorf("cairn-bench %v: exit status %d, stdout %q, stderr %q; want 0 and the usage on stdout", args, code, out, errOut)
		}
	}
	if code, out, errOut := benchRun(t, "bare-subscriber", "-h"); code != 0 || !strings.HasPrefix(out, "usage: cairn-bench bare-subscriber") || errOut != "" {
		t.Errorf("cairn-bench bare-subscriber -h: exit status %d, stdout %q, stderr %q; want 0 and its usage on stdout", code, out, errOut)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"warp-drive"}, `cairn-bench: unknown scenario "warp-drive" (known: pipeline, `},
		{[]string{"pipeline", "--frob"}, "cairn-bench: flag provided but not defined: -frob"},
		{[]string{"bare-subscriber"}, "cairn-bench bare-subscriber: --broker and --topic are required"},
	} {
		if code, out, errOut := benchRun(t, tc.args...); code != 2 || out != "" || !strings.Contains(errOut, tc.says) {
			t.Errorf("cairn-bench %v: exit status %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errOut, tc.says)
		}
	}
}

// TestFindCairn: footprint and wear run the cairn named, else the one
// beside cairn-bench named as it is without -bench, else the one on the
// PATH, else none, saying how to name one.
func TestFindCairn(t *testing.T) {
	dir, path := t.TempDir(), t.TempDir()
	for _, f := range []string{filepath.Join(dir, "cairn-bench-linux-arm64"), filepath.Join(dir, "cairn-linux-arm64"),
		filepath.Join(dir, "cairn-bench"), filepath.Join(path, "cairn")} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", path)
	for _, c := range []struct{ given, self, want string }{
		{"/opt/cairn", filepath.Join(dir, "cairn-bench"), "/opt/cairn"},
		{"", filepath.Join(dir, "cairn-bench-linux-arm64"), filepath.Join(dir, "cairn-linux-arm64")},
		{"", filepath.Join(dir, "cairn-bench"), filepath.Join(path, "cairn")}, // no cairn beside it
	} {
		if got, err := findCairn(c.given, c.self); err != nil || got != c.want {
			t.Errorf("findCairn(%q, %q) = %q, %v; want %q", c.given, c.self, got, err, c.want)
		}
	}
	t.Setenv("PATH", t.TempDir())
	if got, err := findCairn("", filepath.Join(dir, "cairn-bench")); err == nil || !strings.Contains(err.Error(), "--cairn PATH") {
		t.Errorf("with no cairn to find: %q, %v; want an error naming --cairn", got, err)
	}
}

// TestWear runs `cairn-bench wear --json` with short windows on the
// cairn built beside it: the figures of each load agree with each other
// and with what the loads are, and the agent's own counts are there. (A
// baseline is measured by the same code, first.)
func TestWear(t *testing.T) {
	mosquittotest.Require(t)
	cairn := cairntest.Build(t, "cairn")
	code, out, errOut := benchRun(t, "wear", "--json", "--devices", "20",
		"--wear-duration", "3s", "--idle-duration", "2s", "--busy-rate", "1000", "--busy-duration", "3s", "--busy-windows", "20,1000")
	if code != 0 {
		t.Fatalf("cairn-bench wear --json: exit status %d\n%s%s", code, out, errOut)
	}
	var r bench.WearResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not the wear result: %v\n%s", err, out)
	}
	if r.Devices != 20 || r.BusyRate != 1000 || r.Baseline != nil || r.Cairn.Binary != cairn {
		t.Fatalf("sizes and binaries not as asked (cairn is %s):\n%s", cairn, out)
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
	// The busy load ran through each window asked for, the widest's
	// figures being the busy ones.
	if len(run.Windows) != 2 || run.Windows[0].Window != 20 || run.Windows[1].Window != 1000 || run.Windows[1].WearFigures != run.Busy {
		t.Fatalf("busy windows not as asked (20, 1000, the busy figures the last's):\n%s", out)
	}
	// The PUBACKs wait for the ingest log's sync, once a second: none
	// comes back later than two.
	for name, f := range map[string]bench.WearFigures{"reference": run.Reference, "busy, window 20": run.Windows[0].WearFigures, "busy, window 1000": run.Busy} {
		if f.AckP50MS <= 0 || f.AckP50MS > f.AckP99MS || f.AckP99MS > 2000 {
			t.Fatalf("%s: publish → PUBACK p50 %v, p99 %v ms:\n%s", name, f.AckP50MS, f.AckP99MS, out)
		}
	}
	if idle := run.Idle; idle.Messages != 0 || idle.IngestWrittenBytes != 0 {
		t.Fatalf("idle: %d messages, ingest wrote %d bytes:\n%s", idle.Messages, idle.IngestWrittenBytes, out)
	}
}

// TestIngress runs `cairn-bench ingress --json` with short windows: both
// loads are measured through the embedded broker and through mosquitto
// in front, with about as many readings as the loads send; the embedded
// broker's PUBACK waits for the ingest log's sync (once a second at the
// most), mosquitto's does not.
func TestIngress(t *testing.T) {
	mosquittotest.Require(t)
	cairntest.Build(t, "cairn")
	code, out, errOut := benchRun(t, "ingress", "--json", "--devices", "20", "--ingress-duration", "3s", "--busy-rate", "1000", "--busy-duration", "3s")
	if code != 0 {
		t.Fatalf("cairn-bench ingress --json: exit status %d\n%s%s", code, out, errOut)
	}
	var r bench.IngressResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not the ingress result: %v\n%s", err, out)
	}
	if len(r.Loads) != 2 || r.Loads[0].Load != "reference" || r.Loads[0].Devices != 20 || r.Loads[1].Rate != 1000 {
		t.Fatalf("loads not as asked:\n%s", out)
	}
	for _, l := range r.Loads {
		want := float64(3 * l.Rate) // within a third either way
		for name, f := range map[string]bench.IngressFigures{"embedded": l.Embedded, "mosquitto in front": l.InFront} {
			if math.Abs(float64(f.Messages)-want) > want/3 || f.AckP50MS <= 0 || f.AckP50MS > f.AckP99MS || f.AckP99MS > 2000 {
				t.Fatalf("%s load, %s: %d readings, PUBACK p50 %v, p99 %v ms; want about %v, under 2 s:\n%s", l.Load, name, f.Messages, f.AckP50MS, f.AckP99MS, want, out)
			}
		}
		if l.Load == "busy" && (l.Embedded.CPUPerMessageMicros <= 0 || l.InFront.CPUPerMessageMicros <= 0) {
			t.Fatalf("busy load: no CPU spent:\n%s", out)
		}
	}
}
