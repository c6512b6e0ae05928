package graph

import (
	"fmt"
	"testing"
)

// BenchmarkFreeze measures the synchronous phase of a snapshot, which
// holds up the subtask's stream, for an operator with a window's worth of
// state: 100,000 keys, each with a value and a timer.
func BenchmarkFreeze(b *testing.B) {
	s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1}, &recorder{})
	v, err := NewValueState(s.Context(), "v", Int64Codec{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 100_000 {
		s.SetKey(fmt.Sprintf("device-%06d", i))
		v.Set(int64(i))
		s.Context().RegisterEventTimer(60_000)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.Freeze(nil, 0, false)
	}
}
