package runtime

import (
	"testing"

	"github.com/cairn-edge/cairn/graph"
)

// countingLink is a link that only counts the credits given back.
type countingLink struct{ released int }

func (l *countingLink) send(*graph.Batch, bool) error                      { return nil }
func (l *countingLink) barrier(graph.Barrier, position, *graph.Batch) bool { return false }
func (l *countingLink) release()                                           { l.released++ }

// TestInboxCredits: every credit goes back exactly once — when the batch is
// processed, or at once when it is captured whole, never for a batch that
// came without one — and a blocked channel holds its batches, in order.
func TestInboxCredits(t *testing.T) {
	links := []*countingLink{{}, {}}
	in := newInbox(2)
	for ch, l := range links {
		in.links[ch] = l
	}
	a, b, c, d := &graph.Batch{}, &graph.Batch{}, &graph.Batch{}, &graph.Batch{}

	in.block(0)
	if buffered := in.put(0, a, false, false); !buffered {
		t.Fatal("a batch on a blocked channel is not buffered")
	}
	if buffered := in.put(1, b, false, true); buffered || links[1].released != 1 {
		t.Fatalf("a batch captured whole: buffered %v, credits back %d; want false, 1", buffered, links[1].released)
	}
	in.put(1, c, true, false) // free: no credit
	if ch, ok := in.next(); !ok || ch != 1 {
		t.Fatalf("next = %d, %v; want channel 1, the one not blocked", ch, ok)
	}
	for _, want := range []*graph.Batch{b, c} {
		if got := in.take(1); got != want {
			t.Fatal("channel 1's batches out of order")
		}
		in.done(1, want)
	}
	if links[1].released != 1 {
		t.Fatalf("channel 1 gave back %d credits; want 1: the captured batch's, once", links[1].released)
	}
	if _, ok := in.next(); ok {
		t.Fatal("a blocked channel is ready")
	}

	in.put(0, d, false, false)
	in.unblock(0)
	for _, want := range []*graph.Batch{a, d} {
		ch, ok := in.next()
		if !ok || ch != 0 || in.take(0) != want {
			t.Fatal("an unblocked channel does not give its batches back in order")
		}
		in.done(0, want)
	}
	if links[0].released != 2 || len(in.credited) != 0 {
		t.Fatalf("channel 0 gave back %d credits, %d batches still marked; want 2, 0", links[0].released, len(in.credited))
	}
}

// TestInboxTakesTurns: two busy channels are served alternately.
func TestInboxTakesTurns(t *testing.T) {
	in := newInbox(2)
	for ch := range 2 {
		in.links[ch] = &countingLink{}
		for range 2 {
			in.put(ch, &graph.Batch{}, false, false)
		}
	}
	var order []int
	for {
		ch, ok := in.next()
		if !ok {
			break
		}
		in.done(ch, in.take(ch))
		order = append(order, ch)
	}
	if len(order) != 4 || order[0] == order[1] || order[1] == order[2] || order[2] == order[3] {
		t.Fatalf("channels served in order %v; want them alternating", order)
	}
}
