package graph

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestWindowRowsFollowTheModel drives window operators of many aggregates
// — generated lists of every function over generated arguments, random
// quantiles; tumbling, sliding and session windows, in event time with
// and without a lateness and in processing time — by generated records
// (on time, out of order, late within the lateness and beyond it, and
// ones whose arguments cannot be read or are no finite numbers) and
// watermarks or clock ticks, snapshotting each through its keyed state
// and codec (whole or incrementally) and restoring it from its chain of
// snapshots at random. At every step it requires the rows, the records
// refused as late and those rejected that a model holding every record
// gives: count, sum, min, max, avg, first and last exactly, a stddev within
// 1e-9 of the model's (relative), each quantile within
// QuantileRelativeAccuracy of the value DDSketch's rank makes it
// (modelQuantile), and each distinct count exactly, for a window's
// values are few and their sketches sparse.
func TestWindowRowsFollowTheModel(t *testing.T) {
	for seed := range uint64(150) {
		rng := rand.New(rand.NewPCG(seed, 11))
		spec := randomRowsSpec(rng)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			op, model := newModelRun(t, spec, false), newRowsModel(spec)
			for step := range 300 {
				switch n := rng.IntN(20); {
				case n == 0:
					op.restore(rng.IntN(2) == 0)
					op.state.SetProcessingTime(model.clock())
					continue
				case n == 1:
					op.snapshot(rng.IntN(2) == 0)
					continue
				case n < 5:
					now := model.clock() + rng.Int64N(12)
					if spec.ProcessingTime {
						if err := op.state.AdvanceProcessingTime(now, op.op); err != nil {
							t.Fatal(err)
						}
					} else {
						op.watermark(now)
					}
					model.advance(now)
				default:
					key := fmt.Sprint("k", rng.IntN(3))
					ts := model.clock() - 30 + rng.Int64N(50)
					in := randomRowInput(rng, spec.NArgs, spec.NHashes)
					op.state.SetProcessingTime(model.clock())
					op.state.SetKey(key)
					err := op.op.ProcessRecord(0, &Record{Key: key, Time: ts, Payload: in})
					if _, rejected := errors.AsType[*RecordError](err); err != nil && !rejected {
						t.Fatal(err)
					}
					if want := model.record(key, ts, in); (err != nil) != want {
						t.Fatalf("step %d: record %s@%d %+v: the operator returned %v, the model rejects it: %v", step, key, ts, in, err, want)
					}
				}
				got, want := takeRows(t, op), model.take()
				if msg := compareRows(spec, got, want); msg != "" {
					t.Fatalf("step %d (%+v): %s\nthe operator gave\n%s\nthe model\n%s", step, spec, msg, showRows(got), showRows(want))
				}
			}
		})
	}
}

// rowInput is a generated record's arguments, as its payload: Args copies
// vals, and the hashes of the values it counts, or fails if unreadable.
type rowInput struct {
	vals       []float64
	counted    []uint64 // which of the distinct values, testHash hashes
	unreadable bool
}

func readRowInput(r *Record, args []float64, hashes []uint64) error {
	in := r.Payload.(rowInput)
	if in.unreadable {
		return errors.New("the reading has no such field")
	}
	copy(args, in.vals)
	for i, v := range in.counted {
		hashes[i] = testHash(v)
	}
	return nil
}

