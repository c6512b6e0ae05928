package graph

import (
	"errors"
	"fmt"
	"time"

	"github.com/cairn-edge/cairn/wire"
)

// IntervalJoinSpec configures an interval join (IntervalJoin).
type IntervalJoinSpec struct {
	// Lower and Upper bound the records of the second input that a record
	// of the first at time t joins: those of its key whose time is in
	// [t+Lower, t+Upper], both included. Lower is at most Upper; either
	// may be negative. Whole milliseconds count.
	Lower, Upper time.Duration
	// Prefixes name each input's fields in the records joined: field f
	// of input i is Prefixes[i]+f (JoinedFields).
	Prefixes [2]string
	// OnLate, if set, is called with every record whose time the
	// watermark has passed when it comes; such records are dropped.
	OnLate func(r *Record)
}

// Validate reports the first setting that cannot work.
func (s IntervalJoinSpec) Validate() error {
	if s.Lower.Milliseconds() > s.Upper.Milliseconds() {
		return fmt.Errorf("an interval join's lower bound %v is above its upper bound %v", s.Lower, s.Upper)
	}
	return nil
}

// IntervalJoin returns a two-input keyed operator that joins each record
// of the first input at time t with each record of the second of its key
// whose time is in [t+Lower, t+Upper] (Flink's interval join, in event
// time): one record per pair, whatever their order of arrival, its time
// the later of the two, its value the first's, its payload the fields of
// both (joinedFields). A record that comes after the watermark passed its
// time is late: dropped (OnLate), for the records it would have joined
// may be gone. Each input's records are keyed state until the watermark
// passes the last time a record of the other input can join them (t+Upper
// for the first input's, t-Lower for the second's), when a timer drops
// them: its state is bounded by the records of that span. Both inputs
// must be hash-partitioned by the same key and carry event times.
func IntervalJoin(spec IntervalJoinSpec) func(int) Operator {
	return func(int) Operator { return &intervalJoinOp{spec: spec} }
}

type intervalJoinOp struct {
	BaseOperator
	spec         IntervalJoinSpec
	lower, upper int64 // ms
	names        [2]*fieldNamer
	ctx          *Context
	sides        [2]*ValueState[[]byte] // each input's records kept, as joinedRecords
	enc          wire.Encoder           // the record being processed, as kept
	out          Record
}

func (j *intervalJoinOp) Open(ctx *Context) (err error) {
	if err := j.spec.Validate(); err != nil {
		return err
	}
	j.ctx, j.lower, j.upper = ctx, j.spec.Lower.Milliseconds(), j.spec.Upper.Milliseconds()
	j.names = [2]*fieldNamer{newFieldNamer(j.spec.Prefixes[0]), newFieldNamer(j.spec.Prefixes[1])}
	if j.sides[0], err = NewValueState(ctx, "left", &joinedRecordsCodec{}); err != nil {
		return err
	}
	j.sides[1], err = NewValueState(ctx, "right", &joinedRecordsCodec{})
	return err
}

// expiry is the time after which no record of the other input can join
// one of input at t: the watermark passing it, the record is dropped.
func (j *intervalJoinOp) expiry(input int, t int64) int64 {
	if input == 0 {
		return t + j.upper
	}
	return t - j.lower
}

func (j *intervalJoinOp) ProcessRecord(input int, r *Record) error {
	wm := j.ctx.Watermark()
	if wm != MinWatermark && r.Time <= wm {
		if j.spec.OnLate != nil {
			j.spec.OnLate(r)
		}
		return nil
	}
	j.enc = j.enc[:0]
	if err := appendJoined(&j.enc, r); err != nil {
		return Reject(fmt.Errorf("key %q: %w", r.Key, err))
	}
	others, _ := j.sides[1-input].Get()
	for kept := range eachJoined(others) {
		left, right := r.Time, kept.time
		if input == 1 {
			left, right = right, left
		}
		if right < left+j.lower || right > left+j.upper {
			continue
		}
		o := kept.record(r.Key)
		if input == 0 {
			j.emit(r, &o)
		} else {
			j.emit(&o, r)
		}
	}
	if exp := j.expiry(input, r.Time); wm == MinWatermark || exp > wm {
		mine, _ := j.sides[input].Get()
		j.sides[input].Set(append(newJoinedRecords(mine), j.enc...))
		j.ctx.RegisterEventTimer(exp)
	}
	return nil
}

