package graph

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/axiomhq/hyperloglog"
)

// WindowKind is how event time is cut into windows.
type WindowKind uint8

const (
	// Tumbling windows are fixed, back to back: [0, size), [size, 2 size)...
	Tumbling WindowKind = iota
	// Sliding windows are fixed and overlap: one starts every slide.
	Sliding
	// Session windows close after a gap without records for the key.
	Session
)

// Aggregate is what a window computes over its records' values.
type Aggregate uint8

const (
	AggCount Aggregate = iota
	AggSum
	AggMin
	AggMax
	AggAvg
	AggFirst // the value with the smallest event time
	AggLast  // the value with the largest event time
)

var aggregateNames = []string{"count", "sum", "min", "max", "avg", "first", "last"}

func (a Aggregate) String() string {
	switch {
	case int(a) < len(aggregateNames):
		return aggregateNames[a]
	case a == AggStddev:
		return "stddev"
	case a == AggQuantile:
		return "quantile"
	case a == AggDistinct:
		return "distinct"
	}
	return "aggregate?"
}

// ParseAggregate parses an Aggregate's String form, in any case.
func ParseAggregate(s string) (Aggregate, error) {
	if i := slices.IndexFunc(aggregateNames, func(n string) bool { return strings.EqualFold(n, s) }); i >= 0 {
		return Aggregate(i), nil
	}
	return 0, fmt.Errorf("unknown aggregate %q (want one of %v)", s, aggregateNames)
}

// WindowSpec configures an event-time window operator.
type WindowSpec struct {
	Kind WindowKind
	// Size is the window length, or the gap that closes a session.
	Size time.Duration
	// Slide is how often a sliding window starts.
	Slide time.Duration
	// AllowedLateness keeps a window after the watermark passed its end, so
	// that late records still update it; each one re-emits the result.
	AllowedLateness time.Duration
	Aggregate       Aggregate
	// ProcessingTime assigns records to windows by the wall clock when they
	// are processed instead of by their event time; windows close when the
	// clock passes their end, and AllowedLateness does not apply.
	ProcessingTime bool
	// OnLate, if set, is called with every record that arrives after its
	// windows were discarded; such records are dropped.
	OnLate func(r *Record)
	// Aggregates, if any, are what a window makes of its records instead
	// of Aggregate: each a named result, all emitted together as one
	// record per key and window, its Payload a WindowRow (a window, not a
	// join). A window keeps of its records what its aggregates need, under
	// state names made of it: a restore with aggregates that need other
	// things starts the windows afresh rather than misreading them.
	Aggregates []NamedAggregate
	// Args fills args (len NArgs) with the values of a record that the
	// Aggregates read (NamedAggregate.Arg), once per record; an error
	// rejects the record (a RecordError, as Reject makes), which then
	// counts in no window; so does a value that is no finite number, or
	// that makes a window's sum or stddev none, or, for a quantile, one
	// of a magnitude over about 1.26e308. It fills hashes (len NHashes)
	// with the 64-bit hashes of the values that distinct counts
	// (AggDistinct) read, uniformly distributed, one value's alike in
	// every record and run (its hash stands for it in stored state).
	// Needed with Aggregates that read any.
	Args    func(r *Record, args []float64, hashes []uint64) error
	NArgs   int
	NHashes int
}

// Validate reports the first setting that cannot work.
func (w WindowSpec) Validate() error {
	switch {
	case w.Size < time.Millisecond:
		return errors.New("window size (or session gap) must be at least 1ms")
	case w.Kind == Sliding && (w.Slide < time.Millisecond || w.Slide > w.Size):
		return errors.New("a sliding window's slide must be at least 1ms and at most its size")
	case w.AllowedLateness < 0:
		return errors.New("allowed lateness must not be negative")
	case w.Aggregate > AggLast:
		return errors.New("unknown aggregate")
	}
	return w.checkAggregates()
}

