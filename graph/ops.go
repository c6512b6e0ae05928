package graph

import (
	"fmt"
	"io"
	"math"
)

// Map returns an operator that rewrites each record with fn and emits it.
func Map(fn func(r *Record)) func(int) Operator {
	return MapErr(func(r *Record) error { fn(r); return nil })
}

// MapErr is Map with a function that can fail the job.
func MapErr(fn func(r *Record) error) func(int) Operator {
	return func(int) Operator { return &mapOp{fn: fn} }
}

type mapOp struct {
	BaseOperator
	ctx *Context
	fn  func(*Record) error
	rec Record
}

func (m *mapOp) Open(ctx *Context) error { m.ctx = ctx; return nil }
func (m *mapOp) ProcessRecord(_ int, r *Record) error {
	m.rec = *r
	if err := m.fn(&m.rec); err != nil {
		return err
	}
	m.ctx.Emit(&m.rec)
	return nil
}

// Filter returns an operator that emits the records for which keep is true.
func Filter(keep func(r *Record) bool) func(int) Operator {
	return FilterErr(func(r *Record) (bool, error) { return keep(r), nil })
}

// FilterErr is Filter with a predicate that can fail the job.
func FilterErr(keep func(r *Record) (bool, error)) func(int) Operator {
	return func(int) Operator { return &filterOp{keep: keep} }
}

type filterOp struct {
	BaseOperator
	ctx  *Context
	keep func(*Record) (bool, error)
}

func (f *filterOp) Open(ctx *Context) error { f.ctx = ctx; return nil }
func (f *filterOp) ProcessRecord(_ int, r *Record) error {
	keep, err := f.keep(r)
	if keep && err == nil {
		f.ctx.Emit(r)
	}
	return err
}

// Union returns an operator that emits the records of all its inputs.
func Union() func(int) Operator {
	return func(int) Operator { return &unionOp{} }
}

type unionOp struct {
	BaseOperator
	ctx *Context
}

func (u *unionOp) Open(ctx *Context) error { u.ctx = ctx; return nil }
func (u *unionOp) ProcessRecord(_ int, r *Record) error {
	u.ctx.Emit(r)
	return nil
}

// Count returns a keyed operator that counts records per key and emits, for
// each record, the key's running count as Value. Its input must be
// hash-partitioned.
func Count() func(int) Operator {
	return func(int) Operator { return &aggregateOp{step: func(acc float64, _ *Record) float64 { return acc + 1 }} }
}

// Sum returns a keyed operator that sums Value per key and emits, for each
// record, the key's running sum as Value.
func Sum() func(int) Operator {
	return func(int) Operator {
		return &aggregateOp{step: func(acc float64, r *Record) float64 { return acc + r.Value }}
	}
}

type aggregateOp struct {
	BaseOperator
	ctx  *Context
	step func(acc float64, r *Record) float64
	acc  *ValueState[float64]
	out  Record
}

func (a *aggregateOp) Open(ctx *Context) (err error) {
	a.ctx = ctx
	a.acc, err = NewValueState(ctx, "acc", Float64Codec{})
	return err
}

func (a *aggregateOp) ProcessRecord(_ int, r *Record) error {
	v, _ := a.acc.Get()
	next := a.step(v, r)
	if math.IsInf(next, 0) || math.IsNaN(next) {
		return Reject(fmt.Errorf("key %q: the running total %g and the value %g make %v: the record is left out", r.Key, v, r.Value, next))
	}
	v = next
	a.acc.Set(v)
	a.out = Record{Key: r.Key, Time: r.Time, Value: v}
	a.ctx.Emit(&a.out)
	return nil
}

// JoinLatest returns a two-input keyed operator that keeps the latest record
// of each key from each input and, whenever a record arrives and the other
// input has a record for its key, emits combine(left, right). Both inputs
// must be hash-partitioned on the join key.
func JoinLatest(combine func(left, right *Record) Record) func(int) Operator {
	return func(int) Operator { return &joinLatestOp{combine: combine} }
}

type joinLatestOp struct {
	BaseOperator
	ctx     *Context
	combine func(left, right *Record) Record
	side    [2]*ValueState[float64]
	out     Record
}

func (j *joinLatestOp) Open(ctx *Context) (err error) {
	j.ctx = ctx
	if j.side[0], err = NewValueState(ctx, "left", Float64Codec{}); err != nil {
		return err
	}
	j.side[1], err = NewValueState(ctx, "right", Float64Codec{})
	return err
}

func (j *joinLatestOp) ProcessRecord(input int, r *Record) error {
	j.side[input].Set(r.Value)
	other, ok := j.side[1-input].Get()
	if !ok {
		return nil
	}
	o := Record{Key: r.Key, Time: r.Time, Value: other}
	if input == 0 {
		j.out = j.combine(r, &o)
	} else {
		j.out = j.combine(&o, r)
	}
	j.out.Key = r.Key
	j.ctx.Emit(&j.out)
	return nil
}

// SliceSource returns a source that reads records from a slice shared by all
// subtasks, subtask i of n reading the records at indexes i, i+n, i+2n, ...
// Its offset counts the records it has read, so it replays exactly.
func SliceSource(records []Record) func(int) Source {
	return func(int) Source { return &sliceSource{records: records} }
}

type sliceSource struct {
	records      []Record
	next, stride int
	read         uint64
}

func (s *sliceSource) Open(ctx *Context, offset uint64) error {
	info := ctx.Info()
	s.stride = info.Parallelism
	s.read = offset
	s.next = info.Subtask + int(offset)*info.Parallelism
	return nil
}

func (s *sliceSource) Read(buf []Record) (int, error) {
	n := 0
	for n < len(buf) && s.next < len(s.records) {
		buf[n] = s.records[s.next]
		s.next += s.stride
		n++
	}
	s.read += uint64(n)
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (s *sliceSource) Offset() uint64         { return s.read }
func (s *sliceSource) Ready() <-chan struct{} { return nil }
func (s *sliceSource) Close() error           { return nil }
