package graph

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// rowsHarness drives a window operator of many aggregates on one subtask,
// its records' arguments read from a payload of []float64.
type rowsHarness struct {
	t     *testing.T
	state *TaskState
	op    Operator
	out   *recorder
}

func newRowsHarness(t *testing.T, spec WindowSpec) *rowsHarness {
	h := &rowsHarness{t: t, out: &recorder{}}
	spec.Args = func(r *Record, args []float64, _ []uint64) error {
		vals, ok := r.Payload.([]float64)
		if !ok {
			return errors.New("no arguments")
		}
		copy(args, vals)
		return nil
	}
	h.state = NewTaskState(TaskInfo{Operator: "w", Parallelism: 1}, h.out)
	h.op = Window(spec)(0)
	if err := h.op.Open(h.state.Context()); err != nil {
		t.Fatal(err)
	}
	return h
}

// record processes a record of args (nil: none to read) and returns its
// error, which must be nil or reject it.
func (h *rowsHarness) record(key string, t int64, args []float64) error {
	h.state.SetKey(key)
	var payload any
	if args != nil {
		payload = args
	}
	err := h.op.ProcessRecord(0, &Record{Key: key, Time: t, Payload: payload})
	if _, rejected := errors.AsType[*RecordError](err); err != nil && !rejected {
		h.t.Fatal(err)
	}
	return err
}

func (h *rowsHarness) watermark(wm int64) {
	if _, err := h.state.AdvanceWatermark(wm, h.op); err != nil {
		h.t.Fatal(err)
	}
}

// rows returns and forgets the rows so far, as key[start,end) n=count
// name=value...
func (h *rowsHarness) rows() string {
	var out []string
	for _, r := range h.out.got {
		p := r.Payload.(WindowRow)
		s := fmt.Sprintf("%s[%d,%d) n=%d", r.Key, p.Start, p.End, p.Count)
		for i, name := range p.Names {
			s += fmt.Sprintf(" %s=%.4g", name, p.Values[i])
		}
		out = append(out, s)
	}
	h.out.got = nil
	return strings.Join(out, "\n")
}

// TestWindowOfTheFourFigures: a window of an avg, a max, a p95 and a
// count over three arguments emits one record per key and window with
// all four, its value 0 and its time the window's last millisecond, every
// row's names the one slice of the operator's.
func TestWindowOfTheFourFigures(t *testing.T) {
	h := newRowsHarness(t, WindowSpec{Kind: Tumbling, Size: 10 * time.Millisecond, Aggregates: fourFigures, NArgs: 3})
	for i := range 10 {
		h.record("dev-1", int64(i), []float64{20 + float64(i)/3, float64(50 + i), float64(i+1) / 10})
	}
	h.record("dev-2", 3, []float64{18, 40, 2})
	h.watermark(9)
	got := h.out.got
	if rows, want := h.rows(), "dev-1[0,10) n=10 temp_avg=21.5 hum_max=59 vib_p95=0.8958 n=10\ndev-2[0,10) n=1 temp_avg=18 hum_max=40 vib_p95=1.994 n=1"; rows != want {
		t.Errorf("rows:\n%s\nwant\n%s", rows, want)
	}
	for _, r := range got {
		if r.Time != 9 || r.Value != 0 {
			t.Errorf("a row's record %+v, want time 9 and value 0", r)
		}
	}
	if a, b := got[0].Payload.(WindowRow).Names, got[1].Payload.(WindowRow).Names; &a[0] != &b[0] {
		t.Error("two rows have names of their own")
	}
}

