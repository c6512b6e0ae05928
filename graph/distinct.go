package graph

import (
	"fmt"

	"github.com/axiomhq/hyperloglog"
)

// distinctPrecision is the precision of the HyperLogLog sketches that
// count a window's distinct values: 2^14 registers of a byte each once
// dense, the library's default.
const distinctPrecision = 14

// DistinctStandardError is the standard error of a distinct count
// (AggDistinct) of many values: 1.04/√2^14 of the count, about 0.81%,
// that of HyperLogLog at its precision. While its sketch is sparse — up
// to about 7,600 distinct values — a count is exact but for values whose
// hashes agree in their first 25 bits, which count as one (n²/2^26 such
// pairs are expected among n values: 0.015 among 1,000), and for the
// library's linear counting over 2^25 buckets, which rounds down by one
// from about 6,000 values on.
const DistinctStandardError = 1.04 / 128

// maxDistinctBytes bounds a distinct sketch's bytes as appendDistinct
// writes them: sparse, a header, the lengths of its two lists (20 bytes)
// and its sorted keys' list, of at most 2^14 bytes (beyond, the sketch
// turns dense); dense, 8 bytes and 2^14 registers. A window keeps at
// most this many bytes for each distinct count, and a decode refuses
// more.
const maxDistinctBytes = 20 + 1<<distinctPrecision

// newDistinct is an empty sketch of distinct values, sparse.
func newDistinct() *hyperloglog.Sketch {
	s, err := hyperloglog.NewSketch(distinctPrecision, true)
	if err != nil {
		panic(err) // distinctPrecision is one the library takes
	}
	return s
}

// appendDistinct appends s's bytes to dst: AppendBinary's, of s's keys
// not yet sorted sorted into its list first (Estimate does), so that
// sketches of the same values, sparse, write the same bytes, whatever
// order they came in.
func appendDistinct(dst []byte, s *hyperloglog.Sketch) []byte {
	s.Estimate()
	dst, _ = s.AppendBinary(dst) // fails only of a zero Sketch, which newDistinct's is not
	return dst
}

// readDistinct returns the sketch whose bytes, as AppendBinary wrote them,
// b holds, or what makes them none of distinctPrecision: the library
// checks the rest, and allocates no more than about len(b) for it.
func readDistinct(b []byte) (*hyperloglog.Sketch, error) {
	switch {
	case len(b) > maxDistinctBytes:
		return nil, fmt.Errorf("a distinct sketch of %d bytes, over %d", len(b), maxDistinctBytes)
	case len(b) > 1 && b[1] != distinctPrecision:
		return nil, fmt.Errorf("a distinct sketch of precision %d, want %d", b[1], distinctPrecision)
	}
	s := new(hyperloglog.Sketch)
	if err := s.UnmarshalBinary(b); err != nil {
		return nil, err
	}
	return s, nil
}
