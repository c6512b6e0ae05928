package graph

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// drive feeds records (key@time=value) to a fresh subtask of newOp, with a
// watermark after each, and returns what it emitted as key@time=value.
func drive(t *testing.T, newOp func(int) Operator, in ...string) string {
	t.Helper()
	out := &recorder{}
	s := NewTaskState(TaskInfo{Operator: "x", Parallelism: 1}, out)
	op := newOp(0)
	if err := op.Open(s.Context()); err != nil {
		t.Fatal(err)
	}
	for _, spec := range in {
		var r Record
		if _, err := fmt.Sscanf(strings.NewReplacer("@", " ", "=", " ").Replace(spec), "%s %d %g", &r.Key, &r.Time, &r.Value); err != nil {
			t.Fatalf("bad record %q: %v", spec, err)
		}
		s.SetKey(r.Key)
		if err := op.ProcessRecord(0, &r); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AdvanceWatermark(r.Time, op); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, r := range out.got {
		got = append(got, fmt.Sprintf("%s@%d=%g", r.Key, r.Time, r.Value))
	}
	return strings.Join(got, " ")
}

func TestDedupe(t *testing.T) {
	got := drive(t, Dedupe(10*time.Millisecond), "a@0=1", "a@5=2", "b@6=1", "a@9=3", "a@10=4", "a@15=5", "b@30=1")
	if want := "a@0=1 b@6=1 a@10=4 b@30=1"; got != want {
		t.Fatalf("dedupe: %s, want %s", got, want)
	}
}

func TestThresholdHysteresis(t *testing.T) {
	got := drive(t, Threshold(30, 25), "a@1=29", "a@2=31", "a@3=29", "a@4=31", "a@5=24", "a@6=26", "b@7=40")
	if want := "a@2=1 a@5=0 b@7=1"; got != want {
		t.Fatalf("threshold: %s, want %s", got, want)
	}
}

// TestEmptyKeyIsAKey: a record of a hash-partitioned input whose key is
// empty has state of its own, and timers; a record of another input has
// no key to keep state by, whatever its key, and using keyed state for it
// fails with ErrNoKey.
func TestEmptyKeyIsAKey(t *testing.T) {
	out := &recorder{}
	s := NewTaskState(TaskInfo{Operator: "x", Parallelism: 1}, out)
	op := Window(WindowSpec{Kind: Tumbling, Size: 10 * time.Millisecond, Aggregate: AggCount})(0)
	if err := op.Open(s.Context()); err != nil {
		t.Fatal(err)
	}
	for _, r := range []Record{{Key: "", Time: 1}, {Key: "a", Time: 2}, {Key: "", Time: 3}} {
		s.SetKey(r.Key)
		if err := op.ProcessRecord(0, &r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.AdvanceWatermark(10, op); err != nil || s.Err() != nil {
		t.Fatalf("watermark: %v, %v", err, s.Err())
	}
	var got []string
	for _, r := range out.got {
		got = append(got, fmt.Sprintf("%q=%g", r.Key, r.Value))
	}
	if want := `""=2 "a"=1`; strings.Join(got, " ") != want { // timers fire in (time, key) order
		t.Fatalf("windows of keys \"\" and a: %v, want %s", got, want)
	}

	s.SetUnkeyed("a")
	if err := op.ProcessRecord(0, &Record{Key: "a", Time: 11}); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(s.Err(), ErrNoKey) {
		t.Fatalf("keyed state for a record of an input that is not hash-partitioned: %v, want ErrNoKey", s.Err())
	}
}
