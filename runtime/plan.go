package runtime

import (
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
)

// plan is a topology turned into wired subtasks.
type plan struct {
	tasks []*task
	// inputs[i] lists, per input channel of tasks[i], the upstream task.
	inputs [][]*task
}

// linkFactory makes the link from task from to input channel ch of
// p.tasks[to].
type linkFactory func(from *task, to, ch int) link

// taskConfig is what every subtask of a job shares.
type taskConfig struct {
	mode        checkpoint.Mode
	batchSize   int
	incremental bool // take incremental snapshots
	maxChain    int  // fold a chain into a whole snapshot at this length
	// clockFloor is Options.ClockFloor, Unix milliseconds.
	clockFloor int64
	// alignmentTimeout switches exactly-once alignments to unaligned.
	alignmentTimeout time.Duration
	onRejected       func(checkpoint.TaskID, *graph.Record, error) error // Options.OnRejected
	// onAligned is Options.OnAligned; backlog, which it needs, counts the
	// records waiting on input channel ch of t.
	onAligned func(Aligned)
	backlog   func(t *task, ch int) int64
}

// build creates the subtasks of topo, in topological order, and lists their
// input channels; connect then makes the links.
func build(topo *graph.Topology, cfg taskConfig, e env) *plan {
	p := &plan{}
	byNode := make(map[*graph.Node][]*task)
	for _, n := range topo.Nodes {
		for i := 0; i < n.Parallelism; i++ {
			t := &task{
				id:        checkpoint.TaskID{Operator: n.ID, Subtask: i},
				index:     len(p.tasks),
				node:      n,
				env:       e,
				batchSize: cfg.batchSize,
				rejected:  cfg.onRejected,
				onAligned: cfg.onAligned,
				backlog:   cfg.backlog,
				sourceWM:  graph.MinWatermark,
				metrics:   newTaskMetrics(),
				chains:    chains{incremental: cfg.incremental, maxLen: cfg.maxChain},
			}
			var ins []*task
			for k, edge := range n.Inputs {
				for _, up := range byNode[edge.From] {
					if edge.Partitioner.Kind == graph.ForwardPartitioning && up.id.Subtask != i {
						continue
					}
					ins = append(ins, up)
					t.inputOf = append(t.inputOf, k)
					t.upstream = append(t.upstream, up.id)
				}
			}
			ordered := cfg.mode != checkpoint.AtLeastOnce && (n.IsSource() || len(ins) == 1 && ins[0].state.Context().Info().OrderedInput)
			t.state = graph.NewTaskState(graph.TaskInfo{
				Operator: n.ID, Subtask: i, Parallelism: n.Parallelism, MaxParallelism: n.MaxParallelism, OrderedInput: ordered,
			}, t)
			t.wm, t.idle = make([]int64, len(ins)), make([]bool, len(ins))
			t.clockFloor = cfg.clockFloor
			for c := range t.wm {
				t.wm[c] = graph.MinWatermark
			}
			t.open = len(ins)
			t.received, t.processed = make([]position, len(ins)), make([]position, len(ins))
			t.marks, t.marked = make([]position, len(ins)), make([]bool, len(ins))
			t.inbox = newInbox(len(ins))
			t.handler = checkpoint.NewHandler(cfg.mode, len(ins))
			t.handler.SetAlignmentTimeout(cfg.alignmentTimeout)
			byNode[n] = append(byNode[n], t)
			p.tasks = append(p.tasks, t)
			p.inputs = append(p.inputs, ins)
		}
	}
	return p
}

// connect makes a link for every input channel and the upstream outputs that
// feed them.
func (p *plan) connect(newLink linkFactory) {
	for i, t := range p.tasks {
		for ch, up := range p.inputs[i] {
			edge := t.node.Inputs[t.inputOf[ch]]
			o := up.outputFor(t.node, edge, t.inputOf[ch])
			c := &outChannel{link: newLink(up, i, ch)}
			t.inbox.links[ch] = c.link
			if edge.Partitioner.Kind == graph.ForwardPartitioning {
				o.channels = []*outChannel{c}
			} else {
				o.channels[t.id.Subtask] = c
			}
		}
	}
}

// outputFor returns t's output towards input k of node n, creating it.
func (t *task) outputFor(n *graph.Node, edge graph.Edge, k int) *output {
	for _, o := range t.outputs {
		if o.consumer == n && o.input == k {
			return o
		}
	}
	o := &output{part: edge.Partitioner, maxPar: n.MaxParallelism, consumer: n, input: k,
		channels: make([]*outChannel, n.Parallelism)}
	t.outputs = append(t.outputs, o)
	return o
}
