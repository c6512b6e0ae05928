package checkpoint

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

func parseTask(t *testing.T, s string) TaskID {
	op, sub, ok := strings.Cut(s, "/")
	n, err := strconv.Atoi(sub)
	if !ok || err != nil {
		t.Fatalf("bad task %q, want operator/subtask", s)
	}
	return TaskID{Operator: op, Subtask: n}
}

func durationArg(t *testing.T, d *datadriven.TestData, key string, def time.Duration) time.Duration {
	if !d.HasArg(key) {
		return def
	}
	var s string
	d.ScanArgs(t, key, &s)
	v, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// formatReady describes a Ready in the order its parts must be carried out.
func formatReady(rd Ready) string {
	var out []string
	for _, a := range rd.Aborted {
		out = append(out, fmt.Sprintf("abort %d: %s (%s)", a.ID, a.Reason, a.Cause))
	}
	for _, tr := range rd.Triggers {
		s := fmt.Sprintf("trigger %d at the sources", tr.Barrier.ID)
		if tr.Manual {
			s += " (requested)"
		}
		if tr.Barrier.Aligned {
			s += ", aligned at every subtask"
		}
		out = append(out, s)
	}
	if m := rd.Finalize; m != nil {
		var tasks []string
		for _, a := range m.Subtasks {
			tasks = append(tasks, a.Task.String())
		}
		out = append(out, fmt.Sprintf("write completion record %d {%s} after %v", m.ID, strings.Join(tasks, " "), m.Duration))
	}
	for _, m := range rd.Completed {
		out = append(out, fmt.Sprintf("complete %d: notify subtasks, sinks commit", m.ID))
	}
	if rd.Failed != nil {
		out = append(out, "fail the job: "+rd.Failed.Error())
	}
	if len(out) == 0 {
		return "nothing to do\n"
	}
	return strings.Join(out, "\n") + "\n"
}

func TestCoordinatorScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/coordinator", func(t *testing.T, path string) {
		var c *Coordinator
		var now time.Duration
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "coordinator":
				cfg := DefaultConfig()
				cfg.Interval = durationArg(t, d, "interval", 0)
				cfg.MinPause = durationArg(t, d, "min-pause", 0)
				cfg.Timeout = durationArg(t, d, "timeout", cfg.Timeout)
				d.MaybeScanArgs(t, "max-concurrent", &cfg.MaxConcurrent)
				d.MaybeScanArgs(t, "tolerable", &cfg.TolerableFailures)
				var lastID uint64
				d.MaybeScanArgs(t, "last-id", &lastID)
				var tasks []TaskID
				for _, s := range strings.Fields(d.Input) {
					tasks = append(tasks, parseTask(t, s))
				}
				var err error
				if c, err = NewCoordinator(cfg, tasks, lastID); err != nil {
					return "error: " + err.Error() + "\n"
				}
				now = 0
				return fmt.Sprintf("%d subtasks, last id %d\n", len(tasks), lastID)
			case "tick":
				now = durationArg(t, d, "at", now)
				c.Tick(now)
			case "request":
				request := c.RequestCheckpoint
				if d.HasArg("final") {
					request = c.RequestFinal
				}
				if id := request(); id == 0 {
					return "refused\n" + formatReady(c.Ready())
				}
			case "ack":
				var id uint64
				d.ScanArgs(t, "id", &id)
				arg, _ := d.Arg("tasks")
				for _, s := range arg.Vals {
					c.Acknowledge(Ack{Task: parseTask(t, s), ID: id})
				}
			case "decline":
				var id uint64
				var task, reason string
				d.ScanArgs(t, "id", &id)
				d.ScanArgs(t, "task", &task)
				d.ScanArgs(t, "reason", &reason)
				c.Decline(parseTask(t, task), id, reason)
			case "overtaken":
				var id, by uint64
				var task string
				d.ScanArgs(t, "id", &id)
				d.ScanArgs(t, "by", &by)
				d.ScanArgs(t, "task", &task)
				c.Overtaken(parseTask(t, task), id, by)
			case "finalized":
				var id uint64
				d.ScanArgs(t, "id", &id)
				var err error
				if d.HasArg("err") {
					var msg string
					d.ScanArgs(t, "err", &msg)
					err = errors.New(msg)
				}
				c.Finalized(id, err)
			case "finished":
				var task string
				d.ScanArgs(t, "task", &task)
				c.TaskFinished(parseTask(t, task))
			case "pending":
				var out []string
				for _, id := range c.Pending() {
					var acked []string
					for _, task := range c.Acked(id) {
						acked = append(acked, task.String())
					}
					out = append(out, fmt.Sprintf("%d acked by {%s}", id, strings.Join(acked, " ")))
				}
				if len(out) == 0 {
					return "none pending\n"
				}
				return strings.Join(out, "\n") + "\n"
			default:
				t.Fatalf("unknown command %q", d.Cmd)
			}
			return formatReady(c.Ready())
		})
	})
}

