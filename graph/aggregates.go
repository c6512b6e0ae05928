package graph

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// The aggregates only a window with many (WindowSpec.Aggregates) makes,
// beside AggCount to AggLast.
const (
	// AggStddev is the population standard deviation of the values.
	AggStddev Aggregate = AggLast + 1 + iota
	// AggQuantile is the NamedAggregate.Quantile of the values, from a
	// sketch whose error is bounded relative to the value
	// (QuantileRelativeAccuracy).
	AggQuantile
	// AggDistinct is how many distinct values the argument gave, of
	// their hashes (WindowSpec.Args), counted by a HyperLogLog sketch
	// within DistinctStandardError.
	AggDistinct
)

// QuantileRelativeAccuracy bounds a quantile's error: the value a
// window gives for quantile q is within this fraction of the true
// q-quantile of its values (DDSketch's relative-error guarantee).
const QuantileRelativeAccuracy = 0.01

// NamedAggregate is one of the results of a window with many.
type NamedAggregate struct {
	// Name is the result's name in the WindowRow.
	Name string
	// Func is what is made of the argument's values: AggCount (of the
	// records; Arg is ignored) to AggLast, AggStddev, AggQuantile or
	// AggDistinct.
	Func Aggregate
	// Quantile is AggQuantile's q, in [0, 1].
	Quantile float64
	// Arg is the index, in what WindowSpec.Args fills, of the value it
	// aggregates: in args, or for AggDistinct in hashes.
	Arg int
}

// WindowRow is the Payload of the output record of a window with many
// aggregates: the record's Key is the window's key, its Time the window's
// last millisecond and its Value 0.
type WindowRow struct {
	Start, End int64 // [Start, End) in milliseconds
	Count      int64 // the records in the window
	// Names are the aggregates' names, in WindowSpec.Aggregates' order
	// (shared by every row of the operator: never modify), and Values
	// their results, in the same order.
	Names  []string
	Values []float64
}

// checkAggregates reports the first of w.Aggregates that cannot work.
func (w WindowSpec) checkAggregates() error {
	switch {
	case w.NArgs < 0:
		return fmt.Errorf("%d arguments", w.NArgs)
	case w.NHashes < 0:
		return fmt.Errorf("%d hashed arguments", w.NHashes)
	case w.NArgs+w.NHashes > 0 && w.Args == nil:
		return errors.New("aggregates of arguments, and no Args to read them")
	}
	named := make(map[string]bool, len(w.Aggregates))
	for _, a := range w.Aggregates {
		switch {
		case a.Name == "":
			return errors.New("an aggregate has no name")
		case named[a.Name]:
			return fmt.Errorf("two aggregates are named %q", a.Name)
		case a.Func > AggDistinct:
			return fmt.Errorf("aggregate %q: unknown function", a.Name)
		case a.Func == AggQuantile && !(a.Quantile >= 0 && a.Quantile <= 1):
			return fmt.Errorf("aggregate %q: quantile %v is not in [0, 1]", a.Name, a.Quantile)
		case a.Func == AggDistinct && (a.Arg < 0 || a.Arg >= w.NHashes):
			return fmt.Errorf("aggregate %q: hashed argument %d of %d", a.Name, a.Arg, w.NHashes)
		case a.Func != AggCount && a.Func != AggDistinct && (a.Arg < 0 || a.Arg >= w.NArgs):
			return fmt.Errorf("aggregate %q: argument %d of %d", a.Name, a.Arg, w.NArgs)
		}
		named[a.Name] = true
	}
	return nil
}

// rowLayout is what each window of an operator with many aggregates keeps
// of its records besides their count, and where each aggregate's result
// is: floats (partials), sketches and distinct sketches, each once
// however many aggregates read it (the sum of a sum and an avg of one
// argument, the sketch of every quantile of one argument), ordered by
// argument and kind, so that
// aggregates listed in another order keep the same. Only a first or last
// needs the window's first and last event times.
type rowLayout struct {
	aggs     []NamedAggregate
	names    []string // every WindowRow's Names
	partials []partial
	// sketched are the Args of the sketches, and counted those (in
	// hashes) of the distinct sketches.
	sketched, counted []int
	times             bool
	// at is, per aggregate, the index of its partial (of the mean, for a
	// stddev: its M2 is the next) or, for a quantile, of its sketch, or
	// for a distinct count of its distinct sketch.
	at []int
	// readBy names, per argument, an aggregate that reads it, for errors.
	readBy []string
}

