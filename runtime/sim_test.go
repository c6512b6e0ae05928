package runtime

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cairn-edge/cairn/graph"
)

var (
	simSeeds = flag.Int("sim.seeds", 300, "number of seeds each simulation test runs")
	simSeed  = flag.Uint64("sim.seed", 0, "run only this seed")
)

// The simulation runs random topologies on a deterministic, seeded scheduler
// that crashes the job at random points and restores it from the newest
// completed checkpoint, then compares the final keyed state with a
// failure-free run of the same topology and input (invariant I5).
//
// Its operators are chosen so that the final state does not depend on how
// channels interleave: keyed sums and counts, linear maps, a join that emits
// per record the record's value times the other side's sum so far (whose
// total is the sum over all pairs), and a timer operator that parks values
// until an event-time timer flushes them. Arithmetic is modulo a prime, so
// every value stays exact in a float64 and sums do not depend on order. Any
// difference from the reference is therefore a lost or duplicated record, or
// a lost timer.

// modulus keeps simulated values below 2^20, so products stay exact.
const modulus = 1_000_003

func mod(v float64) float64 { return float64(int64(v) % modulus) }

// randomTopology returns a constructor of a random topology; every call
// builds the same one, with fresh operator instances.
func randomTopology(seed uint64) func() *graph.Topology {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	type source struct {
		records []graph.Record
		par     int
	}
	sources := make([]source, 1+rng.IntN(3))
	for i := range sources {
		recs := make([]graph.Record, 100+rng.IntN(200))
		for j := range recs {
			recs[j] = graph.Record{Key: fmt.Sprintf("k%d", rng.IntN(8)), Value: float64(1 + rng.IntN(9)), Time: int64(rng.IntN(60))}
		}
		sources[i] = source{records: recs, par: 1 + rng.IntN(3)}
	}
	type op struct {
		kind, par int
		a, b      int // inputs, as indexes into the streams so far
		forward   bool
		mul, add  float64
		rekey     bool
	}
	var ops []op
	joins := 0
	for i := range 1 + rng.IntN(4) {
		o := op{kind: rng.IntN(4), par: 1 + rng.IntN(3), a: rng.IntN(len(sources) + i), b: rng.IntN(len(sources) + i),
			forward: rng.IntN(2) == 0, mul: float64(1 + rng.IntN(2)), add: float64(rng.IntN(3)), rekey: rng.IntN(2) == 0}
		if o.kind == 3 {
			if joins == 2 {
				o.kind = 1
			}
			joins++
		}
		ops = append(ops, o)
	}
	timerEnd := rng.IntN(2) == 0
	// Few key groups: a snapshot goes through each, thousands of times a
	// run, and a subtask's share of them is uneven more often.
	groups := graph.WithMaxParallelism(3 + rng.IntN(14))

	return func() *graph.Topology {
		type stream struct {
			s    graph.Stream
			id   string
			par  int
			read bool
		}
		var b graph.Builder
		var ss []*stream
		for i, src := range sources {
			id := fmt.Sprintf("src%d", i)
			ss = append(ss, &stream{s: b.Source(id, src.par, graph.SliceSource(src.records), graph.WithWatermarks(3*time.Millisecond), groups), id: id, par: src.par})
		}
		for i, o := range ops {
			id := fmt.Sprintf("op%d", i)
			x, y := ss[o.a], ss[o.b]
			x.read = true
			var s graph.Stream
			par := o.par
			switch o.kind {
			case 0: // map
				part := graph.Rebalance()
				if o.forward {
					par, part = x.par, graph.Forward()
				}
				mul, add, rekey := o.mul, o.add, o.rekey
				s = b.Operator(id, par, graph.Map(func(r *graph.Record) {
					r.Value = mod(r.Value*mul + add)
					if rekey {
						r.Key = fmt.Sprintf("k%d", (int(r.Key[1]-'0')*3+1)%8)
					}
				}), []graph.Input{graph.In(x.s, part)}, groups)
			case 1: // keyed tap
				s = b.Operator(id, par, newTap, []graph.Input{graph.In(x.s, graph.Hash(nil))}, groups)
			case 2: // union
				y.read = true
				s = b.Operator(id, par, graph.Union(), []graph.Input{graph.In(x.s, graph.Rebalance()), graph.In(y.s, graph.Hash(nil))}, groups)
			case 3: // keyed pair join
				y.read = true
				s = b.Operator(id, par, newPairJoin, []graph.Input{graph.In(x.s, graph.Hash(nil)), graph.In(y.s, graph.Hash(nil))}, groups)
			}
			ss = append(ss, &stream{s: s, id: id, par: par})
		}
		// Every stream nobody reads ends in keyed state.
		timer := timerEnd
		for _, st := range ss {
			if st.read {
				continue
			}
			newOp := newTap
			if timer {
				newOp, timer = newTimerFlush, false
			}
			b.Operator("end-"+st.id, 2, newOp, []graph.Input{graph.In(st.s, graph.Hash(nil))}, groups)
		}
		topo, err := b.Build()
		if err != nil {
			panic(fmt.Sprintf("seed %d: invalid random topology: %v", seed, err))
		}
		return topo
	}
}

// tap sums and counts values per key and passes every record on. Its
// "odd" state exists only while a key has seen an odd number of records:
// it is deleted every other record, so a snapshot that lost a deletion
// shows.
type tap struct {
	graph.BaseOperator
	ctx             *graph.Context
	sum, count, odd *graph.ValueState[float64]
}

func newTap(int) graph.Operator { return &tap{} }