// ValidateJoin reports the first setting that cannot work in a window
// join (WindowJoin): Validate's, and sessions or many aggregates, which a
// join does not make.
func (w WindowSpec) ValidateJoin() error {
	switch {
	case w.Kind == Session:
		return errors.New("a window join needs tumbling or sliding windows")
	case len(w.Aggregates) > 0:
		return errors.New("a window join makes one aggregate, not many")
	}
	return w.Validate()
}

// WindowResult is the Payload of a window's output record; the record's Key
// is the window's key, Value the aggregate and Time the window's last
// millisecond.
type WindowResult struct {
	Start, End int64 // [Start, End) in milliseconds
	Count      int64
}

// Window returns a keyed operator that aggregates each key's values over
// event-time windows, emitting a result when the watermark passes a
// window's end: a WindowResult, or with WindowSpec.Aggregates a
// WindowRow. Its windows and timers are keyed state, so a restore
// neither loses nor re-fires a window (invariant I10). Its input must be
// hash-partitioned and carry event times.
func Window(spec WindowSpec) func(int) Operator {
	return func(int) Operator { return &windowOp{spec: spec} }
}

// JoinResult is the Payload of a window join's output record; the record's
// Value is Left minus Right.
type JoinResult struct {
	Start, End            int64
	Left, Right           float64 // each input's aggregate
	LeftCount, RightCount int64
}

// WindowJoin returns a two-input keyed operator that aggregates each input
// over the same tumbling or sliding windows and, when the watermark passes
// a window's end, emits one record per key and window that both inputs
// reached (an inner join), with both aggregates in a JoinResult.
func WindowJoin(spec WindowSpec) func(int) Operator {
	return func(int) Operator { return &windowOp{spec: spec, join: true} }
}

// windowAcc is one open window of one key (and, in a join, one side).
type windowAcc struct {
	side                int64 // 0, or 1 for a join's right input
	start, end          int64
	count               int64
	sum, min, max       float64
	first, last         float64
	firstTime, lastTime int64
	fired               bool
	touched             bool // got the record being processed; not stored
	// With many aggregates, the partials, sketches and distinct sketches of
	// its rowLayout, which keep what sum to last keep of one aggregate
	// (unused then), and
	// firstTime and lastTime only if the layout needs them.
	partials  []float64
	sketches  []sketch
	distincts []*hyperloglog.Sketch
}

func (a *windowAcc) add(r *Record) {
	if a.count == 0 || r.Time < a.firstTime {
		a.first, a.firstTime = r.Value, r.Time
	}
	if a.count == 0 || r.Time >= a.lastTime {
		a.last, a.lastTime = r.Value, r.Time
	}
	if a.count == 0 {
		a.min, a.max = r.Value, r.Value
	}
	a.count++
	a.sum += r.Value
	a.min = min(a.min, r.Value)
	a.max = max(a.max, r.Value)
}

func (a *windowAcc) merge(b *windowAcc) {
	if b.firstTime < a.firstTime {
		a.first, a.firstTime = b.first, b.firstTime
	}
	if b.lastTime >= a.lastTime {
		a.last, a.lastTime = b.last, b.lastTime
	}
	a.count += b.count
	a.sum += b.sum
	a.min, a.max = min(a.min, b.min), max(a.max, b.max)
	a.start, a.end = min(a.start, b.start), max(a.end, b.end)
}

func (a *windowAcc) result(agg Aggregate) float64 {
	switch agg {
	case AggCount:
		return float64(a.count)
	case AggSum:
		return a.sum
	case AggMin:
		return a.min
	case AggMax:
		return a.max
	case AggAvg:
		return a.sum / float64(a.count)
	case AggFirst:
		return a.first
	}
	return a.last
}

type windowOp struct {
	BaseOperator
	spec WindowSpec
	join bool
	ctx  *Context
	// rows lays out the windows of many aggregates (nil: of one), args and
	// hashes the arguments of the record being processed, and query reads
	// their sketches' quantiles.
	rows   *rowLayout
	args   []float64
	hashes []uint64
	query  sketchQuery
	// windows are a key's open windows; fired, with a lateness, its
	// tumbling or sliding windows the watermark passed, kept for late
	// records (nil: they stay among the open ones), so that a record on
	// time reads and stores only the windows still open.
	windows *ValueState[[]windowAcc]
	fired   *ValueState[[]windowAcc]
	spans   [][2]int64 // assign's, reused record after record
	out     Record
}

