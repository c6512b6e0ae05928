package graph

import (
	"fmt"
	"math"
	"runtime"
	"testing"
)

// BenchmarkTimers registers a timer for each of 100,000 keys and fires
// them all, as a window operator does: at one time (tumbling windows, whose
// ends all keys share) and at as many times as keys (a dedupe's, a session
// window's). It reports the heap the timers held before they fired.
func BenchmarkTimers(b *testing.B) {
	const keys = 100_000
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("device-%06d", i)
	}
	for _, bc := range []struct {
		name string
		time func(i int) int64
	}{
		{"one-time", func(int) int64 { return 60_000 }},
		{"a-time-each", func(i int) int64 { return int64(i) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			op := &countingTimerOp{}
			var held uint64
			for b.Loop() {
				s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1}, &recorder{})
				before := heapInUse()
				for i, k := range names {
					s.SetKey(k)
					s.Context().RegisterEventTimer(bc.time(i))
					s.Context().RegisterEventTimer(bc.time(i)) // again, as every record of a window does
				}
				held = max(held, heapInUse()-min(before, heapInUse()))
				if _, err := s.AdvanceWatermark(math.MaxInt64, op); err != nil {
					b.Fatal(err)
				}
			}
			if op.fired != keys*b.N {
				b.Fatalf("%d timers fired, want %d", op.fired, keys*b.N)
			}
			b.ReportMetric(float64(held)/keys, "heap-B/timer")
		})
	}
}

// heapInUse is the bytes of heap objects after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

type countingTimerOp struct {
	BaseOperator
	fired int
}

func (o *countingTimerOp) ProcessRecord(int, *Record) error { return nil }
func (o *countingTimerOp) OnTimer(int64) error              { o.fired++; return nil }
