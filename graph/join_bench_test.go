package graph

import (
	"fmt"
	"testing"
	"time"
)

// joinReading is the payload of a benchmark's reading, as a source decodes
// one: four fields.
func joinReading(device string, i int) map[string]any {
	return map[string]any{"device": device, "temperature": 18 + float64(i%13)/4, "humidity": float64(40 + i%31), "ts": 1.7648e12}
}

// BenchmarkIntervalJoin runs an interval join of [-1s, 1s] over 100 keys,
// each with a reading of four fields a second on each input, the
// watermark following 1 s behind: each record joins about two of the
// other input. It reports the time, bytes and allocations a record costs
// (its joined records made and emitted), the records joined a record, and
// the size of a whole snapshot a key: the records kept.
func BenchmarkIntervalJoin(b *testing.B) {
	const keys = 100
	names := make([]string, keys)
	payloads := make([]map[string]any, keys)
	for i := range names {
		names[i] = fmt.Sprintf("device-%03d", i)
		payloads[i] = joinReading(names[i], i)
	}
	out := &countingOutput{}
	s := NewTaskState(TaskInfo{Operator: "join", Parallelism: 1}, out)
	op := IntervalJoin(IntervalJoinSpec{Lower: -time.Second, Upper: time.Second, Prefixes: [2]string{"supply_", "return_"}})(0)
	if err := op.Open(s.Context()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		key, second := i%keys, i/keys/2
		s.SetKey(names[key])
		r := Record{Key: names[key], Time: 1_764_460_800_000 + int64(second)*1000 + int64(key), Value: 1, Payload: payloads[key]}
		if err := op.ProcessRecord(i/keys%2, &r); err != nil {
			b.Fatal(err)
		}
		if i++; i%(2*keys) == 0 {
			if _, err := s.AdvanceWatermark(r.Time-1000, op); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(out.n)/float64(i), "joined/record")
	b.ReportMetric(float64(len(s.Freeze(nil, 0, false).Encode()))/keys, "snapshot-B/key")
}

// BenchmarkLookupJoin runs a lookup join over 100 keys, each with a table
// record of two fields (a set point and a mode), of readings of four
// fields. It reports the time, bytes and allocations a reading costs
// (the table record decoded, its record made and emitted), and the size
// of a whole snapshot a key: the table record kept.
func BenchmarkLookupJoin(b *testing.B) {
	const keys = 100
	names := make([]string, keys)
	payloads := make([]map[string]any, keys)
	out := &countingOutput{}
	s := NewTaskState(TaskInfo{Operator: "lookup", Parallelism: 1}, out)
	op := LookupJoin("setpoints_", nil)(0)
	if err := op.Open(s.Context()); err != nil {
		b.Fatal(err)
	}
	for i := range names {
		names[i] = fmt.Sprintf("device-%03d", i)
		payloads[i] = joinReading(names[i], i)
		s.SetKey(names[i])
		table := Record{Key: names[i], Time: 1_764_460_800_000, Value: 22.5, Payload: map[string]any{"setpoint": 22.5, "mode": "auto"}}
		if err := op.ProcessRecord(1, &table); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		key := i % keys
		s.SetKey(names[key])
		r := Record{Key: names[key], Time: 1_764_460_800_000 + int64(i), Value: 1, Payload: payloads[key]}
		if err := op.ProcessRecord(0, &r); err != nil {
			b.Fatal(err)
		}
		i++
	}
	if out.n != i {
		b.Fatalf("%d records joined of %d", out.n, i)
	}
	b.ReportMetric(float64(len(s.Freeze(nil, 0, false).Encode()))/keys, "snapshot-B/key")
}

// countingOutput counts the records emitted, and keeps none.
type countingOutput struct{ n int }

func (c *countingOutput) Emit(*Record) { c.n++ }
