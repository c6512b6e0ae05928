package main

import (
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/agent/api"
)

// TestStatusSaysStallsAndLateCheckpoints: the human status names the
// longest recent stall, counts the late checkpoints and says how far the
// event time of each operator that has one trails the clock, in the unit
// that suits it.
func TestStatusSaysStallsAndLateCheckpoints(t *testing.T) {
	st := api.Status{Operators: []api.Operator{{ID: "fleet", WatermarkUnixMS: 1, WatermarkLagMS: 1_100}, {ID: "counts"}, {ID: "drift", WatermarkUnixMS: 1, WatermarkLagMS: 3_400}},
		Checkpoints: api.Checkpoints{Late: 2, IntervalMS: 10_000}, Stalls: []api.Stall{
			{CheckpointID: 40, Subtask: "drift/0", WaitedFor: "score/0", DurationMS: 300, Backlog: 7, Outcome: "aligned"},
			{CheckpointID: 41, Subtask: "drift/1", WaitedFor: "score/1", DurationMS: 1_600, Backlog: 515, StartedUnixMS: 0, Outcome: "timed out"},
		}}
	got := strings.Join(stallLines(st), "\n")
	for _, want := range []string{"event time behind the clock: fleet 1.1s, drift 3.4s", "late checkpoints: 2 took more than half the 10s interval",
		"longest recent stall: drift/1 waited 1.6s for score/1 (backlog 515) at checkpoint 41", "timed out"} {
		if !strings.Contains(got, want) {
			t.Errorf("the status lacks %q:\n%s", want, got)
		}
	}
	if lines := stallLines(api.Status{}); len(lines) != 0 {
		t.Errorf("a status without late checkpoints or stalls says %q", lines)
	}
	for ms, want := range map[int64]string{0: "-", 1_234: "1.234s", 754_321: "12m34s", 29_097_988_491: "336d18h"} {
		op := api.Operator{WatermarkLagMS: ms, WatermarkUnixMS: 1}
		if ms == 0 {
			op.WatermarkUnixMS = 0
		}
		if got := eventLag(op); got != want {
			t.Errorf("eventLag of %dms = %q, want %q", ms, got, want)
		}
	}
}

// TestStatusSaysEventTimeAheadOfTheClock: an operator whose event time is
// ahead of the agent's clock (the gateway's clock not set, or a source
// that takes readings from the future) is said to be ahead, by how much,
// not 0s behind.
func TestStatusSaysEventTimeAheadOfTheClock(t *testing.T) {
	now := int64(1_800_000_000_000)
	st := api.Status{TimeUnixMS: now, Operators: []api.Operator{
		{ID: "avg", WatermarkUnixMS: now + 90_000}, {ID: "fleet", WatermarkUnixMS: now - 2_000, WatermarkLagMS: 2_000}}}
	got := strings.Join(stallLines(st), "\n")
	for _, want := range []string{"event time behind the clock: fleet 2s", "event time AHEAD of the clock (a device or gateway clock is wrong): avg 1m30s"} {
		if !strings.Contains(got, want) {
			t.Errorf("the status lacks %q:\n%s", want, got)
		}
	}
}
