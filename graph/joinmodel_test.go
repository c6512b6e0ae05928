package graph

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestJoinsFollowTheModel drives interval joins (generated bounds,
// negative, positive and around zero) and lookup joins by generated
// records of both inputs — on time, out of order and late, of three
// keys, with payloads of every type a source or an operator makes, and
// now and then one a join cannot keep — and watermarks, snapshotting
// each through its keyed state (whole or incrementally) and restoring it
// from its chain of snapshots at random. At every step it requires the
// records joined, in their order, the records refused as late or
// unmatched and those rejected, that a model holding every record gives:
// an interval join pairs every two records of a key on time whose times
// are within the bounds, once, whatever their order; a lookup join adds
// the latest table record of its key to each record, in arrival order.
// It requires too that an interval join keeps no record that nothing to
// come can join: its state is bounded.
func TestJoinsFollowTheModel(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 13))
		lookup := seed%3 == 0
		spec := IntervalJoinSpec{Prefixes: [2]string{"l_", "r_"}}
		if lower := rng.Int64N(21) - 15; !lookup {
			spec.Lower, spec.Upper = time.Duration(lower)*time.Millisecond, time.Duration(lower+rng.Int64N(16))*time.Millisecond
		}
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			run, model := newJoinRun(t, spec, lookup), &joinModel{spec: spec, lookup: lookup, wm: MinWatermark}
			for step := range 300 {
				switch n := rng.IntN(20); {
				case n == 0:
					run.restore(rng.IntN(2) == 0)
					continue
				case n == 1:
					run.snapshot(rng.IntN(2) == 0)
					continue
				case n < 5:
					wm := max(model.wm, 0) + rng.Int64N(12)
					run.watermark(wm)
					model.wm = max(model.wm, wm)
				default:
					r := Record{Key: fmt.Sprint("k", rng.IntN(3)), Time: max(model.wm, 0) - 20 + rng.Int64N(40),
						Value: float64(rng.IntN(9) - 4), Payload: randomJoinPayload(rng), Origin: rng.Uint64()}
					input := rng.IntN(2)
					err := run.record(input, r)
					if want := model.record(input, r); (err != nil) != want {
						t.Fatalf("step %d: record %d %+v: the join returned %v, the model rejects it: %v", step, input, r, err, want)
					}
				}
				got, want := run.take(), model.take()
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d (%+v, lookup %v): the join gave\n%s\nthe model\n%s", step, spec, lookup, showJoined(got), showJoined(want))
				}
				if !lookup {
					for _, key := range []string{"k0", "k1", "k2"} {
						for input := range 2 {
							if got, want := run.kept(key, input), model.kept(key, input); got != want {
								t.Fatalf("step %d: the join keeps %d records of %s from input %d, the model %d that can still join", step, got, key, input, want)
							}
						}
					}
				}
			}
		})
	}
}

// unkept is a payload no join can keep (AppendPayload refuses it).
type unkept struct{}

// randomJoinPayload is a decoded message's payload (fields of every JSON
// type, some absent, one named as a record's own value), a window's row,
// a window's result, raw bytes, none, or now and then one a join cannot
// keep.
func randomJoinPayload(rng *rand.Rand) any {
	switch rng.IntN(12) {
	case 0:
		return nil
	case 1:
		return []byte("raw")
	case 2:
		return WindowRow{Start: 10, End: 20, Count: 3, Names: []string{"avg", "n"}, Values: []float64{1.5, 3}}
	case 3:
		return WindowResult{Start: 0, End: 10, Count: 2}
	case 4:
		if rng.IntN(3) == 0 {
			return unkept{}
		}
	}
	values := []any{nil, 2.5, -1.0, "on", "", true, false, map[string]any{"deep": []any{1.0, "x"}}, []any{}, map[string]any{}}
	m := map[string]any{}
	for _, f := range []string{"temp", "site", "value", "time"} {
		if rng.IntN(3) > 0 {
			m[f] = values[rng.IntN(len(values))]
		}
	}
	return m
}

// joined is a record a join gave, or what the model expects of one; a
// late, unmatched or rejected record is one with only key, time and why.
type joined struct {
	why     string // "", late or unmatched
	key     string
	time    int64
	value   float64
	origin  uint64
	payload map[string]any
}

func showJoined(js []joined) string {
	var b strings.Builder
	for _, j := range js {
		fmt.Fprintf(&b, "%s %s@%d %v o=%d %v\n", j.why, j.key, j.time, j.value, j.origin, j.payload)
	}
	return b.String()
}

// joinRun is a join run step by step, what it gives collected.
type joinRun struct {
	t       *testing.T
	spec    IntervalJoinSpec
	lookup  bool
	out     *recorder
	state   *TaskState
	op      Operator
	refused []joined
	chain   []*SubtaskSnapshot
	base    Version
}

func newJoinRun(t *testing.T, spec IntervalJoinSpec, lookup bool) *joinRun {
	r := &joinRun{t: t, spec: spec, lookup: lookup, out: &recorder{}}
	r.open(nil)
	return r
}

