package graph

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestWindowsFollowTheModel drives window operators and window joins,
// tumbling and sliding, with and without a lateness, by generated records
// (on time, late within the lateness and beyond it) and watermarks,
// snapshotting each (whole or incrementally) and restoring it from its
// chain of snapshots at random. At every step it requires the results,
// and the records refused as late, that a model of the windows' contract
// gives: a window fires once when the watermark passes its end; a record
// within the lateness updates its window and re-emits it at once; a
// window is discarded when the watermark passes its end and the lateness;
// a join emits a window both sides reached.
func TestWindowsFollowTheModel(t *testing.T) {
	aggs := []Aggregate{AggCount, AggSum, AggMin, AggMax, AggAvg, AggFirst, AggLast}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		spec := WindowSpec{Kind: Tumbling, Size: time.Duration(2+rng.IntN(15)) * time.Millisecond, Aggregate: aggs[rng.IntN(len(aggs))]}
		if rng.IntN(2) == 0 {
			spec.Kind, spec.Slide = Sliding, time.Duration(1+rng.Int64N(int64(spec.Size/time.Millisecond)))*time.Millisecond
		}
		if rng.IntN(4) > 0 {
			spec.AllowedLateness = time.Duration(1+rng.IntN(40)) * time.Millisecond
		}
		join := rng.IntN(3) == 0
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			op, model := newModelRun(t, spec, join), newWindowModel(spec, join)
			for step := range 400 {
				switch n := rng.IntN(20); {
				case n == 0:
					op.restore(rng.IntN(2) == 0)
					continue
				case n == 1:
					op.snapshot(rng.IntN(2) == 0)
					continue
				case n < 5:
					wm := model.wm
					if wm == MinWatermark {
						wm = 0
					}
					wm += rng.Int64N(12)
					op.watermark(wm)
					model.watermark(wm)
				default:
					key, side := fmt.Sprint("k", rng.IntN(3)), 0
					if join {
						side = rng.IntN(2)
					}
					base := max(model.wm, 0)
					ts, v := base-30+rng.Int64N(50), float64(rng.IntN(7)-3)
					op.record(key, side, ts, v)
					model.record(key, side, ts, v)
				}
				if got, want := op.take(), model.take(); got != want {
					t.Fatalf("step %d (%+v, join %v): the operator gave\n%s\nthe model\n%s", step, spec, join, got, want)
				}
			}
		})
	}
}

// modelRun is a window operator run step by step, its results and late
// records collected.
type modelRun struct {
	t     *testing.T
	spec  WindowSpec
	join  bool
	out   *recorder
	state *TaskState
	op    Operator
	late  []string
	// chain is the snapshots taken since the last whole one, base the
	// version the next incremental one follows.
	chain []*SubtaskSnapshot
	base  Version
}

func newModelRun(t *testing.T, spec WindowSpec, join bool) *modelRun {
	r := &modelRun{t: t, spec: spec, join: join, out: &recorder{}}
	r.open(nil)
	return r
}

// open opens a new operator, on the state of snap if not nil.
func (r *modelRun) open(snap *SubtaskSnapshot) {
	spec := r.spec
	spec.OnLate = func(rec *Record) { r.late = append(r.late, fmt.Sprintf("late %s@%d", rec.Key, rec.Time)) }
	r.state = NewTaskState(TaskInfo{Operator: "w", Parallelism: 1}, r.out)
	if snap != nil {
		r.state.Restore([]*SubtaskSnapshot{snap})
	}
	if r.join {
		r.op = WindowJoin(spec)(0)
	} else {
		r.op = Window(spec)(0)
	}
	if err := r.op.Open(r.state.Context()); err != nil {
		r.t.Fatal(err)
	}
}

// snapshot snapshots the operator, incrementally on the one before if
// there is one and incremental.
func (r *modelRun) snapshot(incremental bool) {
	incremental = incremental && len(r.chain) > 0
	f := r.state.Freeze(nil, r.base, incremental)
	snap, err := DecodeSubtaskSnapshot(f.Encode(), KeyGroupRange{0, DefaultMaxParallelism})
	if err != nil {
		r.t.Fatal(err)
	}
	if !incremental {
		r.chain = nil
	}
	r.chain, r.base = append(r.chain, snap), f.Version()
}

// restore snapshots the operator and opens another on the chain of
// snapshots merged, as a restore from an incremental checkpoint does.
func (r *modelRun) restore(incremental bool) {
	r.snapshot(incremental)
	snap, err := MergeChain(r.chain)
	if err != nil {
		r.t.Fatal(err)
	}
	r.open(snap)
	r.chain, r.base = nil, 0
}

