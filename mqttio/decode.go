package mqttio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/ingest"
)

// Format is how a payload is decoded.
type Format uint8

const (
	// JSON payloads must be objects; Record.Payload is a map[string]any.
	JSON Format = iota
	// Raw payloads are kept as bytes in Record.Payload.
	Raw
)

// Decoding says how a message becomes a record.
type Decoding struct {
	Format Format
	// TopicFields names topic levels: {1: "device"} makes level 1 of
	// sensors/+/telemetry the field "device". See ParseTopicPattern.
	TopicFields map[int]string
	// KeyField is the field (from the payload or the topic) that becomes
	// Record.Key; empty for none.
	KeyField string
	// TimeField is a payload field holding the event time, as milliseconds
	// since the epoch or an RFC 3339 string; empty uses the receive time.
	TimeField string
	// TimeBounds are the event times TimeField may give; a reading outside
	// them is a dead letter of cause ingest.CauseBadTime.
	TimeBounds TimeBounds
	// ValueField is a numeric payload field that becomes Record.Value.
	ValueField string
	// MaxPayload is the largest payload accepted; default 256 KiB.
	MaxPayload int
	// Written gives, for a field name above that took something from the
	// environment (${VAR}), the name as the pipeline file writes it:
	// reasons show that, never what the environment gave.
	Written map[string]string
}

// shown is field as a reason shows it (Written).
func (d *Decoding) shown(field string) string {
	if w, ok := d.Written[field]; ok {
		return w
	}
	return field
}

// ParseTopicPattern turns a pattern with named levels, such as
// "sensors/{device}/telemetry", into the subscription filter
// ("sensors/+/telemetry") and the names of its levels ({1: "device"}).
func ParseTopicPattern(p string) (string, map[int]string, error) {
	levels := strings.Split(p, "/")
	fields := make(map[int]string)
	for i, l := range levels {
		switch {
		case strings.HasPrefix(l, "{") && strings.HasSuffix(l, "}"):
			name := l[1 : len(l)-1]
			if name == "" {
				return "", nil, fmt.Errorf("topic %q: level %d has an empty name", p, i)
			}
			fields[i] = name
			levels[i] = "+"
		case strings.ContainsAny(l, "{}"):
			return "", nil, fmt.Errorf("topic %q: level %q mixes a name with text", p, l)
		case l == "#" && i != len(levels)-1:
			return "", nil, fmt.Errorf("topic %q: # must be the last level", p)
		}
	}
	return strings.Join(levels, "/"), fields, nil
}