// TestRejectedRecordsChangeNoWindow: a record whose arguments cannot be
// read, are no finite number, would make a sum or a stddev none (in a
// window, or in the session it would merge), or are too large for a
// quantile's sketch is rejected, emits nothing, and counts in no window.
func TestRejectedRecordsChangeNoWindow(t *testing.T) {
	aggs := []NamedAggregate{{Name: "sum", Func: AggSum}, {Name: "sd", Func: AggStddev, Arg: 1},
		{Name: "max", Func: AggMax, Arg: 2}, {Name: "p50", Func: AggQuantile, Quantile: 0.5, Arg: 3}}
	for _, c := range []struct {
		name string
		args []float64
	}{
		{"unreadable", nil},
		{"NaN", []float64{math.NaN(), 0, 0, 0}},
		{"infinite", []float64{0, 0, math.Inf(-1), 0}},
		{"a sum's overflow", []float64{math.MaxFloat64, 0, 0, 0}},
		{"a stddev's overflow", []float64{0, 1e300, 0, 0}},
		{"beyond the sketch", []float64{0, 0, 0, 1.5e308}},
		{"bridging sessions whose sums overflow", []float64{0, -1e300, 1, 2}},
	} {
		for _, kind := range []WindowKind{Tumbling, Sliding, Session} {
			if c.name == "bridging sessions whose sums overflow" && kind != Session {
				continue
			}
			h := newRowsHarness(t, WindowSpec{Kind: kind, Size: 10 * time.Millisecond, Slide: 5 * time.Millisecond,
				AllowedLateness: 20 * time.Millisecond, Aggregates: aggs, NArgs: 4})
			h.record("a", 1, []float64{math.MaxFloat64, -1e300, 1e308, 2})
			if kind == Session {
				h.record("a", 15, []float64{math.MaxFloat64, -1e300, 1, 2}) // a session a record at 9 bridges to
			}
			h.watermark(12)
			before := h.rows()
			if err := h.record("a", 9, c.args); err == nil {
				t.Errorf("%v, %s: the record is not rejected", kind, c.name)
			}
			if got := h.rows(); got != "" {
				t.Errorf("%v, %s: the rejected record emitted\n%s", kind, c.name, got)
			}
			h.record("a", 2, []float64{0, -1e300, 1, 2}) // late, within the lateness: emits its windows again
			if got, want := h.rows(), strings.NewReplacer("n=1", "n=2", "[1,11)", "[1,12)").Replace(before); got != want {
				t.Errorf("%v, %s: after the rejected record\n%s\nwant\n%s", kind, c.name, got, want)
			}
		}
	}
}

// TestAggregatesAreValidated: what Validate refuses of many aggregates,
// and that a join refuses them.
func TestAggregatesAreValidated(t *testing.T) {
	args := func(*Record, []float64, []uint64) error { return nil }
	for name, spec := range map[string]WindowSpec{
		"no name":                {Aggregates: []NamedAggregate{{Func: AggCount}}},
		"two of one name":        {Aggregates: []NamedAggregate{{Name: "n", Func: AggCount}, {Name: "n", Func: AggCount}}},
		"unknown function":       {Aggregates: []NamedAggregate{{Name: "x", Func: AggQuantile + 1}}, NArgs: 1, Args: args},
		"quantile over 1":        {Aggregates: []NamedAggregate{{Name: "q", Func: AggQuantile, Quantile: 1.5}}, NArgs: 1, Args: args},
		"quantile NaN":           {Aggregates: []NamedAggregate{{Name: "q", Func: AggQuantile, Quantile: math.NaN()}}, NArgs: 1, Args: args},
		"argument out of range":  {Aggregates: []NamedAggregate{{Name: "s", Func: AggSum, Arg: 1}}, NArgs: 1, Args: args},
		"negative argument":      {Aggregates: []NamedAggregate{{Name: "s", Func: AggSum, Arg: -1}}, NArgs: 1, Args: args},
		"no Args":                {Aggregates: []NamedAggregate{{Name: "s", Func: AggSum}}, NArgs: 1},
		"distinct of no hash":    {Aggregates: []NamedAggregate{{Name: "d", Func: AggDistinct}}, NArgs: 1, Args: args},
		"distinct out of range":  {Aggregates: []NamedAggregate{{Name: "d", Func: AggDistinct, Arg: 1}}, NHashes: 1, Args: args},
		"negative hashes":        {Aggregates: []NamedAggregate{{Name: "n", Func: AggCount}}, NHashes: -1, Args: args},
		"no Args for hashes":     {Aggregates: []NamedAggregate{{Name: "d", Func: AggDistinct}}, NHashes: 1},
		"unknown after distinct": {Aggregates: []NamedAggregate{{Name: "x", Func: AggDistinct + 1}}, NArgs: 1, NHashes: 1, Args: args},
	} {
		spec.Size = time.Second
		if err := spec.Validate(); err == nil {
			t.Errorf("%s: valid", name)
		}
	}
	ok := WindowSpec{Size: time.Second, Aggregates: []NamedAggregate{{Name: "n", Func: AggCount, Arg: 7}, {Name: "q", Func: AggQuantile, Quantile: 1},
		{Name: "d", Func: AggDistinct, Arg: 1}}, NArgs: 1, NHashes: 2, Args: args}
	if err := ok.Validate(); err != nil {
		t.Errorf("%+v: %v", ok, err)
	}
	if err := WindowJoin(ok)(0).Open(NewTaskState(TaskInfo{Operator: "j", Parallelism: 1}, &recorder{}).Context()); err == nil {
		t.Error("a window join of many aggregates opens")
	}
}

