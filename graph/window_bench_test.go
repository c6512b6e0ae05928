package graph

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkWindowState runs the footprint scenario's operator in process:
// a per-key average over 1-minute tumbling windows, fed 150,000 records
// over 100,000 keys with a snapshot every 10,000 records, as a checkpoint
// every second at 10,000 records a second takes. It reports the heap the
// operator holds after the last record (keyed state and timers), the size
// of a whole snapshot, and the time per record.
func BenchmarkWindowState(b *testing.B) {
	const keys, records = 100_000, 150_000
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("device-%06d", i)
	}
	var held uint64
	var snapshot int
	for b.Loop() {
		s := NewTaskState(TaskInfo{Operator: "avg", Parallelism: 1}, &recorder{})
		op := Window(WindowSpec{Kind: Tumbling, Size: time.Minute, Aggregate: AggAvg})(0)
		if err := op.Open(s.Context()); err != nil {
			b.Fatal(err)
		}
		before := heapInUse()
		var base Version
		for i := range records {
			k := names[i%keys]
			s.SetKey(k)
			r := Record{Key: k, Time: 1_764_460_800_000 + int64(i)*59_000/records, Value: float64(i % 97)}
			if err := op.ProcessRecord(0, &r); err != nil {
				b.Fatal(err)
			}
			if i%10_000 == 9_999 {
				base = s.Freeze(nil, base, true).Version()
			}
		}
		held = max(held, heapInUse()-min(before, heapInUse()))
		snapshot = len(s.Freeze(nil, 0, false).Encode())
	}
	b.ReportMetric(float64(held)/keys, "heap-B/key")
	b.ReportMetric(float64(snapshot)/keys, "snapshot-B/key")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*records), "ns/record")
}

// BenchmarkWindowFewKeys runs the operator of cairn-bench wear's busy
// load in process: a per-key count over 1-second tumbling windows kept
// 30 s for late records, of 100 keys at 5,000 records a second of event
// time, the watermark following 5 s behind. Every record reads, changes
// and stores a key's windows, so it shows what keyed state costs a record
// (time and garbage).
func BenchmarkWindowFewKeys(b *testing.B) {
	const keys, rate = 100, 5000
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("device-%03d", i)
	}
	s := NewTaskState(TaskInfo{Operator: "count", Parallelism: 1}, &recorder{})
	op := Window(WindowSpec{Kind: Tumbling, Size: time.Second, AllowedLateness: 30 * time.Second, Aggregate: AggCount})(0)
	if err := op.Open(s.Context()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := names[i%keys]
		s.SetKey(k)
		r := Record{Key: k, Time: 1_764_460_800_000 + int64(i)*1000/rate, Value: 1}
		if err := op.ProcessRecord(0, &r); err != nil {
			b.Fatal(err)
		}
		if i++; i%rate == 0 {
			if _, err := s.AdvanceWatermark(r.Time-5000, op); err != nil {
				b.Fatal(err)
			}
		}
	}
}
