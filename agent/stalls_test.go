package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/internal/testing/loopback"
	"github.com/cairn-edge/cairn/internal/testing/testlog"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
	"github.com/cairn-edge/cairn/runtime"
)

// TestStallsKeepTheLongestOfEachCheckpoint: the list holds, for each of
// the newest checkpoints, its longest alignment of a millisecond or
// more, ordered by checkpoint whatever order they end in; the histogram
// counts every one.
func TestStallsKeepTheLongestOfEachCheckpoint(t *testing.T) {
	s := newStalls()
	start := time.UnixMilli(1_795_000_000_000)
	align := func(id uint64, subtask int, d time.Duration) {
		s.aligned(start, runtime.Aligned{Task: checkpoint.TaskID{Operator: "drift", Subtask: subtask}, ID: id, Started: time.Second,
			Duration: d, WaitedFor: checkpoint.TaskID{Operator: "score"}, Backlog: 7})
	}
	align(5, 0, 300*time.Millisecond)
	align(5, 1, 900*time.Millisecond) // the longer of #5
	align(5, 0, 100*time.Millisecond)
	align(4, 1, 2*time.Second) // ends after #5's
	align(6, 0, 500*time.Microsecond)
	got := s.list(clocks{mono: start, wall: start})
	if len(got) != 2 || got[0].CheckpointID != 4 || got[1].CheckpointID != 5 || got[1].Subtask != "drift/1" || got[1].DurationMS != 900 {
		t.Fatalf("stalls %+v", got)
	}
	if got[1].StartedUnixMS != 1_795_000_001_000 || got[1].WaitedFor != "score/0" || got[1].Outcome != "aligned" || got[1].Backlog != 7 {
		t.Fatalf("stall %+v", got[1])
	}
	for id := uint64(7); id < 7+stallsKept; id++ {
		align(id, 0, 10*time.Millisecond)
	}
	align(3, 0, time.Minute) // older than every one kept
	if got := s.list(clocks{mono: start, wall: start}); len(got) != stallsKept || got[0].CheckpointID != 7 {
		t.Fatalf("after %d more: %d stalls from #%d", stallsKept, len(got), got[0].CheckpointID)
	}
	hs := s.histograms()
	if h := hs[labels("operator", "drift", "subtask", "0")]; h.count != 3+stallsKept+1 {
		t.Fatalf("drift/0's histogram counts %d", h.count)
	}
}

const skewedPipeline = `agent:
  data_dir: %s
  metrics: %s
checkpoints:
  interval: 200ms
sources:
  - id: fleet
    simulator: {devices: 50, rate: 2000, skew: 0.7}
    out_of_orderness: 1s
  - id: reference
    simulator: {devices: 50, rate: 100, seed: 7}
    out_of_orderness: 1s
operators:
  - id: score
    type: filter
    inputs: [fleet]
    expr: "reduce(1..3000, #acc + # * value, 0) > 0"
  - id: drift
    type: join
    inputs: [score, reference]
    key_by: key
    window: {kind: tumbling, size: 10s}
    aggregate: avg
`

// TestStallsAndWatermarks runs a join behind a costly step: its
// alignments wait for that step's side, and the status lists them with
// the input waited for, the metrics count them per subtask, and both
// show each operator's event time trailing the clock by about the
// sources' out-of-orderness.
func TestStallsAndWatermarks(t *testing.T) {
	dir := t.TempDir()
	port, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	file := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, skewedPipeline, filepath.Join(dir, "data"), addr), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := new(testlog.Buffer)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	began := time.Now().UnixMilli()
	go func() { ran <- Run(ctx, file, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()
	client := api.NewClient(SocketPath(filepath.Join(dir, "data")))
	var st api.Status
	testwait.For(t, 60*time.Second, "stalls that waited for score", func() bool {
		st, err = client.Status(context.Background())
		return err == nil && slices.ContainsFunc(st.Stalls, func(s api.Stall) bool { return s.WaitedFor == "score/0" })
	})
	for _, s := range st.Stalls {
		if s.Subtask != "drift/0" || s.DurationMS < 1 || s.StartedUnixMS > st.TimeUnixMS || s.Outcome != "aligned" {
			t.Errorf("stall %+v", s)
		}
	}
	// The simulator's readings carry the clock of the run: the watermarks
	// trail it by the out-of-orderness (and a millisecond), those behind
	// the costly step by its backlog too, and the lag is how far they
	// trail the agent's clock.
	lags := map[string]float64{}
	for _, op := range st.Operators {
		if op.WatermarkUnixMS < began-1001 || op.WatermarkUnixMS > st.TimeUnixMS || op.WatermarkLagMS != st.TimeUnixMS-op.WatermarkUnixMS {
			t.Errorf("operator %s: watermark %d, lag %dms at %d: want a time since the run began at %d, and the lag behind the status's time",
				op.ID, op.WatermarkUnixMS, op.WatermarkLagMS, st.TimeUnixMS, began)
		}
		lags[op.ID] = float64(op.WatermarkLagMS) / 1000
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	e, err := parseExposition(string(body))
	if err != nil {
		t.Fatal(err)
	}
	if n := e.values[`cairn_alignment_stall_seconds_count{operator="drift",subtask="0"}`]; n < float64(len(st.Stalls)) {
		t.Errorf("the histogram counts %g alignments of drift/0; the status lists %d", n, len(st.Stalls))
	}
	for _, op := range []string{"fleet", "reference", "score", "drift"} {
		// Read later than the status: the lag grows by the time between,
		// less what the watermark moved.
		if lag := e.values[`cairn_watermark_lag_seconds{operator="`+op+`"}`]; lag < lags[op]-30 || lag > lags[op]+30 {
			t.Errorf("cairn_watermark_lag_seconds of %s is %g; the status said %g", op, lag, lags[op])
		}
	}
	if strings.Contains(string(body), `cairn_alignment_stall_seconds_count{operator="score"`) {
		t.Errorf("a subtask of one input has alignments:\n%s", body)
	}
}
