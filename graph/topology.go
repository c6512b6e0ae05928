package graph

import (
	"errors"
	"fmt"
	"time"
)

// Partitioning says how an edge spreads records over the downstream subtasks.
type Partitioning uint8

const (
	// ForwardPartitioning sends subtask i's records to downstream subtask i;
	// both sides must have the same parallelism.
	ForwardPartitioning Partitioning = iota
	// RebalancePartitioning sends records round-robin.
	RebalancePartitioning
	// BroadcastPartitioning sends every record to every downstream subtask.
	BroadcastPartitioning
	// HashPartitioning sends a record to the subtask owning its key's group.
	HashPartitioning
)

func (p Partitioning) String() string {
	switch p {
	case ForwardPartitioning:
		return "forward"
	case RebalancePartitioning:
		return "rebalance"
	case BroadcastPartitioning:
		return "broadcast"
	case HashPartitioning:
		return "hash"
	}
	return "unknown"
}

// Partitioner is an edge's partitioning and, for hash edges, its key selector.
type Partitioner struct {
	Kind Partitioning
	// Key extracts the key of a record on a hash edge; the edge stores it in
	// Record.Key. Nil means the record's Key is already set.
	Key func(*Record) string
}

// Forward returns a one-to-one partitioner.
func Forward() Partitioner { return Partitioner{Kind: ForwardPartitioning} }

// Rebalance returns a round-robin partitioner.
func Rebalance() Partitioner { return Partitioner{Kind: RebalancePartitioning} }

// Broadcast returns a partitioner that copies each record to every subtask.
func Broadcast() Partitioner { return Partitioner{Kind: BroadcastPartitioning} }

// Hash returns a key-by partitioner; key may be nil to use Record.Key as set.
func Hash(key func(*Record) string) Partitioner {
	return Partitioner{Kind: HashPartitioning, Key: key}
}

// Node is one operator or source of a Topology, run as Parallelism subtasks.
type Node struct {
	ID             string
	Parallelism    int
	MaxParallelism int
	// NewSource creates source subtask i; set for sources only.
	NewSource func(subtask int) Source
	// NewOperator creates operator subtask i; set for operators only.
	NewOperator func(subtask int) Operator
	// Inputs are the node's logical inputs, in order: a record that arrives
	// over Inputs[k] is processed as input k.
	Inputs []Edge
	// OutOfOrderness, for a source with Watermarks set, is how late a record
	// may arrive behind the newest event time seen.
	OutOfOrderness time.Duration
	// Watermarks makes a source emit watermarks from its records' Time.
	Watermarks bool
	// Idleness, for a source with Watermarks set, is what it does after
	// a while without input; the zero Idleness waits for input.
	Idleness Idleness
}

// Idleness says when a source subtask without input is idle, and how far
// its event time then follows the wall clock (Flink's withIdleness).
//
// After Timeout without a record, the subtask is idle: it tells the
// operators it feeds, which then take their event time from their other
// inputs, unless all of theirs are idle too; and its own watermark
// follows the wall clock less OutOfOrderness and Lag, but no further than
// Horizon past the newest event time it read, which is far enough to close the
// windows that hold its records. So the last windows of a quiet source
// close, and an idle pipeline's state stops changing. A record ends the
// idleness; one behind the watermark by then is late, as any. While the
// wall clock reads before ClockFloor (runtime.Options) it is not
// followed.
type Idleness struct {
	Timeout time.Duration // 0: never idle
	Horizon time.Duration
	// Lag is how long a reading may take to reach the source once the
	// device sent it (an ingest log's group commit): a reading on its way
	// while the source turns idle is not late for that.
	Lag time.Duration
}

// IsSource reports whether n is a source.
func (n *Node) IsSource() bool { return n.NewSource != nil }

// Edge is a logical input of a Node.
type Edge struct {
	From        *Node
	Partitioner Partitioner
}

// Topology is a validated graph, nodes in topological order.
type Topology struct {
	Nodes []*Node
}

