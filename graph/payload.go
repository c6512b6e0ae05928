package graph

import (
	"fmt"
	"maps"
	"slices"

	"github.com/cairn-edge/cairn/wire"
)

// A record's payload in bytes: what channel state (runtime/inflight.go)
// and a join's keyed state hold of the records they keep. A payload is a
// tag byte (payloadNil...) and the value's fields: bytes and strings
// length-prefixed, floats as float64s, booleans as a byte, a map as a
// count of entries, each its key (length-prefixed) and value, sorted by
// key, a list as a count of values, and the built-in operators' results
// as their fields in order, integers as varints; a window's row's
// aggregates as their count, then each its name (length-prefixed) and
// value. A change of these bytes is a new version of both formats.

// The tags of the payload types that flow between the built-in operators:
// decoded messages (JSON, or raw bytes) and the operators' results.
const (
	payloadNil byte = iota
	payloadBytes
	payloadString
	payloadFloat
	payloadBool
	payloadMap    // map[string]any
	payloadList   // []any
	payloadWindow // WindowResult
	payloadJoin   // JoinResult
	payloadAlert  // Alert
	payloadRow    // WindowRow
)

// The fewest bytes a map's entry and a row's aggregate take, which bound
// how many a damaged count can make the decoder allocate; a payload takes
// a byte.
const (
	minFieldBytes     = 2 // key, value
	minAggregateBytes = 9 // name, value (8)
)

// MaxPayloadDepth bounds the nesting of maps and lists in a payload, as
// encoding/json, which decoded them, bounds it.
const MaxPayloadDepth = 10_000

// AppendPayload appends payload p to e. A payload of a type other than
// the built-in operators' and decoded messages', or nested deeper than
// MaxPayloadDepth, is an error, and leaves e with part of it.
func AppendPayload(e *wire.Encoder, p any) error { return appendPayload(e, p, 0) }

func appendPayload(e *wire.Encoder, p any, depth int) error {
	if depth > MaxPayloadDepth {
		return fmt.Errorf("a payload nested deeper than %d", MaxPayloadDepth)
	}
	switch v := p.(type) {
	case nil:
		e.Byte(payloadNil)
	case []byte:
		e.Byte(payloadBytes)
		e.Bytes(v)
	case string:
		e.Byte(payloadString)
		e.String(v)
	case float64:
		e.Byte(payloadFloat)
		e.Float64(v)
	case bool:
		e.Byte(payloadBool)
		e.Bool(v)
	case map[string]any:
		e.Byte(payloadMap)
		e.Uvarint(uint64(len(v)))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			e.String(k)
			if err := appendPayload(e, v[k], depth+1); err != nil {
				return err
			}
		}
	case []any:
		e.Byte(payloadList)
		e.Uvarint(uint64(len(v)))
		for _, x := range v {
			if err := appendPayload(e, x, depth+1); err != nil {
				return err
			}
		}
	case WindowResult:
		e.Byte(payloadWindow)
		e.Varint(v.Start)
		e.Varint(v.End)
		e.Varint(v.Count)
	case JoinResult:
		e.Byte(payloadJoin)
		e.Varint(v.Start)
		e.Varint(v.End)
		e.Float64(v.Left)
		e.Float64(v.Right)
		e.Varint(v.LeftCount)
		e.Varint(v.RightCount)
	case Alert:
		e.Byte(payloadAlert)
		e.Bool(v.Raised)
		e.Float64(v.Value)
	case WindowRow:
		if len(v.Names) != len(v.Values) {
			return fmt.Errorf("a window's row of %d names and %d values", len(v.Names), len(v.Values))
		}
		e.Byte(payloadRow)
		e.Varint(v.Start)
		e.Varint(v.End)
		e.Varint(v.Count)
		e.Uvarint(uint64(len(v.Names)))
		for i, name := range v.Names {
			e.String(name)
			e.Float64(v.Values[i])
		}
	default:
		return fmt.Errorf("a payload of type %T, which cannot be stored", p)
	}
	return nil
}

// DecodePayload decodes a payload AppendPayload wrote from d, failing d
// (wire.Decoder.Fail) where the bytes are none. Bytes are copies, nil
// when empty, as a raw message's are; an empty list or map decodes as
// one, as from JSON, not as nil.
func DecodePayload(d *wire.Decoder) any { return decodePayload(d, 0) }

func decodePayload(d *wire.Decoder, depth int) any {
	if depth > MaxPayloadDepth {
		d.Fail(fmt.Errorf("a payload nested deeper than %d", MaxPayloadDepth))
		return nil
	}
	switch tag := d.Byte(); tag {
	case payloadNil:
		return nil
	case payloadBytes:
		if b := d.Bytes(); len(b) > 0 {
			return slices.Clone(b)
		}
		return []byte(nil) // as a raw message's empty payload is
	case payloadString:
		return string(d.Bytes())
	case payloadFloat:
		return d.Float64()
	case payloadBool:
		return d.Bool()
	case payloadMap:
		n := d.Count(minFieldBytes)
		m := make(map[string]any, n)
		for i := 0; i < n && d.Err() == nil; i++ {
			k := string(d.Bytes())
			m[k] = decodePayload(d, depth+1)
		}
		return m
	case payloadList:
		l := make([]any, d.Count(1))
		for i := 0; i < len(l) && d.Err() == nil; i++ {
			l[i] = decodePayload(d, depth+1)
		}
		return l
	case payloadWindow:
		return WindowResult{Start: d.Varint(), End: d.Varint(), Count: d.Varint()}
	case payloadJoin:
		return JoinResult{Start: d.Varint(), End: d.Varint(), Left: d.Float64(), Right: d.Float64(),
			LeftCount: d.Varint(), RightCount: d.Varint()}
	case payloadAlert:
		return Alert{Raised: d.Bool(), Value: d.Float64()}
	case payloadRow:
		row := WindowRow{Start: d.Varint(), End: d.Varint(), Count: d.Varint()}
		n := d.Count(minAggregateBytes)
		row.Names, row.Values = make([]string, n), make([]float64, n)
		for i := 0; i < n && d.Err() == nil; i++ {
			row.Names[i] = string(d.Bytes())
			row.Values[i] = d.Float64()
		}
		return row
	default:
		d.Fail(fmt.Errorf("unknown payload tag %d", tag))
		return nil
	}
}

// EachField calls f with each field of payload p as expressions see it:
// a decoded message's (a map's) entries; a window's row's aggregates,
// and its start, end and count (int64); other payloads have none.
func EachField(p any, f func(name string, v any)) {
	switch p := p.(type) {
	case map[string]any:
		for k, v := range p {
			f(k, v)
		}
	case WindowRow:
		for i, name := range p.Names {
			f(name, p.Values[i])
		}
		f("start", p.Start)
		f("end", p.End)
		f("count", p.Count)
	}
}
