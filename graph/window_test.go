package graph

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// windowHarness drives a window operator on one subtask.
type windowHarness struct {
	t     *testing.T
	state *TaskState
	op    Operator
	out   *recorder
	late  []int64
}

func newWindowHarness(t *testing.T, spec WindowSpec) *windowHarness {
	h := &windowHarness{t: t, out: &recorder{}}
	spec.OnLate = func(r *Record) { h.late = append(h.late, r.Time) }
	h.state = NewTaskState(TaskInfo{Operator: "w", Parallelism: 1}, h.out)
	h.op = Window(spec)(0)
	if err := h.op.Open(h.state.Context()); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *windowHarness) record(key string, t int64, v float64) {
	h.state.SetKey(key)
	if err := h.op.ProcessRecord(0, &Record{Key: key, Time: t, Value: v}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *windowHarness) watermark(wm int64) {
	if _, err := h.state.AdvanceWatermark(wm, h.op); err != nil {
		h.t.Fatal(err)
	}
}

// emitted returns and forgets the results so far, as key[start,end)=value.
func (h *windowHarness) emitted() string {
	var out []string
	for _, r := range h.out.got {
		w := r.Payload.(WindowResult)
		out = append(out, fmt.Sprintf("%s[%d,%d)=%v", r.Key, w.Start, w.End, r.Value))
	}
	h.out.got = nil
	return strings.Join(out, " ")
}

func TestTumblingWindows(t *testing.T) {
	h := newWindowHarness(t, WindowSpec{Kind: Tumbling, Size: 10 * time.Millisecond, Aggregate: AggCount})
	h.record("a", 1, 1)
	h.record("a", 5, 1)
	h.record("b", 7, 1)
	h.record("a", 12, 1)
	h.watermark(8)
	if got := h.emitted(); got != "" {
		t.Fatalf("fired before the window's end: %s", got)
	}
	h.watermark(9)
	if got := h.emitted(); got != "a[0,10)=2 b[0,10)=1" {
		t.Fatalf("at watermark 9: %s", got)
	}
	h.record("a", 3, 1) // late, no lateness allowed
	h.watermark(30)
	if got := h.emitted(); got != "a[10,20)=1" {
		t.Fatalf("at watermark 30: %s", got)
	}
	if fmt.Sprint(h.late) != "[3]" {
		t.Fatalf("late records %v, want [3]", h.late)
	}
}

func TestSlidingAndSessionWindows(t *testing.T) {
	h := newWindowHarness(t, WindowSpec{Kind: Sliding, Size: 10 * time.Millisecond, Slide: 5 * time.Millisecond, Aggregate: AggSum})
	h.record("a", 7, 2)
	h.record("a", 12, 3)
	h.watermark(100)
	if got := h.emitted(); got != "a[0,10)=2 a[5,15)=5 a[10,20)=3" {
		t.Fatalf("sliding: %s", got)
	}

	h = newWindowHarness(t, WindowSpec{Kind: Session, Size: 5 * time.Millisecond, Aggregate: AggCount})
	h.record("a", 1, 1)
	h.record("a", 9, 1)
	h.record("a", 30, 1)
	h.record("a", 5, 1) // bridges [1,6) and [9,14)
	h.watermark(100)
	if got := h.emitted(); got != "a[1,14)=3 a[30,35)=1" {
		t.Fatalf("sessions: %s", got)
	}
}

func TestAggregates(t *testing.T) {
	for agg, want := range map[Aggregate]string{AggMin: "1", AggMax: "9", AggAvg: "5", AggFirst: "5", AggLast: "9", AggSum: "15"} {
		h := newWindowHarness(t, WindowSpec{Kind: Tumbling, Size: 10 * time.Millisecond, Aggregate: agg})
		h.record("a", 3, 1)
		h.record("a", 2, 5) // earliest event time, not first to arrive
		h.record("a", 8, 9)
		h.watermark(9)
		if got := h.emitted(); got != "a[0,10)="+want {
			t.Errorf("%v: %s, want %s", agg, got, want)
		}
	}
}

func TestAllowedLatenessReemitsThenDiscards(t *testing.T) {
	h := newWindowHarness(t, WindowSpec{Kind: Tumbling, Size: 10 * time.Millisecond, AllowedLateness: 5 * time.Millisecond, Aggregate: AggCount})
	h.record("a", 1, 1)
	h.watermark(9)
	h.record("a", 2, 1) // late but within lateness: updated result at once
	if got := h.emitted(); got != "a[0,10)=1 a[0,10)=2" {
		t.Fatalf("within lateness: %s", got)
	}
	h.watermark(14) // lateness over: the window is discarded
	h.record("a", 3, 1)
	if got := h.emitted(); got != "" || fmt.Sprint(h.late) != "[3]" {
		t.Fatalf("after lateness: emitted %q, late %v", got, h.late)
	}
}

// TestWindowsSurviveRestoreWithoutRefiring snapshots a key whose window has
// fired (kept for lateness) and another whose window is open; after a
// restore the fired one does not fire again and the open one fires once
// with all its records (invariant I10).
func TestWindowsSurviveRestoreWithoutRefiring(t *testing.T) {
	spec := WindowSpec{Kind: Tumbling, Size: 10 * time.Millisecond, AllowedLateness: 20 * time.Millisecond, Aggregate: AggCount}
	h := newWindowHarness(t, spec)
	h.record("a", 1, 1)
	h.record("b", 12, 1)
	h.watermark(9)
	if got := h.emitted(); got != "a[0,10)=1" {
		t.Fatalf("before the snapshot: %s", got)
	}
	data := h.state.Freeze(nil, 0, false).Encode()
	h.record("b", 13, 1) // after the snapshot: lost with the crash, replayed below

	r := newWindowHarness(t, spec)
	snap, err := DecodeSubtaskSnapshot(data, KeyGroupRange{0, DefaultMaxParallelism})
	if err != nil {
		t.Fatal(err)
	}
	r.state = NewTaskState(TaskInfo{Operator: "w", Parallelism: 1}, r.out)
	r.state.Restore([]*SubtaskSnapshot{snap})
	r.op = Window(WindowSpec{Kind: spec.Kind, Size: spec.Size, AllowedLateness: spec.AllowedLateness, Aggregate: spec.Aggregate})(0)
	if err := r.op.Open(r.state.Context()); err != nil {
		t.Fatal(err)
	}
	r.record("b", 13, 1)
	r.watermark(100)
	if got := r.emitted(); got != "b[10,20)=2" {
		t.Fatalf("after restore: %s (a must not fire again)", got)
	}
}

func TestWindowSpecValidation(t *testing.T) {
	for _, bad := range []WindowSpec{{Size: 0}, {Kind: Sliding, Size: 10, Slide: 20}, {Size: 10, AllowedLateness: -1}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if _, err := ParseAggregate("median"); err == nil {
		t.Error("unknown aggregate accepted")
	}
}

func TestWindowJoin(t *testing.T) {
	out := &recorder{}
	s := NewTaskState(TaskInfo{Operator: "j", Parallelism: 1}, out)
	op := WindowJoin(WindowSpec{Kind: Tumbling, Size: 10 * time.Millisecond, Aggregate: AggAvg})(0)
	if err := op.Open(s.Context()); err != nil {
		t.Fatal(err)
	}
	feed := func(input int, key string, ts int64, v float64) {
		s.SetKey(key)
		if err := op.ProcessRecord(input, &Record{Key: key, Time: ts, Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	feed(0, "a", 1, 20)
	feed(0, "a", 2, 22)
	feed(1, "a", 3, 18)
	feed(0, "b", 4, 30) // no right side for b: no output
	feed(1, "a", 15, 5) // next window, left missing: no output
	if _, err := s.AdvanceWatermark(100, op); err != nil {
		t.Fatal(err)
	}
	if len(out.got) != 1 {
		t.Fatalf("emitted %d results, want 1: %v", len(out.got), out.got)
	}
	r := out.got[0]
	j := r.Payload.(JoinResult)
	if r.Key != "a" || j.Left != 21 || j.Right != 18 || r.Value != 3 || j.LeftCount != 2 || j.RightCount != 1 || j.Start != 0 {
		t.Fatalf("join result %+v %+v", r, j)
	}
	if err := WindowJoin(WindowSpec{Kind: Session, Size: 10})(0).Open(NewTaskState(TaskInfo{Operator: "k", Parallelism: 1}, out).Context()); err == nil {
		t.Fatal("a session window join was accepted")
	}
}

// TestProcessingTimeWindows counts records by the wall clock the runtime
// reports, and survives a snapshot with its timers.
func TestProcessingTimeWindows(t *testing.T) {
	out := &recorder{}
	s := NewTaskState(TaskInfo{Operator: "w", Parallelism: 1}, out)
	spec := WindowSpec{Kind: Tumbling, Size: 10 * time.Millisecond, Aggregate: AggCount, ProcessingTime: true}
	op := Window(spec)(0)
	if err := op.Open(s.Context()); err != nil {
		t.Fatal(err)
	}
	feed := func(now int64, key string) {
		s.SetProcessingTime(now)
		s.SetKey(key)
		if err := op.ProcessRecord(0, &Record{Key: key, Time: 999_999}); err != nil { // event time is ignored
			t.Fatal(err)
		}
	}
	feed(1001, "a")
	feed(1005, "a")
	feed(1012, "a")
	if next, ok := s.NextProcessingTimer(); !ok || next != 1009 {
		t.Fatalf("next processing timer %d %v, want 1009", next, ok)
	}
	if err := s.AdvanceProcessingTime(1009, op); err != nil {
		t.Fatal(err)
	}
	if len(out.got) != 1 || out.got[0].Value != 2 {
		t.Fatalf("at 1009: %v", out.got)
	}
	// The open window [1010,1020) and its timer survive a snapshot.
	snap, err := DecodeSubtaskSnapshot(s.Freeze(nil, 0, false).Encode(), KeyGroupRange{0, DefaultMaxParallelism})
	if err != nil {
		t.Fatal(err)
	}
	r := NewTaskState(TaskInfo{Operator: "w", Parallelism: 1}, out)
	r.Restore([]*SubtaskSnapshot{snap})
	op2 := Window(spec)(0)
	if err := op2.Open(r.Context()); err != nil {
		t.Fatal(err)
	}
	if err := r.AdvanceProcessingTime(1020, op2); err != nil {
		t.Fatal(err)
	}
	if len(out.got) != 2 || out.got[1].Value != 1 || out.got[1].Payload.(WindowResult).Start != 1010 {
		t.Fatalf("after restore: %v", out.got)
	}
}

// TestFiredWindowsAreNotReemittedByOtherRecords keeps a fired window for a
// long lateness: records for later windows must not emit it again.
func TestFiredWindowsAreNotReemittedByOtherRecords(t *testing.T) {
	h := newWindowHarness(t, WindowSpec{Kind: Tumbling, Size: 10 * time.Millisecond, AllowedLateness: time.Hour, Aggregate: AggCount})
	h.record("a", 1, 1)
	h.watermark(12)
	h.record("a", 13, 1)
	h.record("a", 14, 1)
	if got := h.emitted(); got != "a[0,10)=1" {
		t.Fatalf("emitted %s; the fired window must not be emitted again", got)
	}
	if (WindowSpec{Kind: Tumbling, Size: 500 * time.Microsecond}).Validate() == nil {
		t.Fatal("a window below 1ms was accepted")
	}
}

// TestNonFiniteTotalsAreRejected: a value that would make a running sum or
// a window's sum infinite is rejected (graph.RecordError), and the key's
// total stays what it was, so its later outputs go on.
func TestNonFiniteTotalsAreRejected(t *testing.T) {
	h := newWindowHarness(t, WindowSpec{Kind: Sliding, Size: 20 * time.Millisecond, Slide: 10 * time.Millisecond, Aggregate: AggSum})
	h.record("a", 11, 1e308)
	h.state.SetKey("a")
	err := h.op.ProcessRecord(0, &Record{Key: "a", Time: 12, Value: 1e308})
	var rejected *RecordError
	if !errors.As(err, &rejected) || !strings.Contains(err.Error(), `key "a": the value 1e+308 makes the sum of the window`) {
		t.Fatalf("a window's sum beyond a float64: %v, want it rejected", err)
	}
	h.record("a", 13, -1e308)
	h.watermark(40)
	if got := h.emitted(); got != "a[0,20)=0 a[10,30)=0" {
		t.Fatalf("windows after the rejected record: %s", got)
	}

	out := &recorder{}
	state := NewTaskState(TaskInfo{Operator: "s", Parallelism: 1}, out)
	sum := Sum()(0)
	if err := sum.Open(state.Context()); err != nil {
		t.Fatal(err)
	}
	state.SetKey("k")
	for i, v := range []float64{1e308, 1e308, -1e308, 5} {
		err := sum.ProcessRecord(0, &Record{Key: "k", Value: v})
		if rejects := i == 1; rejects != errors.As(err, &rejected) {
			t.Fatalf("sum, value %d (%g): %v", i, v, err)
		}
	}
	var got []float64
	for _, r := range out.got {
		got = append(got, r.Value)
	}
	if fmt.Sprint(got) != "[1e+308 0 5]" {
		t.Fatalf("running sums %v, want the rejected value left out", got)
	}
}
