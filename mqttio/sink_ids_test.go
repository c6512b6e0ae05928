package mqttio

import (
	"fmt"
	"slices"
	"testing"

	"github.com/cairn-edge/cairn/graph"
)

// stagedIDs are the output ids of the batches in a sink's state.
func stagedIDs(t *testing.T, s graph.Operator, id uint64) []string {
	t.Helper()
	data, err := s.SnapshotState(id)
	if err != nil {
		t.Fatal(err)
	}
	_, batches, err := decodeBatches(data, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range batches {
		c := b.cursor()
		for {
			seq, _, body, ok, err := c.message()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			out = append(out, string(outputID(nil, "out", b, seq, body)))
		}
	}
	return out
}

// TestSinkIDsSurviveAFallback: a sink whose input is ordered stages the
// same records under the same ids after a restore from an older
// checkpoint (a fallback past a damaged newer one), wherever the barriers
// fall, and other records under other ids; one whose input is not ordered
// begins a new numbering, so that no id of the first run is given to other
// output, and counts it.
func TestSinkIDsSurviveAFallback(t *testing.T) {
	open := func(ordered bool, metrics *SinkMetrics) graph.Operator {
		s := NewSink(SinkConfig{Client: ClientConfig{Broker: "tcp://127.0.0.1:1", ClientID: "ids"}, Topic: "out/{key}", Metrics: metrics})(0)
		ctx := graph.NewTaskState(graph.TaskInfo{Operator: "out", Parallelism: 1, OrderedInput: ordered}, new(rejects)).Context()
		if err := s.Open(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	stage := func(s graph.Operator, from, to int) {
		for i := from; i < to; i++ {
			if err := s.ProcessRecord(0, &graph.Record{Key: fmt.Sprint("k", i%3), Value: float64(i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, ordered := range []bool{true, false} {
		metrics := new(SinkMetrics)
		first := open(ordered, metrics)
		stage(first, 0, 5)
		restoreFrom, err := first.SnapshotState(2) // checkpoint 2: five staged
		if err != nil {
			t.Fatal(err)
		}
		stage(first, 5, 8)
		stage(first, 8, 10) // checkpoint 3's barrier came after 10
		published := stagedIDs(t, first, 3)[5:]

		// Checkpoint 3 is damaged: the job restores 2 and replays, its
		// barrier now after 7.
		second := open(ordered, metrics)
		if err := second.RestoreState(restoreFrom); err != nil {
			t.Fatal(err)
		}
		stage(second, 5, 7)
		stage(second, 7, 10)
		replayed := stagedIDs(t, second, 4)[5:]
		if ordered && !slices.Equal(replayed, published) {
			t.Fatalf("ordered input: replayed %v, published the first time as %v", replayed, published)
		}
		if ordered {
			// A replay that computes other output (a record late in one
			// run only): other ids at the same positions.
			third := open(ordered, new(SinkMetrics))
			if err := third.RestoreState(restoreFrom); err != nil {
				t.Fatal(err)
			}
			if err := third.ProcessRecord(0, &graph.Record{Key: "k2", Value: -1}); err != nil {
				t.Fatal(err)
			}
			stage(third, 5, 10)
			diverged := stagedIDs(t, third, 4)[5:]
			if slices.ContainsFunc(diverged, func(id string) bool { return slices.Contains(published, id) }) {
				t.Fatalf("a diverging replay %v reuses ids of %v", diverged, published)
			}
		}
		if !ordered && slices.ContainsFunc(replayed, func(id string) bool { return slices.Contains(published, id) }) {
			t.Fatalf("unordered input: replayed %v share an id with %v, published for maybe other output", replayed, published)
		}
		if want := map[bool]int64{true: 0, false: 1}[ordered]; metrics.Renumbered.Load() != want || metrics.Unordered.Load() != 2*want {
			t.Fatalf("ordered %v: renumbered %d, unordered %d", ordered, metrics.Renumbered.Load(), metrics.Unordered.Load())
		}
	}
}
