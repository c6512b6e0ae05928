package graph

import (
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
