package graph

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/cairn-edge/cairn/wire"
)

// windowsCodec encodes a key's open windows, which are most of a window
// operator's memory and snapshots: a key with one window of one record
// takes about 25 bytes (68 in format 1).
//
// Format 2 starts with windowsFormat2, then the uvarint number of windows,
// each as
//
//	uvarint flags (windowFlag...), varint start, varint end - start,
//	varint count, varint firstTime - start,
//	[varint lastTime - firstTime], float64 first, [float64 last],
//	[float64 min], [float64 max], [float64 sum]
//
// where a bracketed field is there only when the flags do not say it
// equals another (compared bit for bit, so a value decodes exactly as it
// was). Format 1, which every value written before format 2 is, starts
// with the uvarint number of windows, each as six varints (side, start,
// end, count, firstTime, lastTime), five float64s (sum, min, max, first,
// last) and a fired byte.
type windowsCodec struct{}

// windowsFormat2 is a uvarint 0 written in two bytes, which no format-1
// value starts with: format 1 was written by encoding/binary, whose
// uvarints take their fewest bytes.
var windowsFormat2 = []byte{0x80, 0x00}

// The flags of a window in format 2.
const (
	windowLastIsFirst     = 1 << 0 // last equals first
	windowLastTimeIsFirst = 1 << 1 // lastTime equals firstTime
	windowSumIsFirst      = 1 << 2 // sum equals first
	windowMinShift        = 3      // min's source (windowFromFirst...) is 2 bits here
	windowMaxShift        = 5      // and max's here
	windowFired           = 1 << 7
	windowRight           = 1 << 8 // the window is a join's right input's
	windowFlagsEnd        = 1 << 9
)

// Where a window's min or max is in format 2.
const (
	windowFromFirst = iota
	windowFromLast
	windowStored
)

func (windowsCodec) Append(dst []byte, ws []windowAcc) []byte {
	e := wire.Encoder(dst)
	e.Raw(windowsFormat2)
	e.Uvarint(uint64(len(ws)))
	for _, w := range ws {
		var flags uint64
		if sameFloat(w.last, w.first) {
			flags |= windowLastIsFirst
		}
		if w.lastTime == w.firstTime {
			flags |= windowLastTimeIsFirst
		}
		if sameFloat(w.sum, w.first) {
			flags |= windowSumIsFirst
		}
		minFrom, maxFrom := w.sourceOf(w.min), w.sourceOf(w.max)
		flags |= minFrom<<windowMinShift | maxFrom<<windowMaxShift
		if w.fired {
			flags |= windowFired
		}
		if w.side == 1 {
			flags |= windowRight
		}
		e.Uvarint(flags)
		e.Varint(w.start)
		e.Varint(w.end - w.start)
		e.Varint(w.count)
		e.Varint(w.firstTime - w.start)
		if flags&windowLastTimeIsFirst == 0 {
			e.Varint(w.lastTime - w.firstTime)
		}
		e.Float64(w.first)
		if flags&windowLastIsFirst == 0 {
			e.Float64(w.last)
		}
		if minFrom == windowStored {
			e.Float64(w.min)
		}
		if maxFrom == windowStored {
			e.Float64(w.max)
		}
		if flags&windowSumIsFirst == 0 {
			e.Float64(w.sum)
		}
	}
	return e
}

