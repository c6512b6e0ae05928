package mqttio

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/cairn-edge/cairn/graph"
)

// OutputFormat is the shape of the messages a sink publishes: version 2,
// the default, or version 1, that of cairn before it (Output). docs/outputs.md
// gives both field by field.
//
// Version 2 is one JSON object of lower-case fields, in this order:
//
//	id         the output's id (Output)
//	v          2: what tells this shape from version 1, which has no v
//	operator   the sink's input: the source or operator that made the record
//	key        the record's key
//	time       its event time, in milliseconds since the epoch (TimeMillis),
//	           an RFC 3339 string (TimeRFC3339), or both: time and time_rfc3339
//	value      its value; of an alarm, the reading that raised or cleared it;
//	           none of a window's row
//	aggregate  what value is of: count, sum, min, max, avg, first or last,
//	           for the output of an aggregating operator; none of a row
//	then what the record holds besides:
//	  a window's   start, end (times as time is), count
//	  a row's      start, end, count, then each aggregate's value under
//	               its name, in the row's order (graph.WindowRow)
//	  a join's     start, end, left, right, left_count, right_count
//	  an alarm's   raised (true, or false when it cleared)
//	  a reading's  payload (its fields, as the source decoded them)
//	then Add's fields, in the order of their names.
//
// Names renames version 2's fields, but for id and v (and a row's
// aggregates, named by the window).
type OutputFormat struct {
	Version int // 2 or 1; 0 is 2
	// Operator and Aggregate name the sink's input and what its values
	// are ("": none), for version 2.
	Operator, Aggregate string
	Time                TimeFormat
	Names               map[string]string
	Add                 map[string]string
	// Aggregates name what a window's rows (graph.WindowRow) of the
	// sink's input carry, for Check: a field renamed or added under one
	// of them would be written twice.
	Aggregates []string

	added []string // Add's names, sorted (prepare)
}

// prepare readies f for appendBody.
func (f *OutputFormat) prepare() { f.added = slices.Sorted(maps.Keys(f.Add)) }

// TimeFormat is how version 2 gives times.
type TimeFormat uint8

const (
	// TimeMillis gives milliseconds since the epoch (the default).
	TimeMillis TimeFormat = iota
	// TimeRFC3339 gives RFC 3339 strings, in UTC, to the millisecond.
	TimeRFC3339
	// TimeBoth gives both: the field of milliseconds, and the field's name
	// with _rfc3339 of the string.
	TimeBoth
)

// ParseTimeFormat returns the TimeFormat named millis, rfc3339 or both.
func ParseTimeFormat(s string) (TimeFormat, error) {
	switch s {
	case "", "millis":
		return TimeMillis, nil
	case "rfc3339":
		return TimeRFC3339, nil
	case "both":
		return TimeBoth, nil
	}
	return 0, fmt.Errorf("time format %q: want millis, rfc3339 or both", s)
}

// OutputFields are the fields of version 2 that Names may rename: every
// one but id and v.
var OutputFields = []string{"operator", "key", "time", "value", "aggregate", "start", "end", "count",
	"left", "right", "left_count", "right_count", "raised", "payload"}