func (o *windowOp) Open(ctx *Context) (err error) {
	validate := o.spec.Validate
	if o.join {
		validate = o.spec.ValidateJoin
	}
	if err := validate(); err != nil {
		return err
	}
	o.ctx = ctx
	// state opens keyed state of windows, named base if of one aggregate.
	state := func(base string) (*ValueState[[]windowAcc], error) {
		if o.rows == nil {
			return NewValueState[[]windowAcc](ctx, base, &reusingWindowsCodec{})
		}
		return NewValueState[[]windowAcc](ctx, o.rows.stateName(base), &reusingRowsCodec{rowsCodec: rowsCodec{o.rows}})
	}
	if len(o.spec.Aggregates) > 0 {
		o.rows, o.args, o.hashes = newRowLayout(o.spec.Aggregates, o.spec.NArgs), make([]float64, o.spec.NArgs), make([]uint64, o.spec.NHashes)
	}
	if o.windows, err = state("windows"); err != nil {
		return err
	}
	if o.spec.Kind != Session && o.spec.AllowedLateness > 0 && !o.spec.ProcessingTime {
		o.fired, err = state("fired")
	}
	return err
}

// assign appends to out the windows [start, end) that a record at t
// belongs to.
func (o *windowOp) assign(out [][2]int64, t int64) [][2]int64 {
	size := o.spec.Size.Milliseconds()
	switch o.spec.Kind {
	case Session:
		return append(out, [2]int64{t, t + size})
	case Sliding:
		slide := o.spec.Slide.Milliseconds()
		for start := floorDiv(t, slide) * slide; start > t-size; start -= slide {
			out = append(out, [2]int64{start, start + size})
		}
		return out
	}
	start := floorDiv(t, size) * size
	return append(out, [2]int64{start, start + size})
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func (o *windowOp) ProcessRecord(input int, r *Record) error {
	if o.rows != nil {
		if err := o.readArgs(r); err != nil {
			return err
		}
	}
	side := int64(0)
	if o.join {
		side = int64(input)
	}
	if o.spec.ProcessingTime {
		return o.processAt(side, r, o.ctx.ProcessingTime(), MinWatermark, 0)
	}
	return o.processAt(side, r, r.Time, o.ctx.Watermark(), o.spec.AllowedLateness.Milliseconds())
}

// readArgs reads r's arguments into o.args, or returns the error that
// rejects r.
func (o *windowOp) readArgs(r *Record) error {
	if o.spec.NArgs+o.spec.NHashes == 0 {
		return nil
	}
	if err := o.spec.Args(r, o.args, o.hashes); err != nil {
		if _, ok := errors.AsType[*RecordError](err); ok {
			return err
		}
		return Reject(err)
	}
	for arg, v := range o.args {
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return Reject(fmt.Errorf("key %q: %s reads %v, no finite number: the record is left out", r.Key, o.rows.readBy[arg], v))
		}
	}
	for _, arg := range o.rows.sketched {
		if v := o.args[arg]; !sketchHolds(v) {
			return Reject(fmt.Errorf("key %q: %s reads %g, beyond what a quantile's sketch holds: the record is left out", r.Key, o.rows.readBy[arg], v))
		}
	}
	return nil
}

