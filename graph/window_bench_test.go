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
	benchmarkWindowState(b, WindowSpec{Kind: Tumbling, Size: time.Minute, Aggregate: AggAvg})
}

func benchmarkWindowState(b *testing.B, spec WindowSpec) {
	const keys, records = 100_000, 150_000
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("device-%06d", i)
	}
	var held uint64
	var snapshot int
	for b.Loop() {
		s := NewTaskState(TaskInfo{Operator: "avg", Parallelism: 1}, &recorder{})
		op := Window(spec)(0)
		if err := op.Open(s.Context()); err != nil {
			b.Fatal(err)
		}
		before := heapInUse()
		var base Version
		for i := range records {
			k := names[i%keys]
			s.SetKey(k)
			r := Record{Key: k, Time: 1_764_460_800_000 + int64(i)*59_000/records, Value: float64(i % 97), Payload: readings[i%len(readings)]}
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
// (time and garbage); and the size of a whole snapshot at the end.
func BenchmarkWindowFewKeys(b *testing.B) {
	benchmarkWindowFewKeys(b, WindowSpec{Kind: Tumbling, Size: time.Second, AllowedLateness: 30 * time.Second, Aggregate: AggCount})
}

func benchmarkWindowFewKeys(b *testing.B, spec WindowSpec) {
	const keys, rate = 100, 5000
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("device-%03d", i)
	}
	s := NewTaskState(TaskInfo{Operator: "count", Parallelism: 1}, &recorder{})
	op := Window(spec)(0)
	if err := op.Open(s.Context()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := names[i%keys]
		s.SetKey(k)
		r := Record{Key: k, Time: 1_764_460_800_000 + int64(i)*1000/rate, Value: 1, Payload: readings[i%len(readings)]}
		if err := op.ProcessRecord(0, &r); err != nil {
			b.Fatal(err)
		}
		if i++; i%rate == 0 {
			if _, err := s.AdvanceWatermark(r.Time-5000, op); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(s.Freeze(nil, 0, false).Encode()))/keys, "snapshot-B/key")
}

// BenchmarkWindowRows sets the window of the four figures (avg, max, p95
// and count, of three arguments), and a distinct count (of the humidity's
// 31 values) with a count, beside the average of one value, in the
// scenarios of BenchmarkWindowState (100,000 keys: heap and snapshot
// bytes a key, time a record) and BenchmarkWindowFewKeys (100 keys of
// 50 records a window: time and garbage a record). Its arguments are
// read from the record's payload by a Go function, which costs next to
// nothing: an expression's cost is graph/exprop's.
func BenchmarkWindowRows(b *testing.B) {
	for _, c := range []struct {
		name string
		aggs []NamedAggregate
	}{{"avg", nil}, {"four-figures", fourFigures}, {"distinct", []NamedAggregate{{Name: "d", Func: AggDistinct}, {Name: "n", Func: AggCount}}}} {
		spec := WindowSpec{Kind: Tumbling, Aggregate: AggAvg, Aggregates: c.aggs, NArgs: 3, NHashes: 1,
			Args: func(r *Record, args []float64, hashes []uint64) error {
				copy(args, r.Payload.([]float64))
				hashes[0] = testHash(uint64(args[1]))
				return nil
			}}
		if c.aggs == nil {
			spec.NArgs, spec.NHashes, spec.Args = 0, 0, nil
		}
		b.Run("keys=100k/"+c.name, func(b *testing.B) {
			spec.Size = time.Minute
			benchmarkWindowState(b, spec)
		})
		b.Run("keys=100/"+c.name, func(b *testing.B) {
			spec.Size, spec.AllowedLateness = time.Second, 30*time.Second
			benchmarkWindowFewKeys(b, spec)
		})
	}
}

// readings are the payloads of the benchmarks' records, each a
// []float64 of a temperature, a humidity and a vibration, as a window of
// many aggregates reads them (made payloads once, not at every record).
var readings = func() []any {
	out := make([]any, 97)
	for i := range out {
		out[i] = []float64{18 + float64(i%13)/4, float64(40 + i%31), float64(1+i%89) / 100}
	}
	return out
}()