// emit sends the record that joins left and right.
func (j *intervalJoinOp) emit(left, right *Record) {
	j.out = Record{Key: left.Key, Time: max(left.Time, right.Time), Value: left.Value,
		Payload: joinedFields(j.names, [2]*Record{left, right}, false)}
	j.ctx.Emit(&j.out)
}

// OnTimer drops the key's records that nothing to come can join.
func (j *intervalJoinOp) OnTimer(ts int64) error {
	for input, s := range j.sides {
		kept, ok := s.Get()
		if !ok {
			continue
		}
		left := newJoinedRecords(nil)
		for k := range eachJoined(kept) {
			if j.expiry(input, k.time) > ts {
				left = append(left, k.bytes...)
			}
		}
		switch {
		case len(left) == 1:
			s.Delete()
		case len(left) < len(kept):
			s.Set(left)
		}
	}
	return nil
}

// LookupJoin returns a two-input keyed operator that keeps the latest
// record of each key of its second input (a table: set points, a
// device's data) and emits each record of the first with the table's
// record of its key: its key, time, value and origin, and a payload of
// its fields and the table record's fields, value and time, named with
// prefix (joinedFields). A record of the first input whose key has no
// table record yet is dropped, handed to onUnmatched if it is set; a
// table record emits nothing. The inputs are taken in the order the
// records arrive, not by their times: a table record applies to the
// records that come after it. Its state is a record per key of the
// table. Both inputs must be hash-partitioned by the same key.
func LookupJoin(prefix string, onUnmatched func(r *Record)) func(int) Operator {
	return func(int) Operator {
		return &lookupJoinOp{names: [2]*fieldNamer{newFieldNamer(""), newFieldNamer(prefix)}, onUnmatched: onUnmatched}
	}
}

type lookupJoinOp struct {
	BaseOperator
	names       [2]*fieldNamer // the stream's, of no prefix, and the table's
	onUnmatched func(*Record)
	ctx         *Context
	table       *ValueState[[]byte] // the key's table record, as joinedRecords
	enc         wire.Encoder
	out         Record
}

func (l *lookupJoinOp) Open(ctx *Context) (err error) {
	l.ctx = ctx
	l.table, err = NewValueState(ctx, "table", &joinedRecordsCodec{})
	return err
}

func (l *lookupJoinOp) ProcessRecord(input int, r *Record) error {
	if input == 1 {
		l.enc = append(l.enc[:0], joinedRecordsFormat)
		if err := appendJoined(&l.enc, r); err != nil {
			return Reject(fmt.Errorf("key %q: %w", r.Key, err))
		}
		l.table.Set(l.enc)
		return nil
	}
	kept, ok := l.table.Get()
	if !ok {
		if l.onUnmatched != nil {
			l.onUnmatched(r)
		}
		return nil
	}
	for k := range eachJoined(kept) {
		t := k.record(r.Key)
		l.out = Record{Key: r.Key, Time: r.Time, Value: r.Value, Origin: r.Origin,
			Payload: joinedFields(l.names, [2]*Record{r, &t}, true)}
		l.ctx.Emit(&l.out)
	}
	return nil
}

// joinedFields returns the payload of a record that joins two: each
// one's fields, as expressions see them (EachField: a decoded message's,
// a window's row's), named by its namer, and its value and time, as the
// fields value and time; with keepFirst, the first's fields keep their
// names and its value and time are the record's own. Of two fields of
// one name, the second record's is kept. Times and a row's counts are
// numbers (float64), as JSON's are.
func joinedFields(names [2]*fieldNamer, recs [2]*Record, keepFirst bool) map[string]any {
	n := 4
	for _, r := range recs {
		if m, ok := r.Payload.(map[string]any); ok {
			n += len(m)
		}
	}
	out := make(map[string]any, n)
	for i, r := range recs {
		names := names[i]
		EachField(r.Payload, func(name string, v any) {
			if n, ok := v.(int64); ok {
				v = float64(n)
			}
			out[names.name(name)] = v
		})
		if i == 0 && keepFirst {
			continue
		}
		out[names.name("value")], out[names.name("time")] = r.Value, float64(r.Time)
	}
	return out
}

