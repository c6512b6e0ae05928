package config

import (
	"time"

	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/graph/exprop"
)

// DedupeSettings are the settings of dedupe.
type DedupeSettings struct {
	// How long, in event time, a key's records after one that passed are
	// dropped; at least `1ms`.
	TTL time.Duration `yaml:"ttl"`
}

// opDedupe passes a key's first record of every ttl.
var opDedupe = operatorKind{name: "dedupe", needs: []string{"ttl"}, keyed: true, keepsFields: true,
	validate: func(v *validator, o *Operator, _ exprop.Fields) {
		if o.TTL < time.Millisecond {
			v.errorf(v.c.at(&o.TTL, o.Pos), "operator %s: dedupe needs a ttl of at least 1ms", v.c.show(&o.ID))
		}
	},
	build: func(o *Operator, _ Hooks) (func(int) graph.Operator, error) { return graph.Dedupe(o.TTL), nil },
	doc:   "Passes a key's first record and drops the key's records within `ttl` after it, in event time; the next one passes and starts again."}
