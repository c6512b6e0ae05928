package config

import (
	"fmt"
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

// opWindow aggregates each key's values over windows.
var opWindow = operatorKind{name: "window", needs: []string{"window", "aggregate"}, keyed: true,
	validate: func(v *validator, o *Operator, _ exprop.Fields) { v.windowed(o) },
	build:    buildWindowed(graph.Window),
	doc: "Aggregates each key's values over windows and emits, when a window closes, a record per key: " +
		"its value the aggregate, its time the window's last millisecond, with the window's `start` and `end` " +
		"(milliseconds) and `count` of records (docs/outputs.md)."}

// opJoin aggregates each of its two inputs over the same windows and
// subtracts the second's aggregate from the first's.
var opJoin = operatorKind{name: "join", needs: []string{"window", "aggregate"}, keyed: true,
	inputs: inputCount{min: 2, max: 2, says: "has exactly two inputs"},
	validate: func(v *validator, o *Operator, _ exprop.Fields) {
		if o.Window != nil && o.Window.Kind == "session" {
			v.errorf(o.Window.Pos, "operator %s: a join needs tumbling or sliding windows", v.c.show(&o.ID))
		}
		v.windowed(o)
	},
	build: buildWindowed(graph.WindowJoin),
	doc: "Aggregates each of its two inputs over the same tumbling or sliding windows and emits, when a window closes, " +
		"a record per key that both inputs had in it: its value the first's aggregate minus the second's, with " +
		"`start`, `end`, `left`, `right`, `left_count` and `right_count` (docs/outputs.md)."}

// windowed checks the aggregate and the windows of window or join o.
func (v *validator) windowed(o *Operator) {
	if _, err := graph.ParseAggregate(o.Aggregate); err != nil {
		v.errorf(v.c.at(&o.Aggregate, o.Pos), "operator %s: %s", v.c.show(&o.ID), v.c.reason(&o.Aggregate, err, "aggregate %s is none of count, sum, min, max, avg, first, last"))
	}
	if o.Window == nil {
		v.errorf(o.Pos, "operator %s: a window operator needs window", v.c.show(&o.ID))
		return
	}
	if _, err := o.Window.spec(graph.AggCount, v.c.show); err != nil {
		v.errorf(o.Window.Pos, "%v", err)
	}
}

// buildWindowed returns the build of window or join: newOp, graph.Window
// or WindowJoin, with the operator's windows and aggregate, its late
// records handed to what Hooks.Late returns.
func buildWindowed(newOp func(graph.WindowSpec) func(int) graph.Operator) func(*Operator, Hooks) (func(int) graph.Operator, error) {
	return func(o *Operator, h Hooks) (func(int) graph.Operator, error) {
		agg, err := graph.ParseAggregate(o.Aggregate)
		if err != nil {
			return nil, err
		}
		spec, err := o.Window.Spec(agg)
		if err != nil {
			return nil, err
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
