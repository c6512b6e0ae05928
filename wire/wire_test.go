package wire

import (
	"bytes"
	"math"
	"runtime"
	"strings"
	"testing"
)

// fields is one of every field, in an order a format might use.
type fields struct {
	version  byte
	u        uint64
	v        int64
	b        byte
	t, f     bool
	u32, be  uint32
	u64      uint64
	fl       float64
	bs       []byte
	s        string
	count    int
	raw, end []byte
}

func (x fields) encode() Encoder {
	var e Encoder
	e.Header("TEST", x.version)
	e.Uvarint(x.u)
	e.Varint(x.v)
	e.Byte(x.b)
	e.Bool(x.t)
	e.Bool(x.f)
	e.Uint32(x.u32)
	e.Uint32BE(x.be)
	e.Uint64(x.u64)
	e.Float64(x.fl)
	e.Bytes(x.bs)
	e.String(x.s)
	e.Uvarint(uint64(x.count))
	for range x.count {
		e.Uint32(7)
	}
	e.Raw(x.raw)
	e.Raw(x.end)
	return e
}

func decodeFields(data []byte) (fields, error) {
	d := NewDecoder(data)
	var x fields
	x.version = d.Header("TEST")
	x.u = d.Uvarint()
	x.v = d.Varint()
	x.b = d.Byte()
	x.t = d.Bool()
	x.f = d.Bool()
	x.u32 = d.Uint32()
	x.be = d.Uint32BE()
	x.u64 = d.Uint64()
	x.fl = d.Float64()
	x.bs = d.Bytes()
	x.s = string(d.Bytes())
	x.count = d.Count(4)
	for range x.count {
		d.Uint32()
	}
	x.raw = d.Take(3)
	x.end = d.Rest()
	return x, d.End()
}

func sample() fields {
	return fields{version: 3, u: math.MaxUint64, v: math.MinInt64, b: 0xff, t: true, u32: 0xdeadbeef, be: 0x01020304,
		u64: 1 << 63, fl: math.Copysign(0, -1), bs: []byte{0, 1, 2}, s: strings.Repeat("ü", 100), count: 2,
		raw: []byte("raw"), end: []byte("the rest")}
}

// TestRoundTrip: every field decodes to what was encoded, at its place in
// the bytes.
func TestRoundTrip(t *testing.T) {
	x := sample()
	enc := x.encode()
	if !bytes.HasPrefix(enc, []byte("TEST\x03\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")) {
		t.Fatalf("header and uvarint encode as %x", enc[:16])
	}
	if want := []byte{0xef, 0xbe, 0xad, 0xde, 1, 2, 3, 4}; !bytes.Contains(enc, want) {
		t.Fatalf("fixed-width integers are not %x in %x", want, enc)
	}
	got, err := decodeFields(enc)
	if err != nil {
		t.Fatal(err)
	}
	if got.version != x.version || got.u != x.u || got.v != x.v || got.b != x.b || got.t != x.t || got.f != x.f ||
		got.u32 != x.u32 || got.be != x.be || got.u64 != x.u64 || math.Float64bits(got.fl) != math.Float64bits(x.fl) ||
		!bytes.Equal(got.bs, x.bs) || got.s != x.s || got.count != x.count || !bytes.Equal(got.raw, x.raw) || !bytes.Equal(got.end, x.end) {
		t.Fatalf("decoded %+v\nwant %+v", got, x)
	}
	for _, v := range []int64{0, 1, -1, 63, -64, 64, -65, math.MaxInt64} {
		var e Encoder
		e.Varint(v)
		d := NewDecoder(e)
		if got := d.Varint(); got != v || d.End() != nil {
			t.Fatalf("varint %d decodes as %d, %v", v, got, d.Err())
		}
	}
}