// partial is a float each window keeps: what kind of partial result of
// which argument.
type partial struct {
	kind partialKind
	arg  int
}

type partialKind uint8

const (
	partialSum partialKind = iota
	partialMin
	partialMax
	partialFirst
	partialLast
	partialMean // Welford's running mean, for a stddev,
	partialM2   // and sum of the squares of the differences from it
)

// partialOf is the partial that holds an aggregate's result, or the
// first of them.
var partialOf = map[Aggregate]partialKind{AggSum: partialSum, AggAvg: partialSum, AggMin: partialMin, AggMax: partialMax,
	AggFirst: partialFirst, AggLast: partialLast, AggStddev: partialMean}

// newRowLayout lays out the windows of aggs, which read nargs arguments
// and are valid (WindowSpec.Validate).
func newRowLayout(aggs []NamedAggregate, nargs int) *rowLayout {
	l := &rowLayout{aggs: aggs, at: make([]int, len(aggs)), readBy: make([]string, nargs)}
	for _, a := range aggs {
		l.names = append(l.names, a.Name)
		switch {
		case a.Func == AggCount:
			continue
		case a.Func == AggDistinct:
			l.counted = append(l.counted, a.Arg)
			continue // its argument, a hash, is read by none that can fail
		case a.Func == AggQuantile:
			l.sketched = append(l.sketched, a.Arg)
		case a.Func == AggStddev:
			l.partials = append(l.partials, partial{partialMean, a.Arg}, partial{partialM2, a.Arg})
		default:
			l.partials = append(l.partials, partial{partialOf[a.Func], a.Arg})
			l.times = l.times || a.Func == AggFirst || a.Func == AggLast
		}
		if l.readBy[a.Arg] == "" {
			l.readBy[a.Arg] = a.Name
		}
	}
	slices.SortFunc(l.partials, func(a, b partial) int { return cmp.Or(cmp.Compare(a.arg, b.arg), cmp.Compare(a.kind, b.kind)) })
	l.partials = slices.Compact(l.partials)
	slices.Sort(l.sketched)
	l.sketched = slices.Compact(l.sketched)
	slices.Sort(l.counted)
	l.counted = slices.Compact(l.counted)
	for i, a := range aggs {
		switch a.Func {
		case AggCount:
		case AggDistinct:
			l.at[i] = slices.Index(l.counted, a.Arg)
		case AggQuantile:
			l.at[i] = slices.Index(l.sketched, a.Arg)
		default:
			l.at[i] = slices.Index(l.partials, partial{partialOf[a.Func], a.Arg})
		}
	}
	return l
}

// stateName is the name of keyed state base of windows of this layout:
// base with what they keep, so that a restore with aggregates that keep
// other things starts the windows afresh rather than misreading them.
func (l *rowLayout) stateName(base string) string {
	var b strings.Builder
	b.WriteString(base)
	b.WriteString(" of")
	if l.times {
		b.WriteString(" times")
	}
	for _, s := range l.partials {
		fmt.Fprintf(&b, " %s(%d)", partialNames[s.kind], s.arg)
	}
	for _, arg := range l.sketched {
		fmt.Fprintf(&b, " sketch(%d)", arg)
	}
	for _, arg := range l.counted {
		fmt.Fprintf(&b, " distinct(%d)", arg)
	}
	return b.String()
}

var partialNames = []string{partialSum: "sum", partialMin: "min", partialMax: "max", partialFirst: "first", partialLast: "last",
	partialMean: "mean", partialM2: "m2"}

// newWindow is an empty window of span, with its partials and sketches.
func (l *rowLayout) newWindow(span [2]int64) windowAcc {
	w := windowAcc{start: span[0], end: span[1],
		partials: make([]float64, len(l.partials)), sketches: make([]sketch, len(l.sketched))}
	for range l.counted {
		w.distincts = append(w.distincts, newDistinct())
	}
	return w
}