// processAt adds r to the windows of time t, given the current watermark
// (MinWatermark for processing time, whose windows are never late).
func (o *windowOp) processAt(side int64, r *Record, t, wm, lateness int64) error {
	o.spans = o.assign(o.spans[:0], t)
	passed := func(span [2]int64) bool { return wm != MinWatermark && span[1]-1 <= wm }
	open, _ := o.windows.Get()
	var fired []windowAcc
	late := o.fired != nil && slices.ContainsFunc(o.spans, passed)
	if late {
		fired, _ = o.fired.Get()
	}
	// inFired reports whether span's windows are among the fired ones: a
	// window the watermark passed is, unless an older cairn's state holds
	// it among the open ones (and so both sides of a join's).
	inFired := func(span [2]int64) bool {
		return late && passed(span) && !slices.ContainsFunc(open, func(w windowAcc) bool { return w.start == span[0] && w.end == span[1] })
	}
	// A value that would make a window's sum (and so its average) no
	// finite number is left out of every window, before any changes (with
	// many aggregates, rowLayout.check leaves a record out once the
	// windows are changed and merged, before they are stored).
	if o.rows == nil {
		for _, span := range o.spans {
			ws := open
			if inFired(span) {
				ws = fired
			}
			sum := r.Value
			if i := indexWindow(ws, side, span); i >= 0 {
				sum += ws[i].sum
			}
			if math.IsInf(sum, 0) || math.IsNaN(sum) {
				return Reject(fmt.Errorf("key %q: the value %g makes the sum of the window [%d, %d) %v: the record is left out", r.Key, r.Value, span[0], span[1], sum))
			}
		}
	}
	toOpen, toFired := false, false
	for _, span := range o.spans {
		switch {
		case span[1]-1+lateness <= wm && wm != MinWatermark:
			// discarded already: late beyond lateness
		case inFired(span):
			fired, toFired = o.addToWindow(fired, side, span, r), true
		default:
			open, toOpen = o.addToWindow(open, side, span, r), true
		}
	}
	if !toOpen && !toFired {
		if o.spec.OnLate != nil {
			o.spec.OnLate(r)
		}
		return nil
	}
	if toOpen && o.spec.Kind == Session {
		open = mergeSessions(open, o.rows)
	}
	if o.rows != nil {
		if err := o.rows.check(r.Key, open); err != nil {
			return err
		}
		if err := o.rows.check(r.Key, fired); err != nil {
			return err
		}
	}
	if toOpen {
		o.windows.Set(o.settle(open, wm, lateness))
	}
	if toFired {
		o.fired.Set(o.settle(fired, wm, lateness))
	}
	return nil
}

// indexWindow is the index in ws of side's window of span, or -1.
func indexWindow(ws []windowAcc, side int64, span [2]int64) int {
	return slices.IndexFunc(ws, func(w windowAcc) bool { return w.side == side && w.start == span[0] && w.end == span[1] })
}

// addToWindow adds r (of o.args, with many aggregates) to side's window
// of span in ws, appended if there is none, and marks it touched.
func (o *windowOp) addToWindow(ws []windowAcc, side int64, span [2]int64, r *Record) []windowAcc {
	i := indexWindow(ws, side, span)
	if i < 0 {
		if o.rows != nil {
			ws = append(ws, o.rows.newWindow(span))
		} else {
			ws = append(ws, windowAcc{side: side, start: span[0], end: span[1]})
		}
		i = len(ws) - 1
	}
	if o.rows != nil {
		o.rows.add(&ws[i], r.Time, o.args, o.hashes)
	} else {
		ws[i].add(r)
	}
	ws[i].touched = true
	return ws
}

// settle emits, or asks for the timers of, the windows of ws that the
// record being processed touched (merged already, for sessions), and
// returns ws to be stored.
func (o *windowOp) settle(ws []windowAcc, wm, lateness int64) []windowAcc {
	for i := range ws {
		w := &ws[i]
		if !w.touched {
			continue // only windows this record changed emit or need timers
		}
		w.touched = false
		switch {
		case w.fired || w.end-1 <= wm && wm != MinWatermark:
			// A late record within the lateness: emit the update now, and
			// discard the window when the lateness has passed.
			o.emit(ws, w)
			o.register(w.end - 1 + lateness)
		default:
			o.register(w.end - 1)
		}
	}
	return ws
}

// register asks for a timer at ts in the windows' time domain.
func (o *windowOp) register(ts int64) {
	if o.spec.ProcessingTime {
		o.ctx.RegisterProcessingTimer(ts)
	} else {
		o.ctx.RegisterEventTimer(ts)
	}
}

// OnProcessingTimer fires processing-time windows.
func (o *windowOp) OnProcessingTimer(ts int64) error { return o.OnTimer(ts) }

