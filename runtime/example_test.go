package runtime_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/runtime"
)

// maxPerKey is a custom keyed operator: it keeps the largest value seen per
// key in checkpointed keyed state and emits it when it grows.
type maxPerKey struct {
	graph.BaseOperator
	ctx  *graph.Context
	best *graph.ValueState[float64]
}

func (m *maxPerKey) Open(ctx *graph.Context) (err error) {
	m.ctx = ctx
	m.best, err = graph.NewValueState(ctx, "max", graph.Float64Codec{})
	return err
}

func (m *maxPerKey) ProcessRecord(_ int, r *graph.Record) error {
	if best, ok := m.best.Get(); ok && best >= r.Value {
		return nil
	}
	m.best.Set(r.Value)
	m.ctx.Emit(r)
	return nil
}

// printer collects what reaches it.
type printer struct {
	graph.BaseOperator
	mu    *sync.Mutex
	lines *[]string
}

func (p printer) ProcessRecord(_ int, r *graph.Record) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	*p.lines = append(*p.lines, fmt.Sprintf("%s reached %v", r.Key, r.Value))
	return nil
}

// Build a graph in Go and run it with exactly-once checkpoints: readings are
// keyed by device, a custom operator keeps each device's maximum, and a sink
// receives every new maximum.
func Example() {
	readings := []graph.Record{
		{Key: "pump-1", Value: 3}, {Key: "pump-2", Value: 7}, {Key: "pump-1", Value: 5},
		{Key: "pump-2", Value: 6}, {Key: "pump-1", Value: 4}, {Key: "pump-2", Value: 9},
	}
	var b graph.Builder
	in := b.Source("readings", 1, graph.SliceSource(readings))
	peaks := b.Operator("peaks", 2, func(int) graph.Operator { return &maxPerKey{} },
		[]graph.Input{graph.In(in, graph.Hash(nil))})
	var mu sync.Mutex
	var lines []string
	b.Operator("alerts", 1, func(int) graph.Operator { return printer{mu: &mu, lines: &lines} },
		[]graph.Input{graph.In(peaks, graph.Rebalance())})
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	job, err := runtime.New(topo, runtime.Options{Checkpoints: checkpoint.DefaultConfig()})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := job.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	slices.Sort(lines) // the two keys are processed in parallel
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// pump-1 reached 3
	// pump-1 reached 5
	// pump-2 reached 7
	// pump-2 reached 9
}
