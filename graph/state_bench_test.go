package graph

import (
	"fmt"
	"testing"
)

// BenchmarkValueState is a keyed count's state access, one Get and one
// Set per record, over 10,000 keys (the pipeline scenario's). Each record's
// key is a string of its own, as a decoded message's is, so that no lookup
// finds its key by the pointer.
func BenchmarkValueState(b *testing.B) {
	s := NewTaskState(TaskInfo{Operator: "count", Parallelism: 1}, &recorder{})
	v, err := NewValueState(s.Context(), "count", Int64Codec{})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 100_000)
	for i := range keys {
		keys[i] = fmt.Sprint("key-", i%10_000)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.SetKey(keys[i%len(keys)])
		n, _ := v.Get()
		v.Set(n + 1)
		i++
	}
}