// mergeSessions merges overlapping session windows of one key, laid out
// by rows if not nil. Of two windows that start together, the one stored
// before the other is merged into first, so that its first value stays
// first: the earlier record's.
func mergeSessions(ws []windowAcc, rows *rowLayout) []windowAcc {
	slices.SortStableFunc(ws, func(a, b windowAcc) int { return cmp.Compare(a.start, b.start) })
	out := ws[:1]
	for _, w := range ws[1:] {
		last := &out[len(out)-1]
		if w.start < last.end {
			fired, touched := last.fired && w.fired, last.touched || w.touched
			if rows != nil {
				rows.merge(last, &w)
			}
			last.merge(&w)
			last.fired, last.touched = fired, touched
			continue
		}
		out = append(out, w)
	}
	return out
}

// emit sends w's result; in a join, only once both sides of its span have
// records, as one result of both. ws are the key's windows.
func (o *windowOp) emit(ws []windowAcc, w *windowAcc) {
	w.fired = true
	if o.rows != nil {
		o.out = Record{Key: o.ctx.CurrentKey(), Time: w.end - 1,
			Payload: WindowRow{Start: w.start, End: w.end, Count: w.count, Names: o.rows.names, Values: o.rows.results(w, &o.query)}}
		o.ctx.Emit(&o.out)
		return
	}
	if !o.join {
		o.out = Record{Key: o.ctx.CurrentKey(), Time: w.end - 1, Value: w.result(o.spec.Aggregate),
			Payload: WindowResult{Start: w.start, End: w.end, Count: w.count}}
		o.ctx.Emit(&o.out)
		return
	}
	i := slices.IndexFunc(ws, func(x windowAcc) bool { return x.side != w.side && x.start == w.start && x.end == w.end })
	if i < 0 {
		return
	}
	left, right := w, &ws[i]
	if w.side == 1 {
		left, right = right, w
	}
	right.fired, left.fired = true, true
	l, r := left.result(o.spec.Aggregate), right.result(o.spec.Aggregate)
	o.out = Record{Key: o.ctx.CurrentKey(), Time: w.end - 1, Value: l - r,
		Payload: JoinResult{Start: w.start, End: w.end, Left: l, Right: r, LeftCount: left.count, RightCount: right.count}}
	o.ctx.Emit(&o.out)
}

// OnTimer fires the key's windows ending at ts and discards those whose
// lateness has passed; with a lateness, the fired ones move to the fired
// windows kept for it.
func (o *windowOp) OnTimer(ts int64) error {
	lateness := o.spec.AllowedLateness.Milliseconds()
	if o.spec.ProcessingTime {
		lateness = 0
	}
	over := func(w windowAcc) bool { return w.end-1+lateness <= ts }
	open, _ := o.windows.Get()
	for i := range open {
		w := &open[i]
		if w.end-1 == ts && !w.fired {
			o.emit(open, w)
			if lateness > 0 {
				o.register(w.end - 1 + lateness)
			}
		}
	}
	if o.fired == nil {
		// Get decoded open for this call: keep what is not discarded in place.
		storeWindows(o.windows, slices.DeleteFunc(open, over))
		return nil
	}
	// The windows the watermark passed (fired now, or by an older cairn,
	// which kept them among the open ones) join the fired ones kept.
	fired, _ := o.fired.Get()
	n := len(fired)
	fired = slices.DeleteFunc(fired, over)
	changed := len(fired) < n
	for _, w := range open {
		if w.end-1 <= ts && !over(w) {
			fired, changed = append(fired, w), true
		}
	}
	if changed {
		storeWindows(o.fired, fired)
	}
	n = len(open)
	if open = slices.DeleteFunc(open, func(w windowAcc) bool { return w.end-1 <= ts }); len(open) < n {
		storeWindows(o.windows, open)
	}
	return nil
}

// storeWindows stores a key's windows ws in s, or deletes them if there
// are none.
func storeWindows(s *ValueState[[]windowAcc], ws []windowAcc) {
	if len(ws) == 0 {
		s.Delete()
		return
	}
	s.Set(ws)
}