// A fieldNamer names an input's fields in the records a join makes: its
// prefix and the field's name. It keeps the names it made, up to
// maxNamesKept, so that a field of every record costs no new string.
type fieldNamer struct {
	prefix string
	kept   map[string]string
}

// maxNamesKept bounds the names a fieldNamer keeps: readings whose fields
// are named anew each time cost a string each, not memory for ever.
const maxNamesKept = 1024

func newFieldNamer(prefix string) *fieldNamer { return &fieldNamer{prefix: prefix} }

func (f *fieldNamer) name(field string) string {
	if f.prefix == "" {
		return field
	}
	if name, ok := f.kept[field]; ok {
		return name
	}
	name := f.prefix + field
	if f.kept == nil {
		f.kept = make(map[string]string)
	}
	if len(f.kept) < maxNamesKept {
		f.kept[field] = name
	}
	return name
}

// A join's records kept, in keyed state: the byte joinedRecordsFormat,
// then each record as its time (varint), value (float64) and payload
// (AppendPayload's bytes, length-prefixed), in the order they came.
const joinedRecordsFormat byte = 1

// newJoinedRecords returns kept, a key's records (nil: none yet), to be
// appended to.
func newJoinedRecords(kept []byte) []byte {
	if len(kept) == 0 {
		return []byte{joinedRecordsFormat}
	}
	return kept
}

// appendJoined appends r as joinedRecords keep it, or returns what makes
// its payload one they cannot.
func appendJoined(e *wire.Encoder, r *Record) error {
	e.Varint(r.Time)
	e.Float64(r.Value)
	at := len(*e)
	e.Uvarint(0) // the payload's length, set below
	if err := AppendPayload(e, r.Payload); err != nil {
		return err
	}
	payload := (*e)[at+1:]
	if len(payload) < 0x80 { // its length fits the byte kept for it
		(*e)[at] = byte(len(payload))
		return nil
	}
	body := append([]byte(nil), payload...)
	*e = (*e)[:at]
	e.Bytes(body)
	return nil
}

// joinedRecord is a record a join keeps, its payload still encoded.
type joinedRecord struct {
	time    int64
	value   float64
	payload []byte
	bytes   []byte // all of it, as kept
}

// record is k decoded, of key.
func (k joinedRecord) record(key string) Record {
	d := wire.NewDecoder(k.payload)
	return Record{Key: key, Time: k.time, Value: k.value, Payload: DecodePayload(&d)}
}

// eachJoined iterates over the records kept, which joinedRecordsCodec
// checked when they were restored.
func eachJoined(kept []byte) func(yield func(joinedRecord) bool) {
	return func(yield func(joinedRecord) bool) {
		if len(kept) == 0 {
			return
		}
		d := wire.NewDecoder(kept[1:])
		for d.Len() > 0 && d.Err() == nil {
			rest := d.Len()
			k := joinedRecord{time: d.Varint(), value: d.Float64(), payload: d.Bytes()}
			start := len(kept) - rest
			k.bytes = kept[start : start+rest-d.Len()]
			if d.Err() != nil || !yield(k) {
				return
			}
		}
	}
}

// joinedRecordsCodec keeps a join's records as the bytes they are kept in
// (joinedRecordsFormat). It decodes a key's into the array it decoded the
// key before into, valid until it decodes the next: a join reads a key's
// records and stores them before it reads another's.
type joinedRecordsCodec struct{ reuse []byte }

func (c *joinedRecordsCodec) Append(dst []byte, v []byte) []byte { return append(dst, v...) }

func (c *joinedRecordsCodec) Decode(src []byte) ([]byte, error) {
	c.reuse = append(c.reuse[:0], src...)
	return c.reuse, nil
}

// Check reports what makes src no records a join keeps: another format,
// a record cut short, a payload that does not decode.
func (*joinedRecordsCodec) Check(src []byte) error {
	if len(src) == 0 || src[0] != joinedRecordsFormat {
		return errors.New("a join's records of an unknown format")
	}
	d := wire.NewDecoder(src[1:])
	for d.Len() > 0 && d.Err() == nil {
		d.Varint()
		d.Float64()
		p := wire.NewDecoder(d.Bytes())
		DecodePayload(&p)
		if err := p.End(); err != nil {
			return fmt.Errorf("a join's record: %w", err)
		}
	}
	if err := d.End(); err != nil {
		return fmt.Errorf("a join's records: %w", err)
	}
	return nil
}
