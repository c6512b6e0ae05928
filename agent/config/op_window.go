package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/graph/exprop"
)

// WindowSettings are the settings of the kinds that aggregate over
// windows: window and join.
type WindowSettings struct {
	// The windows.
	Window *Window `yaml:"window"`
	// What is made of the values of a window's records.
	Aggregate string `yaml:"aggregate"`
	// Instead of `aggregate`, for a window (a join takes `aggregate`
	// only, for now): many results of its records, by name, each a
	// function of an [expr](https://expr-lang.org) expression that gives
	// a number, as a map's `expr`: `count()`, of the records; `sum`,
	// `min`, `max`, `avg`, `first`, `last` or `stddev` (of the
	// population), as `avg(temperature)`; `p50`, `p90`, `p95` or `p99`,
	// as `p95(vibration)`, and `quantile(expr, q)`, `q` a number from 0
	// to 1, each within 1% of the true quantile; and `distinct(expr)`,
	// of an expression that gives a number or a string, as
	// `distinct(code)`: how many distinct values it gave, exact up to
	// about 6,000 of them but for a rare collision of their hashes, and
	// beyond with a standard error of 0.81% (HyperLogLog's, at precision
	// 14). A name is 1 to 64
	// letters, digits and `_`, not starting with a digit, and none of the
	// output's other fields (`start`, `count`, ...).
	Aggregates map[string]string `yaml:"aggregates"`
	// AggregatesWritten are Aggregates as the file writes them, before
	// ${VAR} substitution (Config.AsWritten), set by the validation: what
	// the operator's reasons for rejecting a record show.
	AggregatesWritten map[string]string `yaml:"-"`
}

// Window is a window operator's windows.
type Window struct {
	Pos
	// How time is cut into windows, per key: `tumbling`, back to back
	// windows of `size`; `sliding`, windows of `size` starting every
	// `slide`; `session`, a key's records until a `gap` without any.
	Kind string `yaml:"kind,required"`
	// The length of a tumbling or sliding window; at least `1ms`.
	Size time.Duration `yaml:"size"`
	// How often a sliding window starts; at least `1ms`, at most `size`.
	Slide time.Duration `yaml:"slide"`
	// The time without records that ends a session; at least `1ms`.
	Gap time.Duration `yaml:"gap"`
	// How long a window is kept after the watermark passed its end, so
	// that late records still update it (each one emits the result
	// again). Not for processing time.
	AllowedLateness time.Duration `yaml:"allowed_lateness" default:"0s"`
	// Which time windows are of: `event`, the records' event time, a
	// window closing when the watermark passes its end; `processing`,
	// the wall clock when they are processed, a window closing when the
	// clock passes its end.
	Time string `yaml:"time" default:"event"`
}

// The values of Window's fields that take one of a few words, as the
// validator checks them and docs/config.md lists them.
var (
	// windowKinds are Window.Kind's.
	windowKinds = []windowKind{{"tumbling", graph.Tumbling}, {"sliding", graph.Sliding}, {"session", graph.Session}}
	// windowTimes are Window.Time's.
	windowTimes = []string{"event", "processing"}
)

// A windowKind is a kind of window Window.Kind may name.
type windowKind struct {
	name string
	kind graph.WindowKind
}

// opWindow aggregates each key's values, or many expressions over its
// records, over windows.
var opWindow = operatorKind{name: "window", needs: []string{"window", "aggregate"}, keyed: true,
	validate: func(v *validator, o *Operator, in exprop.Fields) { v.windowed(o, in, true) },
	build:    buildWindowed(graph.Window),
	doc: "Aggregates each key's values over windows and emits, when a window closes, a record per key: " +
		"its value the aggregate, its time the window's last millisecond, with the window's `start` and `end` " +
		"(milliseconds) and `count` of records (docs/outputs.md). With `aggregates` instead of `aggregate`, " +
		"the record holds every aggregate by its name, and no value; expressions after it may name them, " +
		"and `start`, `end` and `count`, as payload fields."}

// opJoin aggregates each of its two inputs over the same windows and
// subtracts the second's aggregate from the first's.
var opJoin = operatorKind{name: "join", needs: []string{"window", "aggregate"}, keyed: true,
	inputs: inputCount{min: 2, max: 2, says: "has exactly two inputs"},
	validate: func(v *validator, o *Operator, in exprop.Fields) {
		if o.Window != nil && o.Window.Kind == "session" {
			v.errorf(o.Window.Pos, "operator %s: a join needs tumbling or sliding windows", v.c.show(&o.ID))
		}
		v.windowed(o, in, false)
	},
	build: buildWindowed(graph.WindowJoin),
	doc: "Aggregates each of its two inputs over the same tumbling or sliding windows and emits, when a window closes, " +
		"a record per key that both inputs had in it: its value the first's aggregate minus the second's, with " +
		"`start`, `end`, `left`, `right`, `left_count` and `right_count` (docs/outputs.md)."}