// randomRowsSpec is a window of one to seven aggregates, of every function,
// over one to three arguments and one or two hashed ones.
func randomRowsSpec(rng *rand.Rand) WindowSpec {
	spec := WindowSpec{Kind: WindowKind(rng.IntN(3)), Size: time.Duration(2+rng.IntN(15)) * time.Millisecond,
		NArgs: 1 + rng.IntN(3), NHashes: 1 + rng.IntN(2), Args: readRowInput}
	if spec.Kind == Sliding {
		spec.Slide = time.Duration(1+rng.Int64N(int64(spec.Size/time.Millisecond))) * time.Millisecond
	}
	switch rng.IntN(5) {
	case 0:
		spec.ProcessingTime = true
	case 1, 2:
		spec.AllowedLateness = time.Duration(1+rng.IntN(40)) * time.Millisecond
	}
	for i := range 1 + rng.IntN(7) {
		a := NamedAggregate{Name: fmt.Sprint("a", i), Func: Aggregate(rng.IntN(int(AggDistinct) + 1)), Arg: rng.IntN(spec.NArgs)}
		switch a.Func {
		case AggQuantile:
			a.Quantile = []float64{0, 0.5, 0.95, 1, rng.Float64()}[rng.IntN(5)]
		case AggDistinct:
			a.Arg = rng.IntN(spec.NHashes)
		}
		spec.Aggregates = append(spec.Aggregates, a)
	}
	return spec
}

// randomRowInput are a record's arguments: multiples of 1/4 (so that
// every sum is exact, in any order), zeros, values of magnitudes from
// 2^-6 to 2^10 for the sketches' bins; now and then one that cannot be
// read, or that is no finite number; and which of 3 or of 200 values
// (by the hashed argument) each hashed argument gives.
func randomRowInput(rng *rand.Rand, nargs, nhashes int) rowInput {
	in := rowInput{vals: make([]float64, nargs), counted: make([]uint64, nhashes), unreadable: rng.IntN(40) == 0}
	for i := range in.counted {
		in.counted[i] = rng.Uint64N([]uint64{3, 200}[i])
	}
	for i := range in.vals {
		switch rng.IntN(8) {
		case 0:
			in.vals[i] = 0
		case 1, 2:
			in.vals[i] = math.Ldexp(float64(rng.IntN(16)-8), rng.IntN(14)-7)
		default:
			in.vals[i] = float64(rng.IntN(161)-80) / 4
		}
	}
	if rng.IntN(60) == 0 {
		in.vals[rng.IntN(nargs)] = []float64{math.NaN(), math.Inf(1), math.Inf(-1)}[rng.IntN(3)]
	}
	return in
}

// rowOut is an emitted row, or what the model expects of one.
type rowOut struct {
	key        string
	start, end int64
	count      int64
	values     []float64
}

// takeRows returns and forgets the rows and late records of the step,
// checking what every row's record holds besides.
func takeRows(t *testing.T, r *modelRun) []rowOut {
	t.Helper()
	var out []rowOut
	for _, rec := range r.out.got {
		p := rec.Payload.(WindowRow)
		if rec.Time != p.End-1 || rec.Value != 0 || len(p.Values) != len(r.spec.Aggregates) {
			t.Fatalf("a row's record %+v", rec)
		}
		for i, a := range r.spec.Aggregates {
			if p.Names[i] != a.Name {
				t.Fatalf("a row's names %v", p.Names)
			}
		}
		out = append(out, rowOut{key: rec.Key, start: p.Start, end: p.End, count: p.Count, values: p.Values})
	}
	for _, late := range r.late {
		out = append(out, rowOut{key: late})
	}
	r.out.got, r.late = nil, nil
	sortRows(out)
	return out
}

func sortRows(rows []rowOut) {
	slices.SortFunc(rows, func(a, b rowOut) int {
		return cmp.Or(strings.Compare(a.key, b.key), cmp.Compare(a.start, b.start), cmp.Compare(a.end, b.end))
	})
}

// compareRows says how got differs from the model's rows, "" if it does
// not: a stddev may differ by 1e-9 of it, and a quantile by
// QuantileRelativeAccuracy of the model's.
func compareRows(spec WindowSpec, got, want []rowOut) string {
	if len(got) != len(want) {
		return "other rows"
	}
	for i, g := range got {
		w := want[i]
		if g.key != w.key || g.start != w.start || g.end != w.end || g.count != w.count || len(g.values) != len(w.values) {
			return fmt.Sprintf("row %d is another window", i)
		}
		if g.values == nil {
			continue // a late record
		}
		for j, a := range spec.Aggregates {
			x, y := g.values[j], w.values[j]
			ok := x == y
			switch a.Func {
			case AggStddev:
				ok = math.Abs(x-y) <= 1e-9*math.Abs(y)
			case AggQuantile:
				ok = math.Abs(x-y) <= QuantileRelativeAccuracy*math.Abs(y)*(1+1e-12)
			}
			if !ok {
				return fmt.Sprintf("row %d: %s (%v of argument %d) is %v, want %v", i, a.Name, a.Func, a.Arg, x, y)
			}
		}
	}
	return ""
}

