package runtime

import "github.com/cairn-edge/cairn/graph"

// inbox is what an operator subtask holds of its input: per input channel,
// the batches received and not processed yet, oldest first, whether the
// channel is blocked, and the credits the batches hold. It is a state
// machine without goroutines or clocks, driven alike by the goroutine
// executor and the seeded simulation:
//
//   - the executor puts each batch it takes off a channel (put), asks which
//     channel may be processed next (next, or ready for a channel of its
//     choosing), takes its oldest batch (take), and hands the batch back
//     once processed (done);
//   - the task applies the barrier handler's Block and Unblock effects
//     (block, unblock) and, while it captures channel state, says which
//     batches are captured whole (put's captured).
//
// Credits. A batch holds a credit of its link from put until done, so that
// a blocked channel's sender slows down and nothing is dropped; a batch
// that came without one (free: a partial batch sent with an unaligned
// barrier) holds none, and one whose records are all channel state of the
// capture in progress gives its credit back at once, being part of the
// checkpoint already, so that the sender's records in flight reach the
// capture sooner. Every credit goes back exactly once, through its link's
// release.
type inbox struct {
	queues  [][]*graph.Batch
	blocked []bool
	links   []link // per channel, the link whose credits its batches hold
	// credited are the batches queued that hold no credit (any more).
	credited map[*graph.Batch]bool
	turn     int // the channel next looks at first: after the last taken
}

func newInbox(channels int) *inbox {
	return &inbox{queues: make([][]*graph.Batch, channels), blocked: make([]bool, channels),
		links: make([]link, channels), credited: make(map[*graph.Batch]bool)}
}

// put queues b, taken off channel ch. free says it came without a credit;
// captured that every record of it is channel state of the capture in
// progress, so that its credit goes back now. put reports whether b waits
// behind a blocked channel: the alignment buffers it.
func (in *inbox) put(ch int, b *graph.Batch, free, captured bool) (buffered bool) {
	in.queues[ch] = append(in.queues[ch], b)
	if free {
		in.credited[b] = true
	}
	switch {
	case in.blocked[ch]:
		return true
	case captured && !free:
		in.credited[b] = true
		in.links[ch].release()
	}
	return false
}

// block stops channel ch: its batches wait until unblock (the handler's
// Block effect).
func (in *inbox) block(ch int) { in.blocked[ch] = true }

// unblock resumes channel ch, its queued batches first (the handler's
// Unblock effect).
func (in *inbox) unblock(ch int) { in.blocked[ch] = false }

// ready reports whether channel ch has a batch that may be processed.
func (in *inbox) ready(ch int) bool { return len(in.queues[ch]) > 0 && !in.blocked[ch] }

// next returns a channel that is ready: of those, the first after the
// channel last taken from, so that no channel waits behind another's
// backlog.
func (in *inbox) next() (int, bool) {
	n := len(in.queues)
	for k := range n {
		ch := (in.turn + k) % n
		if in.ready(ch) {
			return ch, true
		}
	}
	return 0, false
}

// take removes and returns the oldest batch of channel ch, which must be
// ready; next then looks at the channels after ch first.
func (in *inbox) take(ch int) *graph.Batch {
	in.turn = (ch + 1) % len(in.queues)
	b := in.queues[ch][0]
	in.queues[ch][0] = nil
	in.queues[ch] = in.queues[ch][1:]
	return b
}

// done ends b, taken off channel ch and processed: its credit goes back,
// unless it went already or there was none.
func (in *inbox) done(ch int, b *graph.Batch) {
	if in.credited[b] {
		delete(in.credited, b)
		return
	}
	in.links[ch].release()
}

// queued returns the batches of channel ch not processed yet, oldest first.
// They belong to the inbox.
func (in *inbox) queued(ch int) []*graph.Batch { return in.queues[ch] }
