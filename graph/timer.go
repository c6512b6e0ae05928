package graph

import (
	"cmp"
	"slices"
)

// Timer is an event-time timer of one key.
type Timer struct {
	Key  string
	Time int64
}

func compareTimers(a, b Timer) int {
	if c := cmp.Compare(a.Time, b.Time); c != 0 {
		return c
	}
	return cmp.Compare(a.Key, b.Key)
}

// timerHeap holds a subtask's timers, ordered by (Time, Key) so that they fire
// in the same order on every run. Deletion is lazy: set is the truth, heap may
// hold entries no longer in set, which pop skips.
//
// A burst of timers does not keep its memory: a Go map never shrinks and a
// slice keeps its capacity, so once the timers fall to a quarter of the
// most held since set was made, set and heap are made again at their size.
// A window operator's timers all fire together when the watermark passes
// the windows' end; before this, their memory stayed for the agent's life.
type timerHeap struct {
	heap []Timer
	set  map[Timer]struct{}
	peak int // the most timers set has held since it was made
}

// shrinkFrom is the fewest timers worth making set and heap again for.
const shrinkFrom = 1024

func (h *timerHeap) add(t Timer) {
	if _, ok := h.set[t]; ok {
		return
	}
	if h.set == nil {
		h.set = make(map[Timer]struct{})
	}
	h.set[t] = struct{}{}
	h.peak = max(h.peak, len(h.set))
	h.heap = append(h.heap, t)
	h.up(len(h.heap) - 1)
}

func (h *timerHeap) remove(t Timer) {
	delete(h.set, t)
	h.shrink()
}

// shrink drops set and heap once no timer is left, and makes them again at
// their size once the timers are down to a quarter of peak. The cost,
// O(n log n) for the n timers left, is paid once per three times as many
// timers gone.
func (h *timerHeap) shrink() {
	switch {
	case len(h.set) == 0:
		h.heap, h.set, h.peak = nil, nil, 0
		return
	case h.peak < shrinkFrom || len(h.set) > h.peak/4:
		return
	}
	h.heap = h.sorted() // a sorted slice is a heap; stale entries are gone
	h.set = make(map[Timer]struct{}, len(h.heap))
	for _, t := range h.heap {
		h.set[t] = struct{}{}
	}
	h.peak = len(h.set)
}

// popDue removes and returns the earliest timer at or before wm.
func (h *timerHeap) popDue(wm int64) (Timer, bool) {
	for len(h.heap) > 0 && h.heap[0].Time <= wm {
		t := h.heap[0]
		last := len(h.heap) - 1
		h.heap[0] = h.heap[last]
		h.heap[last] = Timer{}
		h.heap = h.heap[:last]
		h.down(0)
		if _, ok := h.set[t]; ok {
			delete(h.set, t)
			h.shrink()
			return t, true
		}
	}
	return Timer{}, false
}

// next returns the time of the earliest live timer, dropping deleted ones
// from the top of the heap.
func (h *timerHeap) next() (int64, bool) {
	for len(h.heap) > 0 {
		if _, ok := h.set[h.heap[0]]; ok {
			return h.heap[0].Time, true
		}
		last := len(h.heap) - 1
		h.heap[0] = h.heap[last]
		h.heap[last] = Timer{}
		h.heap = h.heap[:last]
		h.down(0)
	}
	return 0, false
}

// live returns the live timers, in no order: O(n), for the synchronous
// phase of a snapshot, which sorts them later.
func (h *timerHeap) live() []Timer {
	out := make([]Timer, 0, len(h.set))
	for t := range h.set {
		out = append(out, t)
	}
	return out
}

// sorted returns the live timers in firing order.
func (h *timerHeap) sorted() []Timer {
	out := h.live()
	slices.SortFunc(out, compareTimers)
	return out
}

func (h *timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if compareTimers(h.heap[i], h.heap[p]) >= 0 {
			return
		}
		h.heap[i], h.heap[p] = h.heap[p], h.heap[i]
		i = p
	}
}

func (h *timerHeap) down(i int) {
	n := len(h.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && compareTimers(h.heap[r], h.heap[l]) < 0 {
			m = r
		}
		if compareTimers(h.heap[m], h.heap[i]) >= 0 {
			return
		}
		h.heap[i], h.heap[m] = h.heap[m], h.heap[i]
		i = m
	}
}
