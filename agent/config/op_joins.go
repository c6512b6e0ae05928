package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/graph/exprop"
)

// JoinSettings are the settings of interval_join.
type JoinSettings struct {
	// Which records of the second input a record of the first joins:
	// those of its key from `before` its time to `after` it, in event
	// time.
	Within *Within `yaml:"within"`
}

// Within is an interval join's span: the records of the second input
// from Before a record of the first to After it, both included.
type Within struct {
	Pos
	// How long before a record of the first input a record of the second
	// may be and join it.
	Before time.Duration `yaml:"before" default:"0s"`
	// How long after a record of the first input a record of the second
	// may be and join it.
	After time.Duration `yaml:"after" default:"0s"`
}

// opIntervalJoin joins the records of two inputs that are of one key and
// close in event time.
var opIntervalJoin = operatorKind{name: "interval_join", needs: []string{"within"}, keyed: true,
	inputs: inputCount{min: 2, max: 2, says: "has exactly two inputs"},
	validate: func(v *validator, o *Operator, _ exprop.Fields) {
		if o.Within == nil {
			v.errorf(o.Pos, "operator %s: an interval_join needs within: {before: ..., after: ...}", v.c.show(&o.ID))
		}
		v.needEventTime(o, "it would keep every record")
		v.joined(o, false)
	},
	build: func(o *Operator, h Hooks) (func(int) graph.Operator, error) {
		spec := graph.IntervalJoinSpec{Lower: -o.Within.Before, Upper: o.Within.After, Prefixes: [2]string{joinPrefix(o.Inputs[0]), joinPrefix(o.Inputs[1])}}
		if h.Late != nil {
			spec.OnLate = h.Late()
		}
		return graph.IntervalJoin(spec), nil
	},
	doc: "Joins each record of the first input with each record of the second of its key from `within.before` " +
		"its time to `within.after` it, in event time, whatever their order: a record per pair, its time the later one's, " +
		"its value the first's, its payload the fields of both, each named after its input (`<input>_<field>`, with " +
		"`<input>_value` and `<input>_time`; a `-` or `.` of the input's id written `_`). Records are kept until the watermark passes what can still join them; " +
		"a record that comes after that is late, and dropped (docs/pipelines.md)."}

// opLookupJoin adds to each record of the first input the latest record
// of its key of the second.
var opLookupJoin = operatorKind{name: "lookup_join", keyed: true,
	inputs:   inputCount{min: 2, max: 2, says: "has exactly two inputs: the records, then the table"},
	validate: func(v *validator, o *Operator, _ exprop.Fields) { v.joined(o, true) },
	build: func(o *Operator, h Hooks) (func(int) graph.Operator, error) {
		var unmatched func(*graph.Record)
		if h.Unmatched != nil {
			unmatched = h.Unmatched()
		}
		return graph.LookupJoin(joinPrefix(o.Inputs[1]), unmatched), nil
	},
	doc: "Keeps the latest record of each key of the second input (a table: set points, a device's data) and emits " +
		"each record of the first with the table record's fields added, named after the second input " +
		"(`<input>_<field>`, with `<input>_value` and `<input>_time`; a `-` or `.` of its id written `_`), in the order the records arrive. " +
		"A record whose key has no table record yet is dropped, and counted; a table record emits nothing " +
		"(docs/pipelines.md)."}

// joinPrefix is what the fields of input's records start with in a
// join's: its id, with each `-` and `.` written `_` so that an
// expression can name them (supply-line's temp is supply_line_temp), and
// `_`.
func joinPrefix(input string) string {
	return strings.NewReplacer("-", "_", ".", "_").Replace(input) + "_"
}

// joined checks interval or lookup join o, and notes the payload fields
// of its records: those of its inputs, each named after its input (but
// the first's of a lookup, which keep their names), with each input's
// value and time. Two fields of one name are an error, the first said.
func (v *validator) joined(o *Operator, lookup bool) {
	c, name := v.c, v.c.show(&o.ID)
	if len(o.Inputs) != 2 {
		return
	}
	if o.Inputs[0] == o.Inputs[1] {
		v.errorf(c.at(entry{&o.Inputs, 1}, o.Pos), "operator %s: joins %s with itself: name two inputs", name, c.show(entry{&o.Inputs, 1}))
		return
	}
	fields := exprop.Fields{}
	from := map[string]string{} // what each field is, for an error
	said := false               // an error of two fields: the first is enough
	add := func(field string, t exprop.Type, what string) {
		if was, ok := from[field]; ok && !said {
			said = true
			v.errorf(c.at(&o.Inputs, o.Pos), "operator %s: its records would have two fields %s, %s and %s: rename a field or an input", name, field, was, what)
		}
		fields[field], from[field] = t, what
	}
	for i, in := range o.Inputs {
		known := v.fields[in]
		if known == nil {
			v.fields[o.ID] = nil // not known, so unchecked
			return
		}
		if lookup && i == 0 {
			for _, f := range slices.Sorted(maps.Keys(known)) {
				add(f, known[f], fmt.Sprintf("field %s of %s", f, in))
			}
			continue
		}
		for _, f := range slices.Sorted(maps.Keys(known)) {
			if f != "value" && f != "time" { // the record's own hide them
				add(joinPrefix(in)+f, known[f], fmt.Sprintf("field %s of %s", f, in))
			}
		}
		add(joinPrefix(in)+"value", exprop.Number, "the value of "+in)
		add(joinPrefix(in)+"time", exprop.Number, "the time of "+in)
	}
	v.fields[o.ID] = fields
}