// FormatKey returns a payload field's value as a record key: a string as
// it is, a number in plain decimal with the digits that give it back
// exactly (1234567, 0.00001, -3.5), anything else as fmt.Sprint writes it.
// fmt.Sprint writes a number from 1e6 on, and below 1e-4, with an
// exponent: 1.234567e+06 is no way to write a device id, and its + is a
// wildcard, which makes a sink's topic of it invalid.
func FormatKey(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// DecodeError says why a message could not become a record; such messages
// go to the dead letters. BadTime says its event time was refused
// (TimeBounds): the dead letter's cause is ingest.CauseBadTime.
type DecodeError struct {
	Reason  string
	BadTime bool
}

func (e *DecodeError) Error() string { return e.Reason }

func decodeErr(format string, args ...any) error {
	return &DecodeError{Reason: fmt.Sprintf(format, args...)}
}

// The event times a payload may give in milliseconds: the years an RFC 3339
// time can express, 0001-01-01 to 9999-12-31, well inside the integers a
// float64 holds exactly.
var (
	minMillis = float64(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	maxMillis = float64(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() - 1)
)

// maxPayloadFields bounds the fields of a JSON payload, at every depth,
// and so the memory a record holds: a reading has a few dozen.
const maxPayloadFields = 1000

// fieldsOver reports whether v holds more than budget object fields and
// list items, at every depth; it stops counting there.
func fieldsOver(v any, budget int) bool {
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			if budget -= len(v); budget < 0 {
				return true
			}
			for _, e := range v {
				if walk(e) {
					return true
				}
			}
		case []any:
			if budget -= len(v); budget < 0 {
				return true
			}
			for _, e := range v {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

// maxPayload is MaxPayload or its default.
func (d *Decoding) maxPayload() int {
	if d.MaxPayload > 0 {
		return d.MaxPayload
	}
	return 256 << 10
}

// decode turns m into r.
func (d *Decoding) decode(m ingest.Message, r *graph.Record) error {
	if max := d.maxPayload(); len(m.Payload) > max {
		return decodeErr("payload over the limit of %d bytes", max)
	}
	*r = graph.Record{Time: m.Received.UnixMilli()}
	if d.Format == Raw {
		r.Payload = append([]byte(nil), m.Payload...)
		if len(d.TopicFields) > 0 && d.KeyField != "" {
			r.Key = strings.Clone(topicField(m.Topic, d.TopicFields, d.KeyField))
		}
		return nil
	}
	if trimmed := bytes.TrimLeft(m.Payload, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return decodeErr("JSON payload is not an object")
	}
	var obj map[string]any
	if err := json.Unmarshal(m.Payload, &obj); err != nil {
		return decodeErr("malformed JSON: %v", err)
	}
	if obj == nil {
		return decodeErr("JSON payload is not an object")
	}
	if fieldsOver(obj, maxPayloadFields) {
		// Held in flight, one such record costs megabytes: 1,000 of 33,000
		// keys each took an agent to 2.3 GB.
		return decodeErr("JSON payload has more than %d fields", maxPayloadFields)
	}
	for i, name := range d.TopicFields {
		if level, ok := topicLevel(m.Topic, i); ok {
			// A copy: a key kept in state would otherwise keep the
			// whole topic alive.
			obj[name] = strings.Clone(level)
		}
	}
	if d.KeyField != "" {
		switch k := obj[d.KeyField].(type) {
		case string:
			r.Key = k
		case float64:
			r.Key = FormatKey(k)
		case nil:
			return decodeErr("key field %q is missing", d.shown(d.KeyField))
		default:
			return decodeErr("key field %q is %s, want a string or a number", d.shown(d.KeyField), describe(k))
		}
	}
	if d.ValueField != "" {
		v, ok := obj[d.ValueField].(float64)
		if !ok {
			return decodeErr("value field %q is %s, want a number", d.shown(d.ValueField), describe(obj[d.ValueField]))
		}
		r.Value = v
	}
	if d.TimeField != "" {
		switch t := obj[d.TimeField].(type) {
		case float64:
			// Bounded so that a garbled or wrongly scaled time (seconds
			// as nanoseconds, say) is refused here, not converted to a
			// wrapped int64 that would drag the watermark to the end
			// of time.
			if !(t >= minMillis && t <= maxMillis) {
				return decodeErr("time field %q is %v ms, outside the years 0001 to 9999", d.shown(d.TimeField), t)
			}
			r.Time = int64(t)
		case string:
			ts, err := time.Parse(time.RFC3339Nano, t)
			if err != nil {
				return decodeErr("time field %q: %v", d.shown(d.TimeField), err)
			}
			r.Time = ts.UnixMilli()
		default:
			return decodeErr("time field %q is %s, want milliseconds or an RFC 3339 string", d.shown(d.TimeField), describe(obj[d.TimeField]))
		}
		if err := d.TimeBounds.check(r.Time, m.Received, d.shown(d.TimeField)); err != nil {
			return err
		}
	}
	r.Payload = obj
	return nil
}

func describe(v any) string {
	switch v.(type) {
	case nil:
		return "missing"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("a %T", v)
}

func topicLevel(topic string, i int) (string, bool) {
	for n := 0; ; n++ {
		level, rest, more := strings.Cut(topic, "/")
		if n == i {
			return level, true
		}
		if !more {
			return "", false
		}
		topic = rest
	}
}

func topicField(topic string, fields map[int]string, name string) string {
	for i, n := range fields {
		if n == name {
			level, _ := topicLevel(topic, i)
			return level
		}
	}
	return ""
}