// TestLayoutSharesWhatAggregatesNeed: aggregates that need the same
// partial (a sum and an avg of one argument) or sketch (quantiles of one
// argument) share it, and the state's name does not depend on the order
// the aggregates are listed in, or on their names.
func TestLayoutSharesWhatAggregatesNeed(t *testing.T) {
	aggs := []NamedAggregate{{Name: "s", Func: AggSum, Arg: 1}, {Name: "a", Func: AggAvg, Arg: 1}, {Name: "p50", Func: AggQuantile, Quantile: 0.5},
		{Name: "p99", Func: AggQuantile, Quantile: 0.99}, {Name: "sd", Func: AggStddev}, {Name: "n", Func: AggCount}}
	l := newRowLayout(aggs, 2)
	if len(l.partials) != 3 || len(l.sketched) != 1 || l.times {
		t.Errorf("partials %v, sketches of %v, times %v: want the mean and M2 of 0 and the sum of 1, a sketch of 0, no times", l.partials, l.sketched, l.times)
	}
	reversed := slices.Clone(aggs)
	slices.Reverse(reversed)
	for i := range reversed {
		reversed[i].Name += "'"
	}
	if a, b := l.stateName("windows"), newRowLayout(reversed, 2).stateName("windows"); a != b {
		t.Errorf("state %q, and %q for the aggregates reversed", a, b)
	}
}

// TestSketchIsBounded: a sketch of values over 600 orders of magnitude
// keeps at most sketchBins bins of each sign, the quantiles of its
// largest magnitudes (of either sign) still within
// QuantileRelativeAccuracy; and a merge of two sketches has the bins of
// one sketch of both's values.
func TestSketchIsBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	var s, a, b sketch
	var vals []float64
	for i := range 20_000 {
		v := math.Pow(10, rng.Float64()*600-300)
		if i%3 == 0 {
			v = -v
		}
		vals = append(vals, v)
		s.add(v)
		if i%2 == 0 {
			a.add(v)
		} else {
			b.add(v)
		}
	}
	for _, bins := range [][]sketchBin{s.pos, s.neg} {
		if len(bins) > sketchBins || bins[len(bins)-1].index-bins[0].index >= sketchBins {
			t.Errorf("%d bins from %d to %d", len(bins), bins[0].index, bins[len(bins)-1].index)
		}
	}
	var q sketchQuery
	q.load(&s)
	for _, p := range []float64{0, 0.002, 0.995, 1} {
		if got, want := q.quantile(p), modelQuantile(vals, p); math.Abs(got-want) > QuantileRelativeAccuracy*math.Abs(want) {
			t.Errorf("quantile %v: %v, want %v", p, got, want)
		}
	}
	a.merge(&b)
	if !slices.Equal(a.pos, s.pos) || !slices.Equal(a.neg, s.neg) || a.zero != s.zero {
		t.Error("the merge of two sketches is not the sketch of both's values")
	}
}
