package runtime

import (
	"testing"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
)

// TestOrderedInput: a subtask's input is ordered (graph.TaskInfo) when it
// and every subtask upstream have one input channel, and the job is not
// at-least-once.
func TestOrderedInput(t *testing.T) {
	var b graph.Builder
	one := b.Source("one", 1, graph.SliceSource(nil))
	two := b.Source("two", 2, graph.SliceSource(nil))
	keyed := b.Operator("keyed", 2, graph.Count(), []graph.Input{graph.In(one, graph.Hash(nil))})       // one channel each: from one
	chained := b.Operator("chained", 2, graph.Count(), []graph.Input{graph.In(keyed, graph.Forward())}) // one channel each
	b.Operator("merged", 1, graph.Count(), []graph.Input{graph.In(chained, graph.Rebalance())})
	b.Operator("shuffled", 2, graph.Count(), []graph.Input{graph.In(two, graph.Hash(nil))})
	b.Operator("union", 1, graph.Count(), []graph.Input{graph.In(one, graph.Forward()), graph.In(one, graph.Rebalance())})
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"one": true, "two": true, "keyed": true, "chained": true, "merged": false, "shuffled": false, "union": false}
	for _, mode := range []checkpoint.Mode{checkpoint.ExactlyOnce, checkpoint.AtLeastOnce} {
		p := build(topo, taskConfig{mode: mode, batchSize: 1}, &simulator{})
		for _, task := range p.tasks {
			w := want[task.id.Operator] && mode == checkpoint.ExactlyOnce
			if got := task.state.Context().Info().OrderedInput; got != w {
				t.Errorf("%v, %s: ordered input %v, want %v", mode, task.id, got, w)
			}
		}
	}
}
