package wire

import (
	"encoding/binary"
	"fmt"
	"math"
)

// An Encoder is a format's bytes so far; each method appends a field. The
// zero Encoder is empty; Encoder(dst) appends to dst.
type Encoder []byte

// Header appends a format's magic and version.
func (e *Encoder) Header(magic string, version byte) {
	*e = append(append(*e, magic...), version)
}

// Uvarint appends v as a uvarint.
func (e *Encoder) Uvarint(v uint64) { *e = binary.AppendUvarint(*e, v) }

// Varint appends v as a zig-zag varint.
func (e *Encoder) Varint(v int64) { *e = binary.AppendVarint(*e, v) }

// Byte appends b.
func (e *Encoder) Byte(b byte) { *e = append(*e, b) }

// Bool appends b as a byte, 1 or 0.
func (e *Encoder) Bool(b bool) {
	if b {
		*e = append(*e, 1)
	} else {
		*e = append(*e, 0)
	}
}

// Uint32 appends v as 4 bytes, little-endian.
func (e *Encoder) Uint32(v uint32) { *e = binary.LittleEndian.AppendUint32(*e, v) }

// Uint32BE appends v as 4 bytes, big-endian.
func (e *Encoder) Uint32BE(v uint32) { *e = binary.BigEndian.AppendUint32(*e, v) }

// Uint64 appends v as 8 bytes, little-endian.
func (e *Encoder) Uint64(v uint64) { *e = binary.LittleEndian.AppendUint64(*e, v) }

// Float64 appends v's IEEE 754 bits as 8 bytes, little-endian: every value,
// NaNs and -0 too, decodes to the same bits.
func (e *Encoder) Float64(v float64) { e.Uint64(math.Float64bits(v)) }

// Bytes appends b's length as a uvarint, then b.
func (e *Encoder) Bytes(b []byte) { *e = append(binary.AppendUvarint(*e, uint64(len(b))), b...) }

// String appends s's length as a uvarint, then s.
func (e *Encoder) String(s string) { *e = append(binary.AppendUvarint(*e, uint64(len(s))), s...) }

// Raw appends b as it is, without a length: a field whose length the
// format knows otherwise (fixed, given before, or the rest of the input).
func (e *Encoder) Raw(b []byte) { *e = append(*e, b...) }

// A Decoder reads the fields of a format from a byte slice, in the order
// they were appended. Bytes it returns alias the input. Its methods do
// nothing once it has failed: they return zero values, and Err says why.
type Decoder struct {
	buf  []byte // what is left; nil after an error, so that reads fail fast
	size int    // the input's length, for offsets in errors
	err  error
}

// NewDecoder returns a Decoder of data.
func NewDecoder(data []byte) Decoder { return Decoder{buf: data, size: len(data)} }

// Err returns the first error, or nil.
func (d *Decoder) Err() error { return d.err }

// End returns the first error, or one if any input is left: a format read
// whole ends with its last field.
func (d *Decoder) End() error {
	if len(d.buf) > 0 {
		d.failf("%d bytes after the last field", len(d.buf))
	}
	return d.err
}

// Len returns the number of bytes left.
func (d *Decoder) Len() int { return len(d.buf) }

// Fail stops the decoder with err, which a format's code found in what it
// read (a version it does not know, a value out of its range), unless it
// failed before. The error it keeps says at which byte.
func (d *Decoder) Fail(err error) {
	if d.err == nil {
		d.err = fmt.Errorf("at byte %d: %w", d.offset(), err)
		d.buf = nil
	}
}

func (d *Decoder) failf(format string, args ...any) { d.Fail(fmt.Errorf(format, args...)) }

func (d *Decoder) offset() int { return d.size - len(d.buf) }