func (r *joinRun) open(snap *SubtaskSnapshot) {
	r.state = NewTaskState(TaskInfo{Operator: "j", Parallelism: 1}, r.out)
	if snap != nil {
		r.state.Restore([]*SubtaskSnapshot{snap})
	}
	refuse := func(why string) func(*Record) {
		return func(rec *Record) { r.refused = append(r.refused, joined{why: why, key: rec.Key, time: rec.Time}) }
	}
	if r.lookup {
		r.op = LookupJoin("r_", refuse("unmatched"))(0)
	} else {
		spec := r.spec
		spec.OnLate = refuse("late")
		r.op = IntervalJoin(spec)(0)
	}
	if err := r.op.Open(r.state.Context()); err != nil {
		r.t.Fatal(err)
	}
}

func (r *joinRun) snapshot(incremental bool) {
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

func (r *joinRun) restore(incremental bool) {
	r.snapshot(incremental)
	snap, err := MergeChain(r.chain)
	if err != nil {
		r.t.Fatal(err)
	}
	r.open(snap)
	r.chain, r.base = nil, 0
}

// record processes rec on input, returning the RecordError that rejects
// it.
func (r *joinRun) record(input int, rec Record) error {
	r.state.SetKey(rec.Key)
	err := r.op.ProcessRecord(input, &rec)
	if _, rejected := errors.AsType[*RecordError](err); err != nil && !rejected {
		r.t.Fatal(err)
	}
	if r.state.Err() != nil {
		r.t.Fatal(r.state.Err())
	}
	return err
}

func (r *joinRun) watermark(wm int64) {
	if _, err := r.state.AdvanceWatermark(wm, r.op); err != nil {
		r.t.Fatal(err)
	}
}

// take returns and forgets what the join gave since it was last asked.
func (r *joinRun) take() []joined {
	out := r.refused
	for _, rec := range r.out.got {
		out = append(out, joined{key: rec.Key, time: rec.Time, value: rec.Value, origin: rec.Origin, payload: rec.Payload.(map[string]any)})
	}
	r.out.got, r.refused = nil, nil
	return out
}

// kept is how many records of key from input an interval join keeps.
func (r *joinRun) kept(key string, input int) int {
	r.state.SetKey(key)
	n := 0
	kept, _ := r.op.(*intervalJoinOp).sides[input].Get()
	for range eachJoined(kept) {
		n++
	}
	return n
}

// joinModel is the joins' contract, kept plainly: every record that was
// on time, forever, and the pairs made of them as records come.
type joinModel struct {
	spec   IntervalJoinSpec
	lookup bool
	wm     int64
	recs   [2][]Record // on time, in arrival order; a lookup's table: every record
	out    []joined
}

func (m *joinModel) record(input int, r Record) (rejected bool) {
	_, cannot := r.Payload.(unkept)
	if m.lookup {
		if input == 1 {
			if cannot {
				return true
			}
			m.recs[1] = append(m.recs[1], r)
			return false
		}
		var table *Record
		for i := range m.recs[1] {
			if m.recs[1][i].Key == r.Key {
				table = &m.recs[1][i] // the latest to come
			}
		}
		if table == nil {
			m.out = append(m.out, joined{why: "unmatched", key: r.Key, time: r.Time})
			return false
		}
		m.out = append(m.out, joined{key: r.Key, time: r.Time, value: r.Value, origin: r.Origin,
			payload: modelFields(modelFields(map[string]any{}, "", r, false), "r_", *table, true)})
		return false
	}
	if m.wm != MinWatermark && r.Time <= m.wm {
		m.out = append(m.out, joined{why: "late", key: r.Key, time: r.Time})
		return false
	}
	if cannot {
		return true // a record on time, which the join would keep
	}
	lower, upper := m.spec.Lower.Milliseconds(), m.spec.Upper.Milliseconds()
	for _, o := range m.recs[1-input] {
		left, right := r, o
		if input == 1 {
			left, right = o, r
		}
		if o.Key != r.Key || right.Time < left.Time+lower || right.Time > left.Time+upper {
			continue
		}
		m.out = append(m.out, joined{key: r.Key, time: max(left.Time, right.Time), value: left.Value,
			payload: modelFields(modelFields(map[string]any{}, "l_", left, true), "r_", right, true)})
	}
	m.recs[input] = append(m.recs[input], r)
	return false
}

// modelFields adds to m the fields of r, as expressions see them, named
// with prefix, and its value and time if withOwn.
func modelFields(m map[string]any, prefix string, r Record, withOwn bool) map[string]any {
	switch p := r.Payload.(type) {
	case map[string]any:
		for k, v := range p {
			m[prefix+k] = v
		}
	case WindowRow:
		m[prefix+"avg"], m[prefix+"n"] = p.Values[0], p.Values[1]
		m[prefix+"start"], m[prefix+"end"], m[prefix+"count"] = float64(p.Start), float64(p.End), float64(p.Count)
	}
	if withOwn {
		m[prefix+"value"], m[prefix+"time"] = r.Value, float64(r.Time)
	}
	return m
}

func (m *joinModel) take() []joined {
	out := m.out
	m.out = nil
	return out
}

// kept is how many records of key from input can still join one to come:
// those whose time is within the bounds of a time after the watermark.
func (m *joinModel) kept(key string, input int) int {
	n := 0
	for _, r := range m.recs[input] {
		expiry := r.Time + m.spec.Upper.Milliseconds()
		if input == 1 {
			expiry = r.Time - m.spec.Lower.Milliseconds()
		}
		if r.Key == key && (m.wm == MinWatermark || expiry > m.wm) {
			n++
		}
	}
	return n
}
