package graph

import (
	"cmp"
	"maps"
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

// timerQueue holds a subtask's timers of one time domain, grouped by time,
// and fires them in (Time, Key) order, the same on every run.
//
// Grouping is for windows: every key's window ends at the same time, so a
// window operator over 100,000 keys holds 100,000 timers at one time. A
// group holds them in one set of keys, about 35 bytes a timer, where a heap
// of timers with a set to find them by cost 80 (BenchmarkTimers). A group
// of one key holds it without a set: timers at a time each cost about 65.
//
// A burst of timers does not keep its memory: a group goes once its last
// timer fires, and since a Go map never shrinks, the map of groups is made
// again at its size once the groups are down to a quarter of the most it
// has held.
type timerQueue struct {
	groups map[int64]*timerGroup
	// times is a min-heap of the times of groups; it may hold times with
	// no group (gone, or repeated), which next and popDue skip.
	times []int64
	n     int // timers held
	peak  int // the most groups held since groups was made
}

// timerGroup is the keys of the timers at one time: 32 bytes, with the map
// of groups' slot and the heap's entry about 65 a group.
type timerGroup struct {
	one   string              // the key, while keys is nil
	keys  map[string]struct{} // the keys, once the group has had two
	order *firingOrder        // set once the group begins to fire
}

// firingOrder is a group's keys sorted, made when it begins to fire;
// keys[next] fires next. A key added meanwhile goes in its place after
// next; one removed stays, and is skipped.
type firingOrder struct {
	keys []string
	next int
}

// shrinkFrom is the fewest groups worth making the map of groups again for.
const shrinkFrom = 1024

func (g *timerGroup) has(key string) bool {
	if g.keys == nil {
		return g.one == key
	}
	_, ok := g.keys[key]
	return ok
}

func (q *timerQueue) add(t Timer) {
	g := q.groups[t.Time]
	switch {
	case g == nil:
		if q.groups == nil {
			q.groups = make(map[int64]*timerGroup)
		}
		q.groups[t.Time] = &timerGroup{one: t.Key}
		q.n++
		q.peak = max(q.peak, len(q.groups))
		q.push(t.Time)
		return
	case g.has(t.Key):
		return
	case g.keys == nil:
		g.keys = map[string]struct{}{g.one: {}}
		g.one = ""
	}
	g.keys[t.Key] = struct{}{}
	q.n++
	if o := g.order; o != nil {
		i, _ := slices.BinarySearch(o.keys[o.next:], t.Key)
		o.keys = slices.Insert(o.keys, o.next+i, t.Key)
	}
}

func (q *timerQueue) remove(t Timer) {
	g := q.groups[t.Time]
	if g == nil || !g.has(t.Key) {
		return
	}
	q.n--
	if g.keys != nil {
		delete(g.keys, t.Key)
		if len(g.keys) > 0 {
			return
		}
	}
	q.drop(t.Time)
}

// drop removes the group at time tm, which is empty or fired.
func (q *timerQueue) drop(tm int64) {
	delete(q.groups, tm)
	switch {
	case len(q.groups) == 0:
		q.groups, q.times, q.n, q.peak = nil, nil, 0, 0
	case q.peak >= shrinkFrom && len(q.groups) <= q.peak/4:
		// O(n log n) for the n groups left, once per three times as many
		// gone. Not maps.Clone: it copies the tables at their size.
		groups := make(map[int64]*timerGroup, len(q.groups))
		maps.Copy(groups, q.groups)
		q.groups = groups
		q.remakeTimes()
		q.peak = len(q.groups)
	}
}

// popDue removes and returns the earliest timer at or before wm.
func (q *timerQueue) popDue(wm int64) (Timer, bool) {
	for len(q.times) > 0 && q.times[0] <= wm {
		tm := q.times[0]
		g := q.groups[tm]
		if g == nil {
			q.pop()
			continue
		}
		if g.keys == nil {
			q.n--
			q.pop()
			q.drop(tm)
			return Timer{Key: g.one, Time: tm}, true
		}
		if g.order == nil {
			g.order = &firingOrder{keys: slices.Sorted(maps.Keys(g.keys))}
		}
		for o := g.order; o.next < len(o.keys); {
			key := o.keys[o.next]
			o.keys[o.next] = ""
			o.next++
			if _, ok := g.keys[key]; ok {
				delete(g.keys, key)
				q.n--
				if len(g.keys) == 0 {
					q.pop()
					q.drop(tm)
				}
				return Timer{Key: key, Time: tm}, true
			}
		}
		q.pop() // unreachable: every key of a firing group is in its order
		q.drop(tm)
	}
	return Timer{}, false
}

// next returns the time of the earliest timer, dropping times with no
// group from the top of the heap.
func (q *timerQueue) next() (int64, bool) {
	for len(q.times) > 0 {
		if q.groups[q.times[0]] != nil {
			return q.times[0], true
		}
		q.pop()
	}
	return 0, false
}

// live returns the timers, in no order: O(n), for the synchronous phase of
// a snapshot, which sorts them later.
func (q *timerQueue) live() []Timer {
	out := make([]Timer, 0, q.n)
	for tm, g := range q.groups {
		if g.keys == nil {
			out = append(out, Timer{Key: g.one, Time: tm})
			continue
		}
		for k := range g.keys {
			out = append(out, Timer{Key: k, Time: tm})
		}
	}
	return out
}

// push adds time tm to the heap; when the heap holds more than twice the
// groups' times (times of groups removed before they fired), it is made
// again from them.
func (q *timerQueue) push(tm int64) {
	if len(q.times) >= 2*len(q.groups)+shrinkFrom {
		q.remakeTimes() // tm's group is in groups
		return
	}
	q.times = append(q.times, tm)
	for i := len(q.times) - 1; i > 0; {
		p := (i - 1) / 2
		if q.times[p] <= q.times[i] {
			return
		}
		q.times[i], q.times[p] = q.times[p], q.times[i]
		i = p
	}
}

// remakeTimes makes the heap again from the groups' times, without the
// times of groups gone: a sorted slice is a heap.
func (q *timerQueue) remakeTimes() { q.times = slices.Sorted(maps.Keys(q.groups)) }

// pop removes the earliest time from the heap.
func (q *timerQueue) pop() {
	last := len(q.times) - 1
	q.times[0] = q.times[last]
	q.times = q.times[:last]
	for i, n := 0, len(q.times); ; {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && q.times[r] < q.times[l] {
			m = r
		}
		if q.times[m] >= q.times[i] {
			return
		}
		q.times[i], q.times[m] = q.times[m], q.times[i]
		i = m
	}
}
