package wire

import (
	"math"
	"testing"
)

// FuzzDecoder reads arbitrary input as an arbitrary sequence of fields
// (ops chooses them). It must never panic; nothing it returns may claim
// more than the input holds (lengths, counts of elements of their least
// size); once failed it must return only zero values; and what it
// decoded must encode to bytes that decode to the same.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, []byte(sample().encode()))
	f.Add([]byte{11, 11, 10, 12}, []byte("\x03abc\xff\xff\xff\xff\x0f"))
	f.Add([]byte{10}, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, ops, data []byte) {
		d := NewDecoder(data)
		var got []any // what each op decoded
		for i, op := range ops {
			before, failed := d.Len(), d.Err() != nil
			v := decodeOp(&d, op)
			if s, ok := v.(string); ok && len(s) > before {
				t.Fatalf("op %d: %d bytes of %d left", i, len(s), before)
			}
			if c, ok := v.([2]int); ok && c[0]*c[1] > d.Len() {
				t.Fatalf("op %d: a count of %d elements of %d bytes, %d bytes left", i, c[0], c[1], d.Len())
			}
			if d.Len() > before {
				t.Fatalf("op %d: %d bytes left after %d", i, d.Len(), before)
			}
			if failed {
				if d.Len() != 0 || (v != uint64(0) && v != int64(0) && v != byte(0) && v != false && v != uint32(0) && v != "" && v != [2]int{0, int(op/13) + 1}) {
					t.Fatalf("op %d after %v: decoded %v", i, d.Err(), v)
				}
			}
			got = append(got, v)
		}
		if d.Err() != nil {
			return
		}
		var e Encoder
		for i, op := range ops {
			switch v := got[i].(type) {
			case byte:
				if op%13 == 0 {
					e.Header("TEST", v)
				} else {
					e.Byte(v)
				}
			case uint64:
				switch op % 13 {
				case 1:
					e.Uvarint(v)
				case 7, 8:
					e.Uint64(v)
				}
			case int64:
				e.Varint(v)
			case bool:
				e.Bool(v)
			case uint32:
				if op%13 == 5 {
					e.Uint32(v)
				} else {
					e.Uint32BE(v)
				}
			case string:
				if op%13 == 12 {
					e.Raw([]byte(v))
				} else {
					e.String(v)
				}
			case [2]int:
				e.Uvarint(uint64(v[0]))
				e.Raw(make([]byte, v[0]*v[1]))
			}
		}
		d = NewDecoder(e)
		for i, op := range ops {
			v := decodeOp(&d, op)
			if c, ok := v.([2]int); ok {
				d.Take(c[0] * c[1]) // the elements counted, zeros
			}
			if v != got[i] {
				t.Fatalf("op %d: %v re-encoded decodes as %v (%v)", i, got[i], v, d.Err())
			}
		}
	})
}

// decodeOp decodes the field that op chooses: op%13 names the method,
// op/13 the size of a count's elements (less one) or of a Take. A count
// is returned with its elements' size, which it does not take.
func decodeOp(d *Decoder, op byte) any {
	switch op % 13 {
	case 0:
		return d.Header("TEST")
	case 1:
		return d.Uvarint()
	case 2:
		return d.Varint()
	case 3:
		return d.Byte()
	case 4:
		return d.Bool()
	case 5:
		return d.Uint32()
	case 6:
		return d.Uint32BE()
	case 7:
		return d.Uint64()
	case 8:
		return math.Float64bits(d.Float64())
	case 9, 10:
		return string(d.Bytes())
	case 11:
		size := int(op/13) + 1
		return [2]int{d.Count(size), size}
	default:
		return string(d.Take(int(op / 13)))
	}
}
