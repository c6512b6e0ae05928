package graph

import (
	"slices"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/store"
)

// sketchBins bounds a quantile sketch: the bins of its positive values, and
// those of its negative values' magnitudes, each span at most this many of
// the mapping's indexes. A value below that span of its sign counts in the
// span's lowest bin, as in DDSketch's collapsing-lowest store: so a sketch
// holds at most 2 × 2048 bins, and the error bound (QuantileRelativeAccuracy)
// holds for a quantile whose value is within a factor of γ^2048 ≈ 6·10^17
// (γ = 1.0202) of the largest magnitude of its sign among the window's
// values; below that, the quantile reads as that range's lowest bin.
const sketchBins = 2048

// quantileMapping maps a value's magnitude to its bin: DDSketch's
// logarithmic mapping for QuantileRelativeAccuracy, whose bin holds the
// values within that fraction of the value it gives back for the bin.
var quantileMapping = func() mapping.IndexMapping {
	m, err := mapping.NewLogarithmicMapping(QuantileRelativeAccuracy)
	if err != nil {
		panic(err)
	}
	return m
}()

// The indexes of quantileMapping's bins of the values it can map.
var (
	minSketchIndex = quantileMapping.Index(quantileMapping.MinIndexableValue())
	maxSketchIndex = quantileMapping.Index(quantileMapping.MaxIndexableValue())
)

// sketchHolds reports whether a sketch can count v: a finite value of a
// magnitude up to about 1.26·10^308 (quantileMapping's largest).
func sketchHolds(v float64) bool {
	return v >= -quantileMapping.MaxIndexableValue() && v <= quantileMapping.MaxIndexableValue()
}

// sketch is a DDSketch of one argument's values in a window, kept as its
// bins: zero counts the values too near 0 for the mapping to tell (under
// 2.3·10^-308 in magnitude, which read as 0), pos the bins of the positive
// values and neg those of the negative values' magnitudes, each sorted by
// index with no empty bin, spanning at most sketchBins indexes. Values
// are mapped, and quantiles read (sketchQuery), by the DDSketch library;
// the sketch only keeps the counts.
type sketch struct {
	zero     uint64
	pos, neg []sketchBin
	// packed, if not nil, holds zero, pos and neg in format 3 (rowsCodec),
	// as a decode left them, until the sketch is read or merged (add
	// writes its value into them, as addPacked says); then pos and neg are
	// read into pieces of the decode's slabs.bins.
	packed []byte
	slabs  *rowSlabs
}

// sketchBin is the count of one of quantileMapping's bins.
type sketchBin struct {
	index int
	count uint64
}

// add counts v, which sketchHolds.
func (s *sketch) add(v float64) {
	if s.packed != nil && s.addPacked(v) {
		return
	}
	s.unpack()
	switch m := quantileMapping; {
	case v > m.MinIndexableValue():
		s.pos = addBin(s.pos, m.Index(v), 1)
	case v < -m.MinIndexableValue():
		s.neg = addBin(s.neg, m.Index(-v), 1)
	default:
		s.zero++
	}
}

// merge adds o's counts to s's.
func (s *sketch) merge(o *sketch) {
	s.unpack()
	o.unpack()
	s.zero += o.zero
	for _, b := range o.pos {
		s.pos = addBin(s.pos, b.index, b.count)
	}
	for _, b := range o.neg {
		s.neg = addBin(s.neg, b.index, b.count)
	}
}

// total is the number of values s, unpacked, counted.
func (s *sketch) total() uint64 {
	n := s.zero
	for _, b := range s.pos {
		n += b.count
	}
	for _, b := range s.neg {
		n += b.count
	}
	return n
}

// addBin adds count to bin index of bins, then folds the bins below the
// span of sketchBins that ends at the highest into the span's lowest.
func addBin(bins []sketchBin, index int, count uint64) []sketchBin {
	i, found := slices.BinarySearchFunc(bins, index, func(b sketchBin, index int) int { return b.index - index })
	if found {
		bins[i].count += count
		return bins
	}
	bins = slices.Insert(bins, i, sketchBin{index, count})
	low := bins[len(bins)-1].index - sketchBins + 1
	if bins[0].index >= low {
		return bins
	}
	j, found := slices.BinarySearchFunc(bins, low, func(b sketchBin, index int) int { return b.index - index })
	var folded uint64
	for _, b := range bins[:j] {
		folded += b.count
	}
	if !found {
		j--
		bins[j] = sketchBin{low, 0}
	}
	bins[j].count += folded
	return append(bins[:0], bins[j:]...)
}

// sketchQuery reads the quantiles of sketches with the DDSketch library:
// one sketch of it, refilled with each sketch's counts, so that reading
// them allocates nothing once its stores have grown.
type sketchQuery struct{ dd *ddsketch.DDSketch }

// load makes s the sketch that quantile reads.
func (q *sketchQuery) load(s *sketch) {
	if q.dd == nil {
		q.dd = ddsketch.NewDDSketch(quantileMapping, store.NewDenseStore(), store.NewDenseStore())
	}
	q.dd.Clear()
	s.unpack()
	pos, neg := q.dd.GetPositiveValueStore(), q.dd.GetNegativeValueStore()
	for _, b := range s.pos {
		pos.AddWithCount(b.index, float64(b.count))
	}
	for _, b := range s.neg {
		neg.AddWithCount(b.index, float64(b.count))
	}
	q.dd.AddWithCount(0, float64(s.zero)) // counted as zero
}

// quantile is the p-quantile of the sketch loaded, which must count a
// value: DDSketch's value of rank p(n−1) among the n values sorted
// (0-based; of two values the rank falls between, the lower one among the
// positive values and the upper one among the negative ones), within
// QuantileRelativeAccuracy of it.
func (q *sketchQuery) quantile(p float64) float64 {
	v, _ := q.dd.GetValueAtQuantile(p) // p is in [0, 1], and the sketch counts a value
	return v
}
