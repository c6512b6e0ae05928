package graph

import (
	"bytes"
	"math"
	"testing"
)

// TestDistinctStateIsBounded: a distinct sketch of n values, each added
// three times, takes 24 bytes for one value and grows under 3 bytes a
// value while sparse, never past maxDistinctBytes; it counts exactly while
// sparse, within 3 standard errors (DistinctStandardError) once dense;
// decodes to a sketch of the same bytes and count; and two sketches of
// halves of the values, one of them dense, merge to one of the whole
// within the bound.
func TestDistinctStateIsBounded(t *testing.T) {
	for _, c := range []struct {
		n         uint64
		sizeBelow int // bytes
	}{{1, 25}, {10, 60}, {1000, 3000}, {3000, maxDistinctBytes + 1}, {100_000, maxDistinctBytes + 1}} {
		s := newDistinct()
		for range 3 {
			for i := range c.n {
				s.InsertHash(testHash(i))
			}
		}
		enc := appendDistinct(nil, s)
		if len(enc) >= c.sizeBelow || len(enc) > maxDistinctBytes {
			t.Errorf("%d values take %d bytes, want under %d", c.n, len(enc), c.sizeBelow)
		}
		got, want := float64(s.Estimate()), float64(c.n)
		dense := len(enc) == 8+1<<distinctPrecision
		if !dense && got != want || math.Abs(got-want) > 3*DistinctStandardError*want {
			t.Errorf("%d values (dense %v) count %v", c.n, dense, got)
		}
		t.Logf("%d values: %d bytes, dense %v, count %v", c.n, len(enc), dense, got)
		back, err := readDistinct(enc)
		if err != nil {
			t.Fatal(err)
		}
		if float64(back.Estimate()) != got || !bytes.Equal(appendDistinct(nil, back), enc) {
			t.Errorf("%d values decode to a sketch of %d", c.n, back.Estimate())
		}
		if c.n < 2 {
			continue
		}
		low, high := newDistinct(), newDistinct()
		for i := range c.n {
			if i < c.n/2 {
				low.InsertHash(testHash(i))
			} else {
				high.InsertHash(testHash(i))
			}
		}
		if err := low.Merge(high); err != nil {
			t.Fatal(err)
		}
		if merged := float64(low.Estimate()); math.Abs(merged-want) > 3*DistinctStandardError*want {
			t.Errorf("halves of %d values merge to a count of %v", c.n, merged)
		}
	}
}
