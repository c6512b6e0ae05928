package runtime

import "github.com/cairn-edge/cairn/graph"

// A subtask's outputs: records emitted into partial batches per channel,
// flushed by size or linger, and control elements sent in order with them
// (or, for an unaligned barrier, ahead of them).

// outChannel accumulates records for one link.
type outChannel struct {
	link  link
	batch *graph.Batch
	sent  position // put on the channel, for unaligned barriers' marks
	// reserved: the executor took a credit for the next send in advance,
	// waiting for room before a batch rather than in the middle of one.
	reserved bool
}

// output is one consumer edge of a subtask: a partitioner over the
// consumer's subtasks.
type output struct {
	part     graph.Partitioner
	channels []*outChannel // forward: the one peer; otherwise one per consumer subtask
	maxPar   int
	next     int // rebalance cursor
	consumer *graph.Node
	input    int
}

// recordOverhead estimates a record's bytes besides its key.
const recordOverhead = 48

// Emit implements graph.Output.
func (t *task) Emit(r *graph.Record) {
	if t.err != nil {
		return
	}
	t.metrics.RecordsOut.Add(1)
	for _, o := range t.outputs {
		switch o.part.Kind {
		case graph.ForwardPartitioning:
			t.push(o.channels[0], r)
		case graph.RebalancePartitioning:
			t.push(o.channels[o.next], r)
			o.next = (o.next + 1) % len(o.channels)
		case graph.BroadcastPartitioning:
			for _, c := range o.channels {
				t.push(c, r)
			}
		case graph.HashPartitioning:
			key := r.Key
			if o.part.Key != nil {
				key = o.part.Key(r)
			}
			c := o.channels[graph.SubtaskForKeyGroup(graph.KeyGroup(key, o.maxPar), len(o.channels), o.maxPar)]
			t.append(c, r).Key = key
			t.flushIfFull(c)
		}
	}
}

func (t *task) push(c *outChannel, r *graph.Record) {
	t.append(c, r)
	t.flushIfFull(c)
}

// append copies r into c's batch and returns the copy.
func (t *task) append(c *outChannel, r *graph.Record) *graph.Record {
	if c.batch == nil {
		c.batch = t.env.newBatch()
	}
	c.batch.Records = append(c.batch.Records, *r)
	c.sent.records++
	return &c.batch.Records[len(c.batch.Records)-1]
}

func (t *task) flushIfFull(c *outChannel) {
	if len(c.batch.Records) >= t.batchSize {
		t.flush(c)
	}
}

func (t *task) flush(c *outChannel) {
	if c.batch == nil || t.err != nil {
		return
	}
	b := c.batch
	c.batch = nil
	reserved := c.reserved
	c.reserved = false
	if err := c.link.send(b, reserved); err != nil {
		t.err = err
	}
}

// flushAll sends every partial batch.
func (t *task) flushAll() {
	for _, o := range t.outputs {
		for _, c := range o.channels {
			if c.batch != nil && len(c.batch.Records) > 0 {
				t.flush(c)
			}
		}
	}
}

// hasPartial reports whether some output holds unsent records.
func (t *task) hasPartial() bool {
	for _, o := range t.outputs {
		for _, c := range o.channels {
			if c.batch != nil && len(c.batch.Records) > 0 {
				return true
			}
		}
	}
	return false
}

// broadcast sends ctl on every channel of every output, after the records
// queued before it (invariant I1).
func (t *task) broadcast(ctl graph.Control) {
	for _, o := range t.outputs {
		for _, c := range o.channels {
			if c.batch == nil {
				c.batch = t.env.newBatch()
			}
			c.batch.Control = ctl
			c.sent.controls++
			t.flush(c)
		}
	}
}

// overtake sends an unaligned barrier on every output channel ahead of the
// records in flight, each with its channel's mark.
func (t *task) overtake(b graph.Barrier) {
	for _, o := range t.outputs {
		for _, c := range o.channels {
			var partial *graph.Batch
			if c.batch != nil && len(c.batch.Records) > 0 {
				partial = c.batch
			}
			if c.link.barrier(b, c.sent, partial) {
				c.batch = nil
			}
		}
	}
}