// Node returns the node with id, or nil.
func (t *Topology) Node(id string) *Node {
	for _, n := range t.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Consumers returns the nodes that read n, with the input index n has there.
func (t *Topology) Consumers(n *Node) []Consumer {
	var out []Consumer
	for _, m := range t.Nodes {
		for k, e := range m.Inputs {
			if e.From == n {
				out = append(out, Consumer{Node: m, Input: k})
			}
		}
	}
	return out
}

// Consumer is a downstream node and the input index an edge feeds.
type Consumer struct {
	Node  *Node
	Input int
}

// Stream is a node's output, to be used as another node's input.
type Stream struct{ node *Node }

// Input is a Stream read through a Partitioner.
type Input struct {
	Stream      Stream
	Partitioner Partitioner
}

// In reads s through p.
func In(s Stream, p Partitioner) Input { return Input{Stream: s, Partitioner: p} }

// Option adjusts a node as it is added.
type Option func(*Node)

// WithMaxParallelism sets the node's number of key groups.
func WithMaxParallelism(n int) Option { return func(nd *Node) { nd.MaxParallelism = n } }

// WithWatermarks makes a source emit watermarks that trail the newest event
// time it has read by outOfOrderness.
func WithWatermarks(outOfOrderness time.Duration) Option {
	return func(nd *Node) { nd.Watermarks, nd.OutOfOrderness = true, outOfOrderness }
}

// WithIdleness makes a source idle after a while without input (Idleness).
func WithIdleness(idle Idleness) Option { return func(nd *Node) { nd.Idleness = idle } }

// Builder assembles a Topology. Mistakes are collected and reported together
// by Build.
type Builder struct {
	nodes []*Node
}

// Source adds a source node.
func (b *Builder) Source(id string, parallelism int, newSource func(subtask int) Source, opts ...Option) Stream {
	return b.add(&Node{ID: id, Parallelism: parallelism, NewSource: newSource}, opts)
}

// Operator adds an operator node that reads inputs.
func (b *Builder) Operator(id string, parallelism int, newOperator func(subtask int) Operator, inputs []Input, opts ...Option) Stream {
	n := &Node{ID: id, Parallelism: parallelism, NewOperator: newOperator}
	for _, in := range inputs {
		n.Inputs = append(n.Inputs, Edge{From: in.Stream.node, Partitioner: in.Partitioner})
	}
	return b.add(n, opts)
}

func (b *Builder) add(n *Node, opts []Option) Stream {
	n.MaxParallelism = DefaultMaxParallelism
	for _, o := range opts {
		o(n)
	}
	b.nodes = append(b.nodes, n)
	return Stream{node: n}
}

// Build validates the graph and returns it. Every problem found is reported,
// each naming its node.
func (b *Builder) Build() (*Topology, error) {
	var errs []error
	seen := make(map[string]bool)
	for _, n := range b.nodes {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("node %q: %s", n.ID, fmt.Sprintf(format, args...)))
		}
		if err := ValidateID(n.ID); err != nil {
			bad("%v", err)
		}
		if seen[n.ID] {
			bad("id used twice")
		}
		seen[n.ID] = true
		if n.MaxParallelism < 1 || n.MaxParallelism > 1<<15 {
			bad("max parallelism %d is outside 1..32768", n.MaxParallelism)
		}
		if n.Parallelism < 1 || n.Parallelism > n.MaxParallelism {
			bad("parallelism %d is outside 1..%d (max parallelism)", n.Parallelism, n.MaxParallelism)
		}
		if n.IsSource() {
			if n.NewOperator != nil || len(n.Inputs) > 0 {
				bad("a source has no inputs")
			}
			continue
		}
		if n.Watermarks {
			bad("only sources generate watermarks")
		}
		if n.NewOperator == nil {
			bad("no operator")
		}
		if len(n.Inputs) == 0 {
			bad("an operator needs at least one input")
		}
		for k, e := range n.Inputs {
			switch {
			case e.From == nil || !b.has(e.From):
				bad("input %d is not a node of this builder", k)
			case !seen[e.From.ID]:
				bad("input %d (%q) must be added before the node that reads it", k, e.From.ID)
			case e.Partitioner.Kind == ForwardPartitioning && e.From.Parallelism != n.Parallelism:
				bad("input %d: a forward edge needs equal parallelism, but %q has %d and %q has %d",
					k, e.From.ID, e.From.Parallelism, n.ID, n.Parallelism)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Topology{Nodes: b.nodes}, nil
}

func (b *Builder) has(n *Node) bool {
	for _, m := range b.nodes {
		if m == n {
			return true
		}
	}
	return false
}

// ValidateID checks that id can name a node: 1 to 64 characters of letters,
// digits, '_', '-' and '.'. Ids key state in checkpoints and savepoints.
func ValidateID(id string) error {
	if id == "" || len(id) > 64 {
		return fmt.Errorf("id %q must be 1 to 64 characters", id)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("id %q may hold only letters, digits, '_', '-' and '.'", id)
		}
	}
	return nil
}
