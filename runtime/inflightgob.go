package runtime

import (
	"bytes"
	"fmt"
	"math"
	"math/bits"
	"strings"

	"github.com/cairn-edge/cairn/graph"
)

// decodeGobChannelState reads channel state of version 1, a
// [][]graph.Record that encoding/gob wrote with the payload types the
// runtime registered then, without gob. A gob stream is messages, each a
// length, a type id, and a type's definition if the id is negative, else a
// value. A payload carries its type's name, its id and its length; the
// definition of a type first seen inside a value cuts it: the value so far
// and the definition end a message (here, a chunk), and the value goes on
// in the next. The reader knows every type by its name or place, and so
// skips the definitions. Counts are bounded by the bytes left, so each
// loop ends, reading zeros, soon after an error.
func decodeGobChannelState(data []byte) ([][]graph.Record, error) {
	r := gobReader{buf: data}
	r.open()
	r.typeID()
	if r.uint() != 0 { // a value that is no struct is a field 0
		r.fail("not a slice of channels")
	}
	out := make([][]graph.Record, r.length(1))
	for ch := range out {
		if n := r.length(1); n > 0 { // nil when empty, as gob decoded it
			out[ch] = make([]graph.Record, n)
		}
		for i := range out[ch] {
			rec := &out[ch][i]
			r.fields(5, func(field int) {
				switch field {
				case 0:
					rec.Key = string(r.bytes())
				case 1:
					rec.Time = gobInt(r.uint())
				case 2:
					rec.Value = gobFloat(r.uint())
				case 3:
					rec.Payload = r.payload(0)
				case 4:
					rec.Origin = r.uint()
				}
			})
		}
	}
	if r.pos != len(r.buf) {
		r.fail("%d bytes after the records", len(r.buf)-r.pos)
	}
	return out, r.err
}

// gobReader reads a gob stream. After the first error it is at the end,
// and reads zeros.
type gobReader struct {
	buf    []byte
	pos    int
	chunks []int // where the open chunks end, innermost last
	err    error
}

func (r *gobReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: %s", r.pos, fmt.Sprintf(format, args...))
	}
	r.pos = len(r.buf)
}

// uint reads an unsigned integer (gob's ints, floats and bools are ones
// too): a byte below 128, or the negated count of the big-endian bytes
// that follow.
func (r *gobReader) uint() (v uint64) {
	if r.pos >= len(r.buf) {
		r.fail("truncated")
		return 0
	}
	b := r.buf[r.pos]
	if r.pos++; b < 0x80 {
		return uint64(b)
	}
	n := -int(int8(b))
	if n > 8 || n > len(r.buf)-r.pos {
		r.fail("bad unsigned integer")
		return 0
	}
	for _, c := range r.buf[r.pos : r.pos+n] {
		v = v<<8 | uint64(c)
	}
	r.pos += n
	return v
}

// gobInt is the int whose sign gob put in the lowest bit of u.
func gobInt(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// gobFloat is the float64 whose bits gob reversed into u.
func gobFloat(u uint64) float64 { return math.Float64frombits(bits.ReverseBytes64(u)) }

// length reads a length or count of elements of at least min bytes.
func (r *gobReader) length(min int) int {
	if n := r.uint(); n <= uint64((len(r.buf)-r.pos)/min) {
		return int(n)
	}
	r.fail("a length past the end")
	return 0
}

func (r *gobReader) bytes() []byte {
	n := r.length(1)
	r.pos += n
	return r.buf[r.pos-n : r.pos]
}

// open reads the length of a message, or of a payload, that starts a
// chunk.
func (r *gobReader) open() { r.chunks = append(r.chunks, r.length(1)+r.pos) }

// typeID reads a value's type id, passing the definitions before it:
// each ends its chunk, and the length of the next chunk follows.
func (r *gobReader) typeID() {
	for r.err == nil && gobInt(r.uint()) < 0 {
		if end := r.chunks[len(r.chunks)-1]; end < r.pos {
			r.fail("a type definition outside its message")
		} else {
			r.pos, r.chunks = end, r.chunks[:len(r.chunks)-1]
			r.open()
		}
	}
}

// fields reads a struct of n fields: each as the delta of its number to
// the one before and its value, which read reads, until a delta of 0.
func (r *gobReader) fields(n int, read func(field int)) {
	for field := -1; ; {
		delta := r.uint()
		if field += int(delta); delta == 0 || delta > uint64(n) || field >= n {
			if delta != 0 {
				r.fail("field delta %d", delta)
			}
			return
		}
		read(field)
	}
}

// payload reads an interface value: its type's name (none for nil), id
// and length, and the value: a struct's fields, or a field 0.
func (r *gobReader) payload(depth int) any {
	name := string(r.bytes())
	if name == "" {
		return nil
	} else if depth > graph.MaxPayloadDepth {
		r.fail("a payload nested deeper than %d", graph.MaxPayloadDepth)
	}
	r.typeID()
	height := len(r.chunks)
	r.open()
	defer func() { r.chunks = r.chunks[:height] }()
	if result, ok := strings.CutPrefix(name, "github.com/cairn-edge/cairn/graph."); ok {
		var v [6]uint64 // the operators' results have integer, float and bool fields
		r.fields(len(v), func(field int) { v[field] = r.uint() })
		switch result {
		case "WindowResult":
			return graph.WindowResult{Start: gobInt(v[0]), End: gobInt(v[1]), Count: gobInt(v[2])}
		case "JoinResult":
			return graph.JoinResult{Start: gobInt(v[0]), End: gobInt(v[1]), Left: gobFloat(v[2]), Right: gobFloat(v[3]),
				LeftCount: gobInt(v[4]), RightCount: gobInt(v[5])}
		case "Alert":
			return graph.Alert{Raised: v[0] == 1, Value: gobFloat(v[1])}
		}
	} else if r.uint() != 0 {
		r.fail("a %s that is no field 0", name)
	}
	switch name {
	case "float64":
		return gobFloat(r.uint())
	case "string":
		return string(r.bytes())
	case "bool":
		return r.uint() == 1
	case "[]uint8":
		if b := r.bytes(); len(b) > 0 {
			return bytes.Clone(b)
		}
		return []byte(nil) // as gob decoded an empty one
	case "map[string]interface {}":
		m := make(map[string]any)
		for n := r.length(2); n > 0; n-- {
			k := string(r.bytes())
			m[k] = r.payload(depth + 1)
		}
		return m
	case "[]interface {}":
		var l []any // nil when empty, as gob decoded it
		if n := r.length(1); n > 0 {
			l = make([]any, n)
		}
		for i := range l {
			l[i] = r.payload(depth + 1)
		}
		return l
	}
	r.fail("a payload of type %q", name)
	return nil
}