// TestNextTick: the coordinator says when a tick would next do something,
// and a tick then does it; before then, ticks do nothing.
func TestNextTick(t *testing.T) {
	tasks := []TaskID{{Operator: "src"}}
	cfg := DefaultConfig()
	cfg.Interval, cfg.Timeout, cfg.MinPause, cfg.TolerableFailures = time.Second, 5*time.Second, 300*time.Millisecond, -1
	c, err := NewCoordinator(cfg, tasks, 0)
	if err != nil {
		t.Fatal(err)
	}
	due := func(want time.Duration) {
		t.Helper()
		at, ok := c.NextTick()
		if !ok || at != want {
			t.Fatalf("next tick %v (%v), want %v", at, ok, want)
		}
		c.Tick(want - time.Millisecond)
		if c.HasReady() {
			t.Fatalf("a tick before %v did something: %+v", want, c.Ready())
		}
		c.Tick(want)
	}
	due(time.Second) // the first periodic checkpoint
	if rd := c.Ready(); len(rd.Triggers) != 1 {
		t.Fatalf("no trigger at the interval: %+v", rd)
	}
	due(6 * time.Second) // with one in flight and a pause to keep, its expiry
	if rd := c.Ready(); len(rd.Aborted) != 1 {
		t.Fatalf("no expiry: %+v", rd)
	}
	due(6*time.Second + 300*time.Millisecond) // the pause after it ended
	if rd := c.Ready(); len(rd.Triggers) != 1 {
		t.Fatalf("no trigger after the pause: %+v", rd)
	}
	c.TaskFinished(tasks[0])
	c.Ready()
	if at, ok := c.NextTick(); ok {
		t.Fatalf("after a subtask finished a tick is due at %v", at)
	}
}

// TestCompletedIsTheManifestFinalized: what the caller set on the
// manifest it finalized (SameAs, say) is on the completed checkpoint,
// whose duration runs to its completion.
func TestCompletedIsTheManifestFinalized(t *testing.T) {
	task := TaskID{Operator: "src"}
	cfg := DefaultConfig()
	cfg.Interval, cfg.MinPause = time.Second, 0
	c, err := NewCoordinator(cfg, []TaskID{task}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var previous uint64
	for n := range 2 {
		at := time.Duration(n+1) * time.Second
		c.Tick(at)
		tr := c.Ready().Triggers
		if len(tr) != 1 {
			t.Fatalf("no trigger at %v: %+v", at, tr)
		}
		id := tr[0].Barrier.ID
		c.Tick(at + 100*time.Millisecond)
		c.Acknowledge(Ack{Task: task, ID: id})
		final := c.Ready().Finalize
		if final == nil || final.ID != id {
			t.Fatalf("checkpoint %d acknowledged by its only subtask is not finalized: %+v", id, final)
		}
		final.SameAs = previous
		c.Tick(at + 300*time.Millisecond)
		c.Finalized(id, nil)
		done := c.Ready().Completed
		if len(done) != 1 || done[0].ID != id || done[0].SameAs != previous || done[0].Duration != 300*time.Millisecond {
			t.Fatalf("completed %+v, want checkpoint %d the same as %d, 300ms long", done, id, previous)
		}
		previous = id
	}
}