// TestTruncatedInputFails: every prefix of an encoding fails to decode,
// with an error that says where.
func TestTruncatedInputFails(t *testing.T) {
	x := sample()
	x.end = nil
	enc := x.encode()
	for n := range len(enc) {
		_, err := decodeFields(enc[:n])
		if err == nil || !strings.HasPrefix(err.Error(), "at byte ") {
			t.Fatalf("%d of %d bytes decode with error %v", n, len(enc), err)
		}
	}
}

// TestErrorsSayWhatAndWhere: each kind of damage has its own error, at the
// byte where it was found, and it sticks.
func TestErrorsSayWhatAndWhere(t *testing.T) {
	for _, c := range []struct {
		data string
		read func(d *Decoder)
		want string
	}{
		{"TEXT\x01", func(d *Decoder) { d.Header("TEST") }, `at byte 0: no header "TEST"`},
		{"TEST", func(d *Decoder) { d.Header("TEST") }, `at byte 0: header "TEST" without a version`},
		{"\x80\x80", func(d *Decoder) { d.Uvarint() }, "at byte 0: truncated varint"},
		{"\x01" + strings.Repeat("\xff", 10) + "\x01", func(d *Decoder) { d.Byte(); d.Varint() }, "at byte 1: varint overflows 64 bits"},
		{"\x02", func(d *Decoder) { d.Bool() }, "at byte 1: bool byte 0x2"},
		{"\x05abcd", func(d *Decoder) { d.Bytes() }, "at byte 1: truncated: a length of 5, 4 bytes left"},
		{"\xff\xff\xff\xff\xff\xff\xff\xff\x7fab", func(d *Decoder) { d.Bytes() }, "at byte 9: truncated: a length of 9223372036854775807, 2 bytes left"},
		{"\x03abcdefgh", func(d *Decoder) { d.Count(3) }, "at byte 1: count 3 exceeds the 8 bytes left, for elements of at least 3 bytes"},
		{"abc", func(d *Decoder) { d.Uint64() }, "at byte 0: truncated: a field of 8 bytes, 3 left"},
		{"abc", func(d *Decoder) { d.Byte(); d.End() }, "at byte 1: 2 bytes after the last field"},
	} {
		d := NewDecoder([]byte(c.data))
		c.read(&d)
		if d.Err() == nil || d.Err().Error() != c.want {
			t.Errorf("%q: error %v, want %s", c.data, d.Err(), c.want)
			continue
		}
		if d.Uvarint() != 0 || d.Byte() != 0 || d.Bytes() != nil || d.Rest() != nil || d.Len() != 0 || d.Err().Error() != c.want {
			t.Errorf("%q: the decoder reads on after %v", c.data, d.Err())
		}
	}
}

// TestDecodingAllocatesNothing: reading fields allocates nothing, and a
// count or length beyond the input allocates no more than its error.
func TestDecodingAllocatesNothing(t *testing.T) {
	enc := sample().encode()
	if n := testing.AllocsPerRun(100, func() {
		d := NewDecoder(enc)
		d.Header("TEST")
		d.Uvarint()
		d.Varint()
		d.Byte()
		d.Bool()
		d.Bool()
		d.Uint32()
		d.Uint32BE()
		d.Uint64()
		d.Float64()
		d.Bytes()
		d.Bytes()
		for range d.Count(4) {
			d.Uint32()
		}
		d.Take(3)
		d.Rest()
		if err := d.End(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("decoding allocates %v times", n)
	}
	huge := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 100
	for range runs {
		d := NewDecoder(huge)
		if d.Count(1) != 0 || d.Err() == nil {
			t.Fatal("a huge count was taken")
		}
		d = NewDecoder(huge)
		if d.Bytes() != nil || d.Err() == nil {
			t.Fatal("a huge length was taken")
		}
	}
	runtime.ReadMemStats(&after)
	if n := (after.TotalAlloc - before.TotalAlloc) / runs; n > 1024 {
		t.Errorf("refusing a huge count and length allocates %d bytes", n)
	}
}
