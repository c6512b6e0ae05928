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
type timerHeap struct {
	heap []Timer
	set  map[Timer]struct{}
}

func (h *timerHeap) add(t Timer) {
	if _, ok := h.set[t]; ok {
		return
	}
	if h.set == nil {
		h.set = make(map[Timer]struct{})
	}
	h.set[t] = struct{}{}
	h.heap = append(h.heap, t)
	h.up(len(h.heap) - 1)
}

func (h *timerHeap) remove(t Timer) { delete(h.set, t) }

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

// sorted returns the live timers in firing order.
func (h *timerHeap) sorted() []Timer {
	out := make([]Timer, 0, len(h.set))
	for t := range h.set {
		out = append(out, t)
	}
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