func (t *tap) Open(ctx *graph.Context) (err error) {
	t.ctx = ctx
	if t.sum, err = graph.NewValueState(ctx, "sum", graph.Float64Codec{}); err != nil {
		return err
	}
	if t.count, err = graph.NewValueState(ctx, "count", graph.Float64Codec{}); err != nil {
		return err
	}
	t.odd, err = graph.NewValueState(ctx, "odd", graph.Float64Codec{})
	return err
}

func (t *tap) ProcessRecord(_ int, r *graph.Record) error {
	s, _ := t.sum.Get()
	t.sum.Set(mod(s + r.Value))
	c, _ := t.count.Get()
	t.count.Set(c + 1)
	if _, ok := t.odd.Get(); ok {
		t.odd.Delete()
	} else {
		t.odd.Set(1)
	}
	t.ctx.Emit(r)
	return nil
}

// pairJoin emits, per record, its value times the other input's sum so far
// for its key: over a whole run, the emitted values add up to the sum of
// a*b over all pairs, whatever the order of arrival.
type pairJoin struct {
	graph.BaseOperator
	ctx  *graph.Context
	side [2]*graph.ValueState[float64]
	out  graph.Record
}

func newPairJoin(int) graph.Operator { return &pairJoin{} }

func (j *pairJoin) Open(ctx *graph.Context) (err error) {
	j.ctx = ctx
	if j.side[0], err = graph.NewValueState(ctx, "left", graph.Float64Codec{}); err != nil {
		return err
	}
	j.side[1], err = graph.NewValueState(ctx, "right", graph.Float64Codec{})
	return err
}

func (j *pairJoin) ProcessRecord(input int, r *graph.Record) error {
	mine, _ := j.side[input].Get()
	j.side[input].Set(mod(mine + r.Value))
	other, _ := j.side[1-input].Get()
	j.out = graph.Record{Key: r.Key, Time: r.Time, Value: mod(r.Value * other)}
	j.ctx.Emit(&j.out)
	return nil
}

// timerFlush parks values per key until an event-time timer flushes them
// to "flushed". A key has a timer 5 ms after the newest event time it has
// seen, registered only when that moves or the last one has fired: a restore
// that lost a timer leaves the key's values parked. After the final
// watermark, "parked" is 0 and "flushed" the sum of all values.
type timerFlush struct {
	graph.BaseOperator
	ctx                  *graph.Context
	parked, flushed, due *graph.ValueState[float64]
}

func newTimerFlush(int) graph.Operator { return &timerFlush{} }

func (t *timerFlush) Open(ctx *graph.Context) (err error) {
	t.ctx = ctx
	for name, s := range map[string]**graph.ValueState[float64]{"parked": &t.parked, "flushed": &t.flushed, "due": &t.due} {
		if *s, err = graph.NewValueState(ctx, name, graph.Float64Codec{}); err != nil {
			return err
		}
	}
	return nil
}

func (t *timerFlush) ProcessRecord(_ int, r *graph.Record) error {
	p, _ := t.parked.Get()
	t.parked.Set(mod(p + r.Value))
	due, ok := t.due.Get()
	if ok && int64(due) > t.ctx.Watermark() {
		if r.Time+5 <= int64(due) {
			return nil // the pending timer will flush this value
		}
		t.ctx.DeleteEventTimer(int64(due))
	}
	t.due.Set(float64(r.Time + 5))
	t.ctx.RegisterEventTimer(r.Time + 5)
	return nil
}

func (t *timerFlush) OnTimer(ts int64) error {
	p, _ := t.parked.Get()
	f, _ := t.flushed.Get()
	t.flushed.Set(mod(f + p))
	t.parked.Set(0)
	if due, _ := t.due.Get(); int64(due) == ts {
		t.due.Delete()
	}
	return nil
}

// witnessTopology is one source of readings whose times mostly rise,
// through a map, to a keyed watermarkWitness: one channel into each
// subtask, so a failure-free run decides what each record meets.
func witnessTopology(seed uint64) func() *graph.Topology {
	rng := rand.New(rand.NewPCG(seed, 0x3a7e))
	recs := make([]graph.Record, 100+rng.IntN(200))
	for j := range recs {
		recs[j] = graph.Record{Key: fmt.Sprintf("k%d", rng.IntN(8)), Value: 1, Time: int64(j/4 + rng.IntN(6))}
	}
	return func() *graph.Topology {
		var b graph.Builder
		src := b.Source("src", 1, graph.SliceSource(recs), graph.WithWatermarks(2*time.Millisecond))
		mapped := b.Operator("map", 1, graph.Map(func(*graph.Record) {}), []graph.Input{graph.In(src, graph.Forward())})
		b.Operator("witness", 2, newWatermarkWitness, []graph.Input{graph.In(mapped, graph.Hash(nil))}, graph.WithMaxParallelism(8))
		topo, err := b.Build()
		if err != nil {
			panic(err)
		}
		return topo
	}
}

// watermarkWitness keeps, per key, a sum over its records of a mix of
// each one's time and the watermark it met: two runs end equal only if
// every record met the same event time in both.
type watermarkWitness struct {
	graph.BaseOperator
	ctx  *graph.Context
	seen *graph.ValueState[float64]
}

func newWatermarkWitness(int) graph.Operator { return &watermarkWitness{} }

func (w *watermarkWitness) Open(ctx *graph.Context) (err error) {
	w.ctx = ctx
	w.seen, err = graph.NewValueState(ctx, "seen", graph.Float64Codec{})
	return err
}

func (w *watermarkWitness) ProcessRecord(_ int, r *graph.Record) error {
	met := max(w.ctx.Watermark(), -1) + 1 // 0 before any watermark
	s, _ := w.seen.Get()
	w.seen.Set(mod(s + mod(float64(r.Time*1009+met))))
	return nil
}