// Check returns what is wrong with f: a version other than 1 or 2, a name
// for a field version 2 does not have, two fields given one name, a field
// renamed to the name of one of Aggregates, a field added under a name
// that version 2 uses (an aggregate's too).
func (f *OutputFormat) Check() error {
	if f.Version != 0 && f.Version != 1 && f.Version != 2 {
		return fmt.Errorf("output version %d: want 1 or 2", f.Version)
	}
	used := map[string]string{"id": "id", "v": "v"}
	for _, name := range OutputFields {
		to := f.name(name)
		if to == "" {
			return fmt.Errorf("output field %s renamed to nothing", name)
		}
		if other, ok := used[to]; ok {
			return fmt.Errorf("output fields %s and %s would both be %q", other, name, to)
		}
		used[to] = name
		if f.Time == TimeBoth && (name == "time" || name == "start" || name == "end") {
			used[to+"_rfc3339"] = name
		}
	}
	for name := range f.Names {
		if !slices.Contains(OutputFields, name) {
			return fmt.Errorf("output has no field %q to rename: it has %v", name, OutputFields)
		}
	}
	rows := f.Aggregates
	if f.Version == 1 {
		rows = nil // version 1 holds a row in its payload
	}
	for _, name := range rows {
		if other, ok := used[name]; ok {
			return fmt.Errorf("output field %s renamed to %q, the name of an aggregate of the window", other, name)
		}
	}
	for name := range f.Add {
		if other, ok := used[name]; ok {
			return fmt.Errorf("output field %q added is the name of the field %s", name, other)
		}
		if slices.Contains(rows, name) {
			return fmt.Errorf("output field %q added is the name of an aggregate of the window", name)
		}
	}
	return nil
}

// name is what version 2 calls field.
func (f *OutputFormat) name(field string) string {
	if to, ok := f.Names[field]; ok {
		return to
	}
	return field
}

// errUnencodable is wrapped by the errors about records an output cannot
// hold: a value JSON has no number for (NaN, ±Inf), or a payload it cannot
// encode.
var errUnencodable = errors.New("the record cannot be encoded as JSON")

// appendBody appends to dst the message of r, but for its id: what follows
// `{"id":""` (the sink puts the id in when it publishes).
func (f *OutputFormat) appendBody(dst []byte, r *graph.Record) ([]byte, error) {
	if f.Version == 1 {
		payload := r.Payload
		if row, ok := payload.(graph.WindowRow); ok {
			v1, err := appendRowV1(nil, row)
			if err != nil {
				return dst, err
			}
			payload = json.RawMessage(v1)
		}
		body, err := json.Marshal(Output{Key: r.Key, Time: r.Time, Value: r.Value, Payload: payload})
		if err != nil {
			return dst, fmt.Errorf("%w: %w", errUnencodable, err)
		}
		return append(dst, body[len(`{"id":""`):]...), nil
	}
	value, payload := r.Value, r.Payload
	if a, ok := payload.(graph.Alert); ok {
		value = a.Value // the reading; the record's value, 1 or 0, is raised
	}
	if !finite(value) {
		return dst, fmt.Errorf("%w: value %v", errUnencodable, value)
	}
	_, isRow := payload.(graph.WindowRow) // its values are its aggregates'
	dst = append(dst, `,"v":2`...)
	if f.Operator != "" {
		dst = f.appendString(dst, "operator", f.Operator)
	}
	dst = f.appendString(dst, "key", r.Key)
	dst = f.appendTime(dst, "time", r.Time)
	if !isRow {
		dst = f.appendNumber(dst, "value", value)
	}
	if f.Aggregate != "" && !isRow {
		dst = f.appendString(dst, "aggregate", f.Aggregate)
	}
	switch p := payload.(type) {
	case nil:
	case graph.WindowResult:
		dst = f.appendTime(dst, "start", p.Start)
		dst = f.appendTime(dst, "end", p.End)
		dst = f.appendInt(dst, "count", p.Count)
	case graph.WindowRow:
		if err := checkRow(p); err != nil {
			return dst, err
		}
		dst = f.appendTime(dst, "start", p.Start)
		dst = f.appendTime(dst, "end", p.End)
		dst = f.appendInt(dst, "count", p.Count)
		for i, name := range p.Names {
			dst = appendJSONNumber(appendKey(dst, name), p.Values[i])
		}
	case graph.JoinResult:
		if !finite(p.Left) || !finite(p.Right) {
			return dst, fmt.Errorf("%w: a join of %v and %v", errUnencodable, p.Left, p.Right)
		}
		dst = f.appendTime(dst, "start", p.Start)
		dst = f.appendTime(dst, "end", p.End)
		dst = f.appendNumber(dst, "left", p.Left)
		dst = f.appendNumber(dst, "right", p.Right)
		dst = f.appendInt(dst, "left_count", p.LeftCount)
		dst = f.appendInt(dst, "right_count", p.RightCount)
	case graph.Alert:
		dst = append(appendKey(dst, f.name("raised")), strconv.FormatBool(p.Raised)...)
	default:
		body, err := json.Marshal(p)
		if err != nil {
			return dst, fmt.Errorf("%w: %w", errUnencodable, err)
		}
		dst = append(appendKey(dst, f.name("payload")), body...)
	}
	for _, name := range f.added {
		dst = appendJSONString(appendKey(dst, name), f.Add[name])
	}
	return append(dst, '}'), nil
}

