package agent

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/internal/testing/testlog"
)

// TestLateCheckpointsWarn: a checkpoint that takes more than half its
// interval is said at warn level, the first at once and then at most one
// every summary interval, which counts those not said; the summary
// counts them all.
func TestLateCheckpointsWarn(t *testing.T) {
	logs := new(testlog.Buffer)
	c := &checkpointLog{log: slog.New(slog.NewTextHandler(logs, nil)), lateLog: lateLog{every: time.Minute}}
	at := time.Unix(1_795_000_000, 0)
	complete := func(id uint64, d time.Duration, now time.Time) {
		c.onComplete(&checkpoint.Manifest{ID: id, Duration: d}, 10*time.Second, now)
	}
	complete(1, 5*time.Second, at) // half: not late
	complete(2, 6*time.Second, at)
	complete(3, 7*time.Second, at.Add(10*time.Second))
	complete(4, 8*time.Second, at.Add(20*time.Second))
	complete(5, 9*time.Second, at.Add(61*time.Second))
	got := logs.String()
	if n := strings.Count(got, "checkpoint late"); n != 2 {
		t.Fatalf("%d warnings, want #2's and #5's:\n%s", n, got)
	}
	for _, want := range []string{"level=WARN msg=\"checkpoint late: it took more than half the checkpoint interval\" id=2 duration=6s interval=10s\n",
		"id=5 duration=9s interval=10s late_since_last_warning=2\n"} {
		if !strings.Contains(got, want) {
			t.Fatalf("the log lacks %q:\n%s", want, got)
		}
	}
	c.summary()
	if !strings.Contains(logs.String(), " late=4 ") {
		t.Fatalf("the summary does not count the 4 late ones:\n%s", logs)
	}
}