func showRows(rows []rowOut) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%s[%d,%d) n=%d %v\n", r.key, r.start, r.end, r.count, r.values)
	}
	return b.String()
}

// rowsModel is the contract of windows of many aggregates, kept plainly:
// each window holds its records, and a row is computed from them afresh.
// now is the watermark, or in processing time the clock.
type rowsModel struct {
	spec     WindowSpec
	now      int64
	seq      int
	windows  map[modelSpan]*rowsModelWindow // tumbling and sliding
	sessions map[string][]*rowsModelWindow
	out      []rowOut
}

type rowsModelWindow struct {
	start, end int64
	recs       []rowsModelRecord
	fired      bool
}

type rowsModelRecord struct {
	time    int64
	seq     int // the order of arrival
	args    []float64
	counted []uint64
}

func newRowsModel(spec WindowSpec) *rowsModel {
	return &rowsModel{spec: spec, now: MinWatermark, windows: map[modelSpan]*rowsModelWindow{}, sessions: map[string][]*rowsModelWindow{}}
}

// passed reports whether the watermark passed end (never, in processing
// time: a record's windows are those of the clock).
func (m *rowsModel) passed(end int64) bool {
	return !m.spec.ProcessingTime && m.now != MinWatermark && end-1 <= m.now
}

// record adds a record and reports whether it is rejected.
func (m *rowsModel) record(key string, ts int64, in rowInput) bool {
	if in.unreadable || slices.ContainsFunc(in.vals, func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }) {
		return true
	}
	at, lateness := ts, m.spec.AllowedLateness.Milliseconds()
	if m.spec.ProcessingTime {
		at, lateness = m.clock(), 0
	}
	m.seq++
	rec := rowsModelRecord{time: ts, seq: m.seq, args: slices.Clone(in.vals), counted: slices.Clone(in.counted)}
	size := m.spec.Size.Milliseconds()
	if m.spec.Kind == Session {
		if m.passed(at + size + lateness) {
			m.out = append(m.out, rowOut{key: fmt.Sprintf("late %s@%d", key, ts)})
			return false
		}
		w := &rowsModelWindow{start: at, end: at + size, recs: []rowsModelRecord{rec}}
		var kept []*rowsModelWindow
		for _, s := range m.sessions[key] {
			if s.start < w.end && w.start < s.end {
				w.start, w.end, w.recs = min(w.start, s.start), max(w.end, s.end), append(w.recs, s.recs...)
			} else {
				kept = append(kept, s)
			}
		}
		m.sessions[key] = append(kept, w)
		if m.passed(w.end) {
			m.fire(key, w)
		}
		return false
	}
	slide := size
	if m.spec.Kind == Sliding {
		slide = m.spec.Slide.Milliseconds()
	}
	kept := false
	for start := at - ((at%slide)+slide)%slide; start > at-size; start -= slide {
		s := modelSpan{key: key, start: start, end: start + size}
		if m.passed(s.end + lateness) {
			continue
		}
		kept = true
		w := m.windows[s]
		if w == nil {
			w = &rowsModelWindow{start: s.start, end: s.end}
			m.windows[s] = w
		}
		w.recs = append(w.recs, rec)
		if w.fired || m.passed(s.end) {
			m.fire(key, w)
		}
	}
	if !kept {
		m.out = append(m.out, rowOut{key: fmt.Sprintf("late %s@%d", key, ts)})
	}
	return false
}

// clock is the watermark, or the processing time, from 0 on.
func (m *rowsModel) clock() int64 { return max(m.now, 0) }