// sameFloat compares bit for bit, so that a value decodes exactly as it
// was: NaN is itself, and -0 is not 0.
func sameFloat(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// sourceOf is where format 2 keeps v, w's min or max.
func (w *windowAcc) sourceOf(v float64) uint64 {
	switch {
	case sameFloat(v, w.first):
		return windowFromFirst
	case sameFloat(v, w.last):
		return windowFromLast
	}
	return windowStored
}

// fromSource reads w's min or max from where sourceOf kept it: w's first
// or last, which must be read already, or d.
func (w *windowAcc) fromSource(source uint64, d *wire.Decoder) float64 {
	switch source {
	case windowFromFirst:
		return w.first
	case windowFromLast:
		return w.last
	}
	return d.Float64()
}

func (windowsCodec) Decode(src []byte) ([]windowAcc, error) {
	return decodeWindowsInto(nil, src)
}

// reusingWindowsCodec is the window operator's windowsCodec: it decodes a
// key's windows into the array it decoded the key before into, so that a
// record costs no allocation for them (they were most of a busy window
// operator's garbage). A value it decoded is valid until it decodes the
// next: the operator reads a key's windows, changes and stores them before
// it reads another's.
type reusingWindowsCodec struct {
	windowsCodec
	reuse []windowAcc
}

func (c *reusingWindowsCodec) Decode(src []byte) ([]windowAcc, error) {
	ws, err := decodeWindowsInto(c.reuse[:0], src)
	if cap(ws) > cap(c.reuse) {
		c.reuse = ws
	}
	return ws, err
}

// decodeWindowsInto decodes src, in either format, appending to dst.
func decodeWindowsInto(dst []windowAcc, src []byte) ([]windowAcc, error) {
	var ws []windowAcc
	var err error
	if len(src) >= len(windowsFormat2) && string(src[:len(windowsFormat2)]) == string(windowsFormat2) {
		ws, err = decodeWindows(dst, src[len(windowsFormat2):])
	} else {
		ws, err = decodeWindowsV1(dst, src)
	}
	if err != nil {
		return nil, fmt.Errorf("window state: %w", err)
	}
	return ws, nil
}

// The fewest bytes a window takes in each format, which bound how many
// windows a damaged count can make the decoder allocate.
const (
	minWindowBytes   = 13 // flags, four one-byte varints, first
	minWindowBytesV1 = 47 // six one-byte varints, five floats, fired
)

func decodeWindows(ws []windowAcc, src []byte) ([]windowAcc, error) {
	d := wire.NewDecoder(src)
	n := d.Count(minWindowBytes)
	ws = slices.Grow(ws, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		flags := d.Uvarint()
		minFrom, maxFrom := flags>>windowMinShift&3, flags>>windowMaxShift&3
		if d.Err() == nil && (flags >= windowFlagsEnd || minFrom > windowStored || maxFrom > windowStored) {
			return nil, fmt.Errorf("bad window flags %#x", flags)
		}
		w := windowAcc{fired: flags&windowFired != 0}
		if flags&windowRight != 0 {
			w.side = 1
		}
		w.start = d.Varint()
		w.end = w.start + d.Varint()
		w.count = d.Varint()
		w.firstTime = w.start + d.Varint()
		w.lastTime = w.firstTime
		if flags&windowLastTimeIsFirst == 0 {
			w.lastTime += d.Varint()
		}
		w.first = d.Float64()
		w.last = w.first
		if flags&windowLastIsFirst == 0 {
			w.last = d.Float64()
		}
		w.min = w.fromSource(minFrom, &d)
		w.max = w.fromSource(maxFrom, &d)
		w.sum = w.first
		if flags&windowSumIsFirst == 0 {
			w.sum = d.Float64()
		}
		ws = append(ws, w)
	}
	return ws, d.End()
}

func decodeWindowsV1(ws []windowAcc, src []byte) ([]windowAcc, error) {
	d := wire.NewDecoder(src)
	n := d.Count(minWindowBytesV1)
	ws = slices.Grow(ws, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		var w windowAcc
		for _, p := range []*int64{&w.side, &w.start, &w.end, &w.count, &w.firstTime, &w.lastTime} {
			*p = d.Varint()
		}
		for _, p := range []*float64{&w.sum, &w.min, &w.max, &w.first, &w.last} {
			*p = d.Float64()
		}
		w.fired = d.Byte() == 1
		if d.Err() == nil && w.side != 0 && w.side != 1 {
			return nil, fmt.Errorf("window of input %d", w.side)
		}
		ws = append(ws, w)
	}
	return ws, d.End()
}

// rowsCodec encodes a key's windows of many aggregates, laid out by
// layout, in format 3: windowsFormat3, then the uvarint number of
// windows, each as
//
//	uvarint flags (rowFired, rowLastTimeIsFirst), varint start,
//	varint end - start, varint count,
//	[varint firstTime - start, [varint lastTime - firstTime]],
//	float64 per partial, sketch per sketch,
//	uvarint length and distinct sketch per distinct sketch
//
// where the times are there only if the layout keeps them, lastTime only
// when the flags do not say it equals firstTime, and a sketch is the
// uvarint length of what follows, its uvarint count of zeros, then its
// positive bins and its negative ones, each as the uvarint number of
// bins, then the first bin's varint index and uvarint count, then for
// each next bin the uvarint (index - previous - 1) << 1 | binCounted,
// and, if binCounted, the uvarint count - 2: a bin of one value near the
// one before takes a byte; a distinct sketch is a HyperLogLog sketch as
// its library writes it (appendDistinct), of at most maxDistinctBytes: 24
// bytes for one value, 58 for ten, 2,807 for 1,000, and 16,392 once
// dense, from about 7,600. What the layout keeps is not written: the state's name says
// it (rowLayout.stateName). A window of one record of avg, max and a
// quantile, of three arguments, takes 36 bytes.
//
// Decode keeps a sketch's bytes (sketch.packed), and reads its bins only
// when its window is read or merged: a record adds its value to the
// bytes of its window's sketch (sketch.addPacked), and costs the others a
// copy of theirs. It trusts its input, what Append wrote or Check
// accepted (keyed state checks restored values with Check), but for the
// distinct sketches, which it reads whole, and which the library checks.
type rowsCodec struct{ layout *rowLayout }

// windowsFormat3 is a uvarint 1 written in two bytes, as windowsFormat2
// is a 0.
var windowsFormat3 = []byte{0x81, 0x00}

// The flags of a window in format 3.
const (
	rowFired           = 1 << 0
	rowLastTimeIsFirst = 1 << 1 // lastTime equals firstTime; with times only
	rowFlagsEnd        = 1 << 2
)

// binCounted marks a bin's gap in format 3: a count over 1 follows.
const binCounted = 1

func (c rowsCodec) Append(dst []byte, ws []windowAcc) []byte {
	dst, _ = c.appendRows(dst, ws, nil)
	return dst
}

// appendRows appends ws to dst, and returns it with scratch, which it
// encodes a changed sketch in before its length.
func (c rowsCodec) appendRows(dst []byte, ws []windowAcc, scratch []byte) ([]byte, []byte) {
	e := wire.Encoder(dst)
	e.Raw(windowsFormat3)
	e.Uvarint(uint64(len(ws)))
	for i := range ws {
		w := &ws[i]
		var flags uint64
		if w.fired {
			flags |= rowFired
		}
		if c.layout.times && w.lastTime == w.firstTime {
			flags |= rowLastTimeIsFirst
		}
		e.Uvarint(flags)
		e.Varint(w.start)
		e.Varint(w.end - w.start)
		e.Varint(w.count)
		if c.layout.times {
			e.Varint(w.firstTime - w.start)
			if flags&rowLastTimeIsFirst == 0 {
				e.Varint(w.lastTime - w.firstTime)
			}
		}
		for _, v := range w.partials {
			e.Float64(v)
		}
		for j := range w.sketches {
			s := &w.sketches[j]
			if s.packed != nil {
				e.Bytes(s.packed)
				continue
			}
			scratch = appendSketch(scratch[:0], s)
			e.Bytes(scratch)
		}
		for _, s := range w.distincts {
			scratch = appendDistinct(scratch[:0], s)
			e.Bytes(scratch)
		}
	}
	return e, scratch
}

// appendSketch appends the bytes of s, unpacked, in format 3.
func appendSketch(dst []byte, s *sketch) []byte {
	e := wire.Encoder(dst)
	e.Uvarint(s.zero)
	appendBins(&e, s.pos)
	appendBins(&e, s.neg)
	return e
}

func appendBins(e *wire.Encoder, bins []sketchBin) {
	e.Uvarint(uint64(len(bins)))
	for i, b := range bins {
		if i == 0 {
			e.Varint(int64(b.index))
			e.Uvarint(b.count)
			continue
		}
		*e = appendGap(*e, b.index-bins[i-1].index-1, b.count)
	}
}

// appendGap appends a bin after the one before, gap indexes apart, of
// count values, as format 3 writes it.
func appendGap(dst []byte, gap int, count uint64) []byte {
	if count == 1 {
		return binary.AppendUvarint(dst, uint64(gap)<<1)
	}
	dst = binary.AppendUvarint(dst, uint64(gap)<<1|binCounted)
	return binary.AppendUvarint(dst, count-2)
}

func (c rowsCodec) Decode(src []byte) ([]windowAcc, error) {
	return c.decodeInto(nil, new(rowSlabs), src, false)
}

// Check reports what is wrong with src, which restored keyed state holds:
// besides the bytes' framing, what would make a window wrong to read:
// flags it does not know, a window of no records, a sketch's bin out of
// the mapping's indexes, of no count, or beyond its span, a sketch
// whose counts do not add up to its window's, and a distinct sketch that
// readDistinct refuses.
func (c rowsCodec) Check(src []byte) error {
	_, err := c.decodeInto(nil, new(rowSlabs), src, true)
	return err
}

// reusingRowsCodec is rowsCodec as reusingWindowsCodec is windowsCodec:
// it decodes a key's windows, their partials and their sketches' bytes
// and bins into the arrays it decoded the key before into, with the same
// contract, and encodes a changed sketch in a scratch array of its own.
type reusingRowsCodec struct {
	rowsCodec
	reuse   []windowAcc
	slabs   rowSlabs
	scratch []byte
}

func (c *reusingRowsCodec) Decode(src []byte) ([]windowAcc, error) {
	c.slabs.partials, c.slabs.sketches, c.slabs.packed, c.slabs.bins = c.slabs.partials[:0], c.slabs.sketches[:0], c.slabs.packed[:0], c.slabs.bins[:0]
	ws, err := c.decodeInto(c.reuse[:0], &c.slabs, src, false)
	if cap(ws) > cap(c.reuse) {
		c.reuse = ws
	}
	return ws, err
}

func (c *reusingRowsCodec) Append(dst []byte, ws []windowAcc) []byte {
	dst, c.scratch = c.appendRows(dst, ws, c.scratch)
	return dst
}

// rowSlabs hold the partials, sketches and sketches' bytes of the windows
// a decode makes, and the bins of the sketches unpacked, each window's or
// sketch's a piece of them that it cannot grow into another's.
type rowSlabs struct {
	partials []float64
	sketches []sketch
	packed   []byte
	bins     []sketchBin
}

// decodeInto decodes src, appending to dst, the windows' pieces to slabs;
// with check, it reads every sketch's bins, as Check says.
func (c rowsCodec) decodeInto(ws []windowAcc, slabs *rowSlabs, src []byte, check bool) ([]windowAcc, error) {
	l := c.layout
	if len(src) < len(windowsFormat3) || string(src[:len(windowsFormat3)]) != string(windowsFormat3) {
		return nil, errors.New("window state: not of format 3")
	}
	d := wire.NewDecoder(src[len(windowsFormat3):])
	// flags, start, end, count; floats; a sketch's length and three
	// counts; a distinct sketch's length, header and two empty lists
	minBytes := 4 + 8*len(l.partials) + 4*len(l.sketched) + 21*len(l.counted)
	if l.times {
		minBytes++
	}
	n := d.Count(minBytes)
	ws = slices.Grow(ws, n)
	slabs.partials = slices.Grow(slabs.partials, n*len(l.partials))
	slabs.sketches = slices.Grow(slabs.sketches, n*len(l.sketched))
	slabs.packed = slices.Grow(slabs.packed, len(src))
	for i := 0; i < n && d.Err() == nil; i++ {
		flags := d.Uvarint()
		if d.Err() == nil && (flags >= rowFlagsEnd || !l.times && flags&rowLastTimeIsFirst != 0) {
			return nil, fmt.Errorf("window state: bad window flags %#x", flags)
		}
		w := windowAcc{fired: flags&rowFired != 0}
		w.start = d.Varint()
		w.end = w.start + d.Varint()
		w.count = d.Varint()
		if d.Err() == nil && w.count < 1 {
			return nil, fmt.Errorf("window state: a window of %d records", w.count)
		}
		if l.times {
			w.firstTime = w.start + d.Varint()
			w.lastTime = w.firstTime
			if flags&rowLastTimeIsFirst == 0 {
				w.lastTime += d.Varint()
			}
		}
		from := len(slabs.partials)
		for range l.partials {
			slabs.partials = append(slabs.partials, d.Float64())
		}
		w.partials = slabs.partials[from:len(slabs.partials):len(slabs.partials)]
		from = len(slabs.sketches)
		for range l.sketched {
			b := d.Bytes()
			if check && d.Err() == nil {
				if err := checkSketch(b, w.count); err != nil {
					return nil, fmt.Errorf("window state: %w", err)
				}
			}
			at := len(slabs.packed)
			slabs.packed = append(slabs.packed, b...)
			slabs.sketches = append(slabs.sketches, sketch{packed: slabs.packed[at:len(slabs.packed):len(slabs.packed)], slabs: slabs})
		}
		w.sketches = slabs.sketches[from:len(slabs.sketches):len(slabs.sketches)]
		for range l.counted {
			b := d.Bytes()
			if d.Err() != nil {
				break
			}
			s, err := readDistinct(b)
			if err != nil {
				return nil, fmt.Errorf("window state: %w", err)
			}
			w.distincts = append(w.distincts, s)
		}
		ws = append(ws, w)
	}
	if err := d.End(); err != nil {
		return nil, fmt.Errorf("window state: %w", err)
	}
	return ws, nil
}

// checkSketch reports what is wrong with a sketch's bytes, of a window of
// count records.
func checkSketch(b []byte, count int64) error {
	var s sketch
	var slab []sketchBin
	if err := s.read(b, &slab); err != nil {
		return err
	}
	if s.total() != uint64(count) {
		return fmt.Errorf("a sketch of %d values in a window of %d records", s.total(), count)
	}
	return nil
}

// read sets s's zeros and bins to those of b, a sketch's bytes in format
// 3, the bins in arrays it appends to slab, and reports what makes them no
// sketch's.
func (s *sketch) read(b []byte, slab *[]sketchBin) error {
	d := wire.NewDecoder(b)
	s.zero = d.Uvarint()
	s.pos = readBins(&d, slab)
	s.neg = readBins(&d, slab)
	return d.End()
}

// unpack reads s's zeros and bins out of s.packed, which a decode left:
// bytes that Append wrote or Check accepted, so none is wrong. The bins go
// to the decode's slabs.
func (s *sketch) unpack() {
	if b := s.packed; b != nil {
		s.packed = nil
		_ = s.read(b, &s.slabs.bins)
	}
}

// addPacked counts v, which sketchHolds, in s.packed, and reports whether
// it could: not if v's bin would stretch the bins of its sign beyond
// sketchBins (add reads the bins then, and folds them). It writes the
// bytes appendBins would write of the bins with v's, at the end of the
// decode's slabs.packed: the bytes before and after the count it changes
// or the bin it inserts copied as they are, so that a record neither
// reads nor writes the bins one by one.
func (s *sketch) addPacked(v float64) bool {
	b, m := s.packed, quantileMapping
	_, n := binary.Uvarint(b) // the zeros
	switch {
	case v > m.MinIndexableValue():
		return s.addToBins(n, m.Index(v))
	case v < -m.MinIndexableValue():
		return s.addToBins(skipBins(b, n), m.Index(-v))
	}
	s.repack(0, 1, n, nil, n)
	return true
}

// addToBins counts a value of bin x in the bins whose number is at
// s.packed[at], as addPacked says.
func (s *sketch) addToBins(at, x int) bool {
	b := s.packed
	n, k := binary.Uvarint(b[at:])
	bins := at + k // the first bin
	var buf [4 * binary.MaxVarintLen64]byte
	mid := buf[:0]
	if n == 0 {
		mid = binary.AppendVarint(mid, int64(x))
		s.repack(at, 1, bins, binary.AppendUvarint(mid, 1), bins)
		return true
	}
	first, k := binary.Varint(b[bins:])
	count, k2 := binary.Uvarint(b[bins+k:])
	prev, end := int(first), bins+k+k2 // the bin read, and where it ends
	switch {
	case x == prev:
		mid = binary.AppendVarint(mid, first)
		s.repack(at, 0, bins, binary.AppendUvarint(mid, count+1), end)
		return true
	case x < prev:
		if lastBin(b, end, n-1, prev)-x >= sketchBins {
			return false
		}
		mid = binary.AppendVarint(mid, int64(x))
		mid = binary.AppendUvarint(mid, 1)
		s.repack(at, 1, bins, appendGap(mid, prev-x-1, count), end)
		return true
	}
	for range n - 1 {
		start := end
		index, count, next := nextBin(b, end, prev)
		switch {
		case index == x:
			s.repack(at, 0, start, appendGap(mid, index-prev-1, count+1), next)
			return true
		case index > x:
			mid = appendGap(mid, x-prev-1, 1)
			s.repack(at, 1, start, appendGap(mid, index-x-1, count), next)
			return true
		}
		prev, end = index, next
	}
	if x-int(first) >= sketchBins {
		return false
	}
	s.repack(at, 1, end, appendGap(mid, x-prev-1, 1), end)
	return true
}

// nextBin reads the bin after bin prev from b[at:], as appendBins wrote
// it: its index and count, and where it ends.
func nextBin(b []byte, at, prev int) (index int, count uint64, end int) {
	gap, k := binary.Uvarint(b[at:])
	end, count = at+k, 1
	if gap&binCounted != 0 {
		c, k := binary.Uvarint(b[end:])
		end, count = end+k, c+2
	}
	return prev + 1 + int(gap>>1), count, end
}

// lastBin is the index of the last of the n bins that follow bin prev
// from b[at:] (prev if none).
func lastBin(b []byte, at int, n uint64, prev int) int {
	for range n {
		prev, _, at = nextBin(b, at, prev)
	}
	return prev
}

// skipBins is where the bins whose number is at b[at:] end.
func skipBins(b []byte, at int) int {
	n, k := binary.Uvarint(b[at:])
	if at += k; n == 0 {
		return at
	}
	first, k := binary.Varint(b[at:])
	_, k2 := binary.Uvarint(b[at+k:])
	at += k + k2
	for prev := int(first); n > 1; n-- {
		prev, _, at = nextBin(b, at, prev)
	}
	return at
}

// repack writes s.packed anew at the end of the decode's slabs.packed: its
// bytes with the uvarint at at (a count of zeros, or of bins) plus grow,
// and mid in place of those from from to to.
func (s *sketch) repack(at int, grow uint64, from int, mid []byte, to int) {
	b, out := s.packed, s.slabs.packed
	n, k := binary.Uvarint(b[at:])
	start := len(out)
	out = append(out, b[:at]...)
	out = binary.AppendUvarint(out, n+grow)
	out = append(out, b[at+k:from]...)
	out = append(out, mid...)
	out = append(out, b[to:]...)
	s.packed, s.slabs.packed = out[start:len(out):len(out)], out
}

// readBins reads what appendBins wrote, failing d on bins that no sketch
// holds, into a piece of slab with room for a bin more, which it appends.
func readBins(d *wire.Decoder, slab *[]sketchBin) []sketchBin {
	n := d.Count(1) // a gap
	if n == 0 {
		return nil
	}
	from := len(*slab)
	*slab = slices.Grow(*slab, n+1)
	bins := (*slab)[from : from : from+n+1]
	for i := 0; i < n && d.Err() == nil; i++ {
		var index int64
		count := uint64(1)
		if i == 0 {
			index = d.Varint()
			count = d.Uvarint()
		} else {
			gap := d.Uvarint()
			// A gap of sketchBins or more spans too far: no need to add more.
			index = int64(bins[i-1].index) + 1 + int64(min(gap>>1, sketchBins))
			if gap&binCounted != 0 {
				count = 2 + min(d.Uvarint(), math.MaxUint64-2)
			}
		}
		switch {
		case d.Err() != nil:
		case index < int64(minSketchIndex) || index > int64(maxSketchIndex):
			d.Fail(fmt.Errorf("a sketch's bin %d, out of [%d, %d]", index, minSketchIndex, maxSketchIndex))
		case i > 0 && index-int64(bins[0].index) >= sketchBins:
			d.Fail(fmt.Errorf("a sketch's bins span more than %d", sketchBins))
		case count == 0:
			d.Fail(errors.New("a sketch's bin of no count"))
		}
		bins = append(bins, sketchBin{int(index), count})
	}
	*slab = (*slab)[:from+len(bins)+1]
	return bins
}