// checkRow returns the errUnencodable of a row whose aggregates JSON
// cannot hold: one of no finite number, or of names and values that differ
// in number.
func checkRow(row graph.WindowRow) error {
	if len(row.Names) != len(row.Values) {
		return fmt.Errorf("%w: a window's row of %d names and %d values", errUnencodable, len(row.Names), len(row.Values))
	}
	for i, v := range row.Values {
		if !finite(v) {
			return fmt.Errorf("%w: %s %v", errUnencodable, row.Names[i], v)
		}
	}
	return nil
}

// appendRowV1 appends row as version 1's payload: {"Start":…,"End":…,
// "Count":…}, as of a window of one aggregate, then each aggregate's value
// under its name.
func appendRowV1(dst []byte, row graph.WindowRow) ([]byte, error) {
	if err := checkRow(row); err != nil {
		return dst, err
	}
	dst = strconv.AppendInt(append(dst, `{"Start":`...), row.Start, 10)
	dst = strconv.AppendInt(append(dst, `,"End":`...), row.End, 10)
	dst = strconv.AppendInt(append(dst, `,"Count":`...), row.Count, 10)
	for i, name := range row.Names {
		dst = appendJSONNumber(appendKey(dst, name), row.Values[i])
	}
	return append(dst, '}'), nil
}

func (f *OutputFormat) appendString(dst []byte, field, s string) []byte {
	return appendJSONString(appendKey(dst, f.name(field)), s)
}

func (f *OutputFormat) appendNumber(dst []byte, field string, v float64) []byte {
	return appendJSONNumber(appendKey(dst, f.name(field)), v)
}

func (f *OutputFormat) appendInt(dst []byte, field string, n int64) []byte {
	return strconv.AppendInt(appendKey(dst, f.name(field)), n, 10)
}

// appendTime appends the time ms (milliseconds since the epoch) as f.Time
// says.
func (f *OutputFormat) appendTime(dst []byte, field string, ms int64) []byte {
	name := f.name(field)
	rfc := func(dst []byte) []byte {
		dst = append(dst, '"')
		dst = time.UnixMilli(ms).UTC().AppendFormat(dst, "2006-01-02T15:04:05.000Z07:00")
		return append(dst, '"')
	}
	switch f.Time {
	case TimeRFC3339:
		return rfc(appendKey(dst, name))
	case TimeBoth:
		dst = strconv.AppendInt(appendKey(dst, name), ms, 10)
		return rfc(appendKey(dst, name+"_rfc3339"))
	}
	return strconv.AppendInt(appendKey(dst, name), ms, 10)
}

// appendKey appends `,"name":`.
func appendKey(dst []byte, name string) []byte {
	return append(appendJSONString(append(dst, ','), name), ':')
}

// appendJSONString appends s as a JSON string, as encoding/json writes it
// (invalid UTF-8 as U+FFFD, <, > and & escaped).
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	const hex = "0123456789abcdef"
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c == '\b':
				dst = append(dst, '\\', 'b')
			case c == '\f':
				dst = append(dst, '\\', 'f')
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// appendJSONNumber appends v, a finite number, as encoding/json writes a
// float64.
func appendJSONNumber(dst []byte, v float64) []byte {
	format := byte('f')
	if abs := math.Abs(v); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, v, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