// Header reads a header of magic and returns its version; input that does
// not start with magic and a version fails the decoder.
func (d *Decoder) Header(magic string) byte {
	switch {
	case len(d.buf) < len(magic) || string(d.buf[:len(magic)]) != magic:
		d.failf("no header %q", magic)
		return 0
	case len(d.buf) == len(magic):
		d.failf("header %q without a version", magic)
		return 0
	}
	v := d.buf[len(magic)]
	d.buf = d.buf[len(magic)+1:]
	return v
}

// Take returns the next n bytes, which alias the input.
func (d *Decoder) Take(n int) []byte {
	b := d.buf
	if uint(n) > uint(len(b)) {
		d.truncated(n)
		return nil
	}
	d.buf = b[n:]
	return b[:n:n]
}

func (d *Decoder) truncated(n int) { d.failf("truncated: a field of %d bytes, %d left", n, len(d.buf)) }

// Rest returns the bytes left, which alias the input, and leaves none.
func (d *Decoder) Rest() []byte {
	b := d.buf
	d.buf = d.buf[len(b):]
	return b
}

// Uvarint reads a uvarint.
func (d *Decoder) Uvarint() uint64 {
	if b := d.buf; len(b) > 0 && b[0] < 0x80 {
		d.buf = b[1:]
		return uint64(b[0])
	}
	v, n := binary.Uvarint(d.buf)
	if n > 0 {
		d.buf = d.buf[n:]
		return v
	}
	d.varintFailed(n)
	return 0
}

// Varint reads a zig-zag varint.
func (d *Decoder) Varint() int64 {
	if b := d.buf; len(b) > 0 && b[0] < 0x80 {
		d.buf = b[1:]
		return int64(b[0]>>1) ^ -int64(b[0]&1)
	}
	v, n := binary.Varint(d.buf)
	if n > 0 {
		d.buf = d.buf[n:]
		return v
	}
	d.varintFailed(n)
	return 0
}

// varintFailed fails the decoder for a varint encoding/binary returned n
// for.
func (d *Decoder) varintFailed(n int) {
	if n == 0 {
		d.failf("truncated varint")
	} else {
		d.failf("varint overflows 64 bits")
	}
}

// Byte reads a byte.
func (d *Decoder) Byte() byte {
	if b := d.buf; len(b) > 0 {
		d.buf = b[1:]
		return b[0]
	}
	d.truncated(1)
	return 0
}

// Bool reads a byte that must be 1 or 0.
func (d *Decoder) Bool() bool {
	switch b := d.Byte(); b {
	case 0, 1:
		return b == 1
	default:
		d.failf("bool byte %#x", b)
		return false
	}
}

// Uint32 reads 4 bytes, little-endian.
func (d *Decoder) Uint32() uint32 {
	if b := d.Take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

// Uint32BE reads 4 bytes, big-endian.
func (d *Decoder) Uint32BE() uint32 {
	if b := d.Take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

// Uint64 reads 8 bytes, little-endian.
func (d *Decoder) Uint64() uint64 {
	if b := d.Take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// Float64 reads a float64 from its 8 bytes, little-endian.
func (d *Decoder) Float64() float64 { return math.Float64frombits(d.Uint64()) }

// Bytes reads a uvarint length and that many bytes, which alias the input.
func (d *Decoder) Bytes() []byte {
	n := d.Uvarint()
	if d.err == nil && n > uint64(len(d.buf)) {
		d.failf("truncated: a length of %d, %d bytes left", n, len(d.buf))
		return nil
	}
	return d.Take(int(n))
}

// Count reads a uvarint count of elements that take at least min bytes
// each, refusing a count that the bytes left cannot hold: a caller may
// allocate for as many elements as it returns. A min below 1 counts as 1.
func (d *Decoder) Count(min int) int {
	min = max(min, 1)
	n := d.Uvarint()
	if d.err == nil && n > uint64(len(d.buf)/min) {
		d.failf("count %d exceeds the %d bytes left, for elements of at least %d bytes", n, len(d.buf), min)
		return 0
	}
	return int(n)
}