// add adds a record at t, of arguments args and hashes, to w.
func (l *rowLayout) add(w *windowAcc, t int64, args []float64, hashes []uint64) {
	n := w.count // before this record
	first, last := n == 0 || t < w.firstTime, n == 0 || t >= w.lastTime
	for i, part := range l.partials {
		v, p := args[part.arg], &w.partials[i]
		switch part.kind {
		case partialSum:
			*p += v
		case partialMin:
			*p = min(*p, v)
			if n == 0 {
				*p = v
			}
		case partialMax:
			*p = max(*p, v)
			if n == 0 {
				*p = v
			}
		case partialFirst:
			if first {
				*p = v
			}
		case partialLast:
			if last {
				*p = v
			}
		case partialMean: // Welford's update, of the M2 after it too
			mean, m2 := p, &w.partials[i+1]
			delta := v - *mean
			*mean += delta / float64(n+1)
			*m2 += delta * (v - *mean)
		}
	}
	for j, arg := range l.sketched {
		w.sketches[j].add(args[arg])
	}
	for j, arg := range l.counted {
		w.distincts[j].InsertHash(hashes[arg])
	}
	if l.times {
		if first {
			w.firstTime = t
		}
		if last {
			w.lastTime = t
		}
	}
	w.count++
}

// merge merges b's records into a's partials and sketches, before a.merge
// merges the rest: it reads both windows' counts and times.
func (l *rowLayout) merge(a, b *windowAcc) {
	for i, part := range l.partials {
		p, v := &a.partials[i], b.partials[i]
		switch part.kind {
		case partialSum:
			*p += v
		case partialMin:
			*p = min(*p, v)
		case partialMax:
			*p = max(*p, v)
		case partialFirst:
			if b.firstTime < a.firstTime {
				*p = v
			}
		case partialLast:
			if b.lastTime >= a.lastTime {
				*p = v
			}
		case partialMean: // Chan et al.'s pairwise update, of the M2 after it too
			na, nb := float64(a.count), float64(b.count)
			delta := v - *p
			*p += delta * nb / (na + nb)
			a.partials[i+1] += b.partials[i+1] + delta*delta*na*nb/(na+nb)
		}
	}
	for j := range a.sketches {
		a.sketches[j].merge(&b.sketches[j])
	}
	for j := range a.distincts {
		_ = a.distincts[j].Merge(b.distincts[j]) // of one precision, distinctPrecision
	}
}

// check returns the error that rejects a record whose arguments made a
// float of a window it changed (touched, in ws) no finite number: a sum,
// or a stddev's mean or M2, that overflowed.
func (l *rowLayout) check(key string, ws []windowAcc) error {
	for _, w := range ws {
		if !w.touched {
			continue
		}
		for i, v := range w.partials {
			if !math.IsInf(v, 0) && !math.IsNaN(v) {
				continue
			}
			p, what := l.partials[i], "sum"
			if p.kind == partialMean || p.kind == partialM2 {
				what = "stddev"
			}
			return Reject(fmt.Errorf("key %q: the record makes the %s of what %s reads in the window [%d, %d) no finite number: the record is left out",
				key, what, l.readBy[p.arg], w.start, w.end))
		}
	}
	return nil
}

// results are w's aggregates, in l.aggs' order.
func (l *rowLayout) results(w *windowAcc, q *sketchQuery) []float64 {
	out := make([]float64, len(l.aggs))
	n := float64(w.count)
	for i, a := range l.aggs {
		switch a.Func {
		case AggCount:
			out[i] = n
		case AggAvg:
			out[i] = w.partials[l.at[i]] / n
		case AggStddev:
			out[i] = math.Sqrt(w.partials[l.at[i]+1] / n)
		case AggQuantile: // below, a sketch at a time
		case AggDistinct:
			out[i] = float64(w.distincts[l.at[i]].Estimate())
		default:
			out[i] = w.partials[l.at[i]]
		}
	}
	for j := range l.sketched {
		loaded := false
		for i, a := range l.aggs {
			if a.Func == AggQuantile && l.at[i] == j {
				if !loaded {
					q.load(&w.sketches[j])
					loaded = true
				}
				out[i] = q.quantile(a.Quantile)
			}
		}
	}
	return out
}