// advance moves the watermark, or the clock, to now: windows it passed
// fire, and those it passed with their lateness go. In processing time a
// window ending at the clock fires at the next tick, even of no time.
func (m *rowsModel) advance(now int64) {
	if now < m.now || now == m.now && !m.spec.ProcessingTime {
		return
	}
	m.now = now
	lateness := m.spec.AllowedLateness.Milliseconds()
	if m.spec.ProcessingTime {
		lateness = 0
	}
	over := func(w *rowsModelWindow) bool { return w.end-1+lateness <= now }
	for s, w := range m.windows {
		if !w.fired && w.end-1 <= now {
			m.fire(s.key, w)
		}
		if over(w) {
			delete(m.windows, s)
		}
	}
	for key, ws := range m.sessions {
		for _, w := range ws {
			if !w.fired && w.end-1 <= now {
				m.fire(key, w)
			}
		}
		m.sessions[key] = slices.DeleteFunc(ws, over)
	}
}

// fire emits w's row.
func (m *rowsModel) fire(key string, w *rowsModelWindow) {
	w.fired = true
	row := rowOut{key: key, start: w.start, end: w.end, count: int64(len(w.recs))}
	first := slices.MinFunc(w.recs, func(a, b rowsModelRecord) int { return cmp.Or(cmp.Compare(a.time, b.time), cmp.Compare(a.seq, b.seq)) })
	last := slices.MaxFunc(w.recs, func(a, b rowsModelRecord) int { return cmp.Or(cmp.Compare(a.time, b.time), cmp.Compare(a.seq, b.seq)) })
	for _, a := range m.spec.Aggregates {
		if a.Func == AggDistinct {
			distinct := map[uint64]bool{}
			for _, r := range w.recs {
				distinct[r.counted[a.Arg]] = true
			}
			row.values = append(row.values, float64(len(distinct)))
			continue
		}
		var vals []float64
		for _, r := range w.recs {
			vals = append(vals, r.args[a.Arg])
		}
		var sum float64
		for _, v := range vals {
			sum += v
		}
		n := float64(len(vals))
		var v float64
		switch a.Func {
		case AggCount:
			v = n
		case AggSum:
			v = sum
		case AggMin:
			v = slices.Min(vals)
		case AggMax:
			v = slices.Max(vals)
		case AggAvg:
			v = sum / n
		case AggFirst:
			v = first.args[a.Arg]
		case AggLast:
			v = last.args[a.Arg]
		case AggStddev:
			var ss float64
			for _, x := range vals {
				ss += (x - sum/n) * (x - sum/n)
			}
			v = math.Sqrt(ss / n)
		case AggQuantile:
			v = modelQuantile(vals, a.Quantile)
		}
		row.values = append(row.values, v)
	}
	m.out = append(m.out, row)
}

func (m *rowsModel) take() []rowOut {
	out := m.out
	m.out = nil
	sortRows(out)
	return out
}

// modelQuantile is the value that DDSketch's quantile q of vals
// approximates: of rank q(n−1) among the n values sorted (0-based), and
// of two values the rank falls between, the lower one among the positive
// values and the upper one among the negative ones, for DDSketch reads
// the negative values' bins from the largest magnitude down
// (GetValueAtQuantile).
func modelQuantile(vals []float64, q float64) float64 {
	sorted := slices.Sorted(slices.Values(vals))
	n := len(sorted)
	rank := float64(q * float64(n-1))
	neg := slices.IndexFunc(sorted, func(v float64) bool { return v >= 0 })
	if neg < 0 {
		neg = n
	}
	zero := 0
	for _, v := range sorted[neg:] {
		if v == 0 {
			zero++
		}
	}
	switch {
	case rank < float64(neg):
		return sorted[neg-1-int(float64(neg)-1-rank)]
	case rank < float64(neg+zero):
		return 0
	}
	return sorted[min(neg+zero+int(rank-float64(neg+zero)), n-1)]
}
