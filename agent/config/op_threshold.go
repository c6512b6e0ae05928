package config

import (
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/graph/exprop"
)

// ThresholdSettings are the settings of threshold.
type ThresholdSettings struct {
	// An alert is raised (value 1) when a key's value goes above it.
	High *float64 `yaml:"high"`
	// An alert raised is cleared (value 0) when the key's value falls
	// below it; at most `high`.
	Low *float64 `yaml:"low"`
}

// opThreshold raises and clears alerts as each key's value crosses its
// marks.
var opThreshold = operatorKind{name: "threshold", needs: []string{"high", "low"}, keyed: true,
	validate: func(v *validator, o *Operator, _ exprop.Fields) {
		switch {
		case o.High == nil || o.Low == nil:
			v.errorf(o.Pos, "operator %s: threshold needs high and low", v.c.show(&o.ID))
		case *o.Low > *o.High:
			v.errorf(v.c.at(&o.Low, o.Pos), "operator %s: threshold's low (%s) is above its high (%s)", v.c.show(&o.ID), v.c.show(&o.Low), v.c.show(&o.High))
		}
	},
	build: func(o *Operator, _ Hooks) (func(int) graph.Operator, error) {
		return graph.Threshold(*o.High, *o.Low), nil
	},
	doc: "Emits an alert when a key's value goes above `high`, value 1, and when it then falls below `low`, value 0, " +
		"its payload `Raised` and `Value`; values in between change nothing, so one hovering at a mark does not flap."}