func (r *modelRun) record(key string, side int, ts int64, v float64) {
	r.state.SetKey(key)
	if err := r.op.ProcessRecord(side, &Record{Key: key, Time: ts, Value: v}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *modelRun) watermark(wm int64) {
	if _, err := r.state.AdvanceWatermark(wm, r.op); err != nil {
		r.t.Fatal(err)
	}
}

// take returns and forgets the results and late records of the step,
// sorted: timers of one time fire in no promised order.
func (r *modelRun) take() string {
	out := r.late
	for _, rec := range r.out.got {
		switch p := rec.Payload.(type) {
		case WindowResult:
			out = append(out, fmt.Sprintf("%s[%d,%d)=%v", rec.Key, p.Start, p.End, rec.Value))
		case JoinResult:
			out = append(out, fmt.Sprintf("%s[%d,%d)=%v-%v", rec.Key, p.Start, p.End, p.Left, p.Right))
		}
	}
	r.out.got, r.late = nil, nil
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// windowModel is the windows' contract, kept as plainly as it is stated.
type windowModel struct {
	spec WindowSpec
	join bool
	wm   int64
	wins map[modelSpan]*modelWindow
	out  []string
}

type modelSpan struct {
	key        string
	side       int
	start, end int64
}

type modelWindow struct {
	count               int64
	sum, min, max       float64
	first, last         float64
	firstTime, lastTime int64
	fired               bool
}

func newWindowModel(spec WindowSpec, join bool) *windowModel {
	return &windowModel{spec: spec, join: join, wm: MinWatermark, wins: map[modelSpan]*modelWindow{}}
}

func (m *windowModel) passed(end int64) bool { return m.wm != MinWatermark && end-1 <= m.wm }

func (m *windowModel) record(key string, side int, ts int64, v float64) {
	size, lateness := m.spec.Size.Milliseconds(), m.spec.AllowedLateness.Milliseconds()
	slide := size
	if m.spec.Kind == Sliding {
		slide = m.spec.Slide.Milliseconds()
	}
	kept := false
	for start := ts - ((ts%slide)+slide)%slide; start > ts-size; start -= slide {
		s := modelSpan{key, side, start, start + size}
		if m.passed(s.end + lateness) {
			continue
		}
		kept = true
		w := m.wins[s]
		if w == nil {
			w = &modelWindow{firstTime: ts, lastTime: ts, first: v, last: v, min: v, max: v}
			m.wins[s] = w
		}
		w.count++
		w.sum += v
		w.min, w.max = min(w.min, v), max(w.max, v)
		if ts < w.firstTime {
			w.first, w.firstTime = v, ts
		}
		if ts >= w.lastTime {
			w.last, w.lastTime = v, ts
		}
		if w.fired || m.passed(s.end) {
			m.fire(s)
		}
	}
	if !kept {
		m.out = append(m.out, fmt.Sprintf("late %s@%d", key, ts))
	}
}

func (m *windowModel) watermark(wm int64) {
	if wm <= m.wm {
		return
	}
	m.wm = wm
	for s, w := range m.wins {
		if !w.fired && m.passed(s.end) {
			m.fire(s)
		}
	}
	for s := range m.wins {
		if m.passed(s.end + m.spec.AllowedLateness.Milliseconds()) {
			delete(m.wins, s)
		}
	}
}

// fire emits s's result: in a join, once both sides of the span have one.
func (m *windowModel) fire(s modelSpan) {
	w := m.wins[s]
	w.fired = true
	if !m.join {
		m.out = append(m.out, fmt.Sprintf("%s[%d,%d)=%v", s.key, s.start, s.end, w.result(m.spec.Aggregate)))
		return
	}
	other := s
	other.side = 1 - s.side
	o := m.wins[other]
	if o == nil {
		return
	}
	o.fired = true
	left, right := w, o
	if s.side == 1 {
		left, right = o, w
	}
	m.out = append(m.out, fmt.Sprintf("%s[%d,%d)=%v-%v", s.key, s.start, s.end, left.result(m.spec.Aggregate), right.result(m.spec.Aggregate)))
}

func (w *modelWindow) result(agg Aggregate) float64 {
	return (&windowAcc{count: w.count, sum: w.sum, min: w.min, max: w.max, first: w.first, last: w.last}).result(agg)
}

func (m *windowModel) take() string {
	out := m.out
	m.out = nil
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// TestFiredWindowsAnOlderCairnKept: state an older cairn wrote keeps a
// fired window among the open ones, its lateness timer registered.
// Restored, a late record updates that window (and emits its count of
// both records), and once the lateness has passed a late record is
// refused.
func TestFiredWindowsAnOlderCairnKept(t *testing.T) {
	spec := WindowSpec{Kind: Tumbling, Size: 10 * time.Millisecond, AllowedLateness: 20 * time.Millisecond, Aggregate: AggCount}
	old := NewTaskState(TaskInfo{Operator: "w", Parallelism: 1}, &recorder{})
	windows, err := NewValueState(old.Context(), "windows", windowsCodec{})
	if err != nil {
		t.Fatal(err)
	}
	old.SetKey("a")
	w := windowAcc{start: 0, end: 10, fired: true}
	w.add(&Record{Time: 1, Value: 1})
	windows.Set([]windowAcc{w})
	old.Context().RegisterEventTimer(9 + 20) // its lateness's end
	if _, err := old.AdvanceWatermark(12, &timerOp{ctx: old.Context()}); err != nil {
		t.Fatal(err)
	}
	snap, err := DecodeSubtaskSnapshot(old.Freeze(nil, 0, false).Encode(), KeyGroupRange{0, DefaultMaxParallelism})
	if err != nil {
		t.Fatal(err)
	}
	r := &modelRun{t: t, spec: spec, out: &recorder{}}
	r.open(snap)
	r.record("a", 0, 5, 1)
	if got := r.take(); got != "a[0,10)=2" {
		t.Fatalf("a late record for the fired window emitted %q, want a[0,10)=2", got)
	}
	r.watermark(29)
	r.record("a", 0, 5, 1)
	if got := r.take(); got != "late a@5" {
		t.Fatalf("after the lateness: %q, want the record refused as late", got)
	}
}
