package graph

import "time"

// Dedupe returns a keyed operator that passes the first record of a key and
// drops the key's records whose event time is within ttl after it; the
// next record after that passes and starts a new period. Its state expires
// with event time, so it does not grow with keys seen long ago.
func Dedupe(ttl time.Duration) func(int) Operator {
	return func(int) Operator { return &dedupeOp{ttl: max(1, ttl.Milliseconds())} }
}

type dedupeOp struct {
	BaseOperator
	ttl   int64
	ctx   *Context
	first *ValueState[int64] // event time of the record that started the period
}

func (d *dedupeOp) Open(ctx *Context) (err error) {
	d.ctx = ctx
	d.first, err = NewValueState(ctx, "first", Int64Codec{})
	return err
}

func (d *dedupeOp) ProcessRecord(_ int, r *Record) error {
	if first, ok := d.first.Get(); ok && r.Time >= first && r.Time < first+d.ttl {
		return nil // a repeat within the period
	}
	d.first.Set(r.Time)
	d.ctx.RegisterEventTimer(r.Time + d.ttl)
	d.ctx.Emit(r)
	return nil
}

func (d *dedupeOp) OnTimer(ts int64) error {
	if first, ok := d.first.Get(); ok && first+d.ttl <= ts {
		d.first.Delete()
	}
	return nil
}

// Alert is the Payload of a threshold operator's output.
type Alert struct {
	// Raised is true when the value went above the high mark, false when
	// it fell back below the low mark.
	Raised bool
	Value  float64
}

// Threshold returns a keyed operator with hysteresis: it emits an alert
// (Value 1, Payload Alert{Raised: true}) when a key's value goes above high,
// and one clearing it (Value 0) when the value then falls below low. Values
// between low and high change nothing, so a value hovering at the threshold
// does not flap.
func Threshold(high, low float64) func(int) Operator {
	return func(int) Operator { return &thresholdOp{high: high, low: low} }
}

type thresholdOp struct {
	BaseOperator
	high, low float64
	ctx       *Context
	raised    *ValueState[int64] // present while raised
	out       Record
}

func (t *thresholdOp) Open(ctx *Context) (err error) {
	t.ctx = ctx
	t.raised, err = NewValueState(ctx, "raised", Int64Codec{})
	return err
}

func (t *thresholdOp) ProcessRecord(_ int, r *Record) error {
	_, raised := t.raised.Get()
	switch {
	case !raised && r.Value > t.high:
		t.raised.Set(r.Time)
		t.out = Record{Key: r.Key, Time: r.Time, Value: 1, Payload: Alert{Raised: true, Value: r.Value}}
	case raised && r.Value < t.low:
		t.raised.Delete()
		t.out = Record{Key: r.Key, Time: r.Time, Value: 0, Payload: Alert{Raised: false, Value: r.Value}}
	default:
		return nil
	}
	t.ctx.Emit(&t.out)
	return nil
}