// windowed checks the aggregates and the windows of window or join o,
// which reads records that carry the payload fields in; many says
// whether its kind takes aggregates.
func (v *validator) windowed(o *Operator, in exprop.Fields, many bool) {
	c, name := v.c, v.c.show(&o.ID)
	wrote := c.at(&o.Aggregate, Pos{}) != Pos{}
	switch {
	case o.Aggregates != nil && !many:
		v.errorf(c.at(&o.Aggregates, o.Pos), "operator %s: a %s makes one aggregate of each input (aggregate), not many: aggregates is for a window, for now", name, o.Type)
	case o.Aggregates != nil && wrote:
		v.errorf(c.at(&o.Aggregates, o.Pos), "operator %s: aggregate and aggregates: write one of them", name)
	case o.Aggregates != nil:
		v.aggregates(o, in)
	case !wrote && many:
		v.errorf(o.Pos, "operator %s: a %s needs aggregate or aggregates", name, o.Type)
	case !wrote:
		v.errorf(o.Pos, "operator %s: a %s needs aggregate", name, o.Type)
	default:
		if _, err := graph.ParseAggregate(o.Aggregate); err != nil {
			v.errorf(c.at(&o.Aggregate, o.Pos), "operator %s: %s", name, c.reason(&o.Aggregate, err, "aggregate %s is none of count, sum, min, max, avg, first, last"))
		}
	}
	if o.Window == nil {
		v.errorf(o.Pos, "operator %s: a window operator needs window", name)
		return
	}
	if _, err := o.Window.spec(graph.AggCount, c.show); err != nil {
		v.errorf(o.Window.Pos, "%v", err)
	}
	if o.Window.Time == "event" {
		v.needEventTime(o, "its windows would never close; or write window.time: processing")
	}
}

// aggregates checks the aggregates of window o, which reads records that
// carry the payload fields in: their names, and their calls, compiled as
// the operator's are (exprop.CompileCall). It notes the payload fields of
// o's records: the window's and the aggregates'.
func (v *validator) aggregates(o *Operator, in exprop.Fields) {
	c, name := v.c, v.c.show(&o.ID)
	if len(o.Aggregates) == 0 {
		v.errorf(c.at(&o.Aggregates, o.Pos), "operator %s: aggregates is empty: name one at least, such as n: count()", name)
	}
	fields := exprop.Fields{"start": exprop.Number, "end": exprop.Number, "count": exprop.Number}
	o.AggregatesWritten = make(map[string]string, len(o.Aggregates))
	for _, agg := range slices.Sorted(maps.Keys(o.Aggregates)) {
		at := entry{&o.Aggregates, agg}
		fields[agg] = exprop.Number
		o.AggregatesWritten[agg] = c.asWritten(at, o.Aggregates[agg])
		switch {
		case !aggregateName.MatchString(agg):
			v.errorf(c.at(at, o.Pos), "operator %s: aggregates: %q is no name: write 1 to 64 letters, digits and _, not starting with a digit", name, agg)
		case slices.Contains(rowFields, agg):
			v.errorf(c.at(at, o.Pos), "operator %s: aggregates: %q is the name of a field the window's output has besides its aggregates (%s): name it otherwise",
				name, agg, strings.Join(rowFields, ", "))
		}
		if _, err := exprop.CompileCall(o.Aggregates[agg], in); err != nil {
			v.exprError(o, at, "aggregate "+agg, in, err, func(shown, got, want string) string {
				return fmt.Sprintf("aggregate %s %s: its argument must give %s, not %s", agg, shown, want, got)
			})
		}
	}
	v.fields[o.ID] = fields
}

// The names of a window's aggregates: aggregateName matches those
// allowed; rowFields are the fields of its output besides the
// aggregates, in every version and time format (docs/outputs.md).
var (
	aggregateName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	rowFields     = []string{"id", "v", "operator", "key", "time", "value", "aggregate", "start", "end", "count", "payload",
		"time_rfc3339", "start_rfc3339", "end_rfc3339"}
)

// buildWindowed returns the build of window or join: newOp, graph.Window
// or WindowJoin, with the operator's windows and aggregate, or
// aggregates in the order of their names, its late records handed to
// what Hooks.Late returns.
func buildWindowed(newOp func(graph.WindowSpec) func(int) graph.Operator) func(*Operator, Hooks) (func(int) graph.Operator, error) {
	return func(o *Operator, h Hooks) (func(int) graph.Operator, error) {
		var agg graph.Aggregate
		if o.Aggregates == nil {
			var err error
			if agg, err = graph.ParseAggregate(o.Aggregate); err != nil {
				return nil, err
			}
		}
		spec, err := o.Window.Spec(agg)
		if err != nil {
			return nil, err
		}
		if o.Aggregates != nil {
			var aggs []exprop.Aggregate
			for _, name := range slices.Sorted(maps.Keys(o.Aggregates)) {
				aggs = append(aggs, exprop.Aggregate{Name: name, Call: o.Aggregates[name], Shown: o.AggregatesWritten[name]})
			}
			if err := exprop.WindowAggregates(&spec, aggs, o.PayloadFields); err != nil {
				return nil, err
			}
		}
		if h.Late != nil {
			spec.OnLate = h.Late()
		}
		return newOp(spec), nil
	}
}

// Spec turns the window settings into a graph.WindowSpec.
func (w *Window) Spec(agg graph.Aggregate) (graph.WindowSpec, error) { return w.spec(agg, format) }

// spec is Spec, its errors showing the value of a field as show does.
func (w *Window) spec(agg graph.Aggregate, show func(field any) string) (graph.WindowSpec, error) {
	spec := graph.WindowSpec{Size: w.Size, Slide: w.Slide, AllowedLateness: w.AllowedLateness, Aggregate: agg,
		ProcessingTime: w.Time == "processing"}
	if !slices.Contains(windowTimes, w.Time) {
		return spec, fmt.Errorf("window time %s is neither %s nor %s", show(&w.Time), windowTimes[0], windowTimes[1])
	}
	i := slices.IndexFunc(windowKinds, func(k windowKind) bool { return k.name == w.Kind })
	if i < 0 {
		names := make([]string, len(windowKinds))
		for i, k := range windowKinds {
			names[i] = k.name
		}
		last := len(names) - 1
		return spec, fmt.Errorf("window kind %s is not %s or %s", show(&w.Kind), strings.Join(names[:last], ", "), names[last])
	}
	spec.Kind = windowKinds[i].kind
	if spec.Kind == graph.Session {
		spec.Size = w.Gap
	}
	return spec, spec.Validate()
}
