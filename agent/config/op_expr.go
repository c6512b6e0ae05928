package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/graph/exprop"
)

// ExprSettings are the settings of the kinds that evaluate an
// expression over each record: filter and map.
type ExprSettings struct {
	// An [expr](https://expr-lang.org) expression over a record's `key`
	// (a string), `time` (milliseconds), `value` (a number) and payload
	// fields: a filter's gives true or false, a map's a number.
	Expr string `yaml:"expr"`
	// ExprWritten is Expr as the file writes it, before ${VAR}
	// substitution (Config.AsWritten), set by the validation: what the
	// operator's reasons for rejecting a record show.
	ExprWritten string `yaml:"-"`
}

// MapSettings are the settings of a map that makes payloads of its own.
type MapSettings struct {
	// A map's payload of its own, instead of the one it reads: each field
	// by its name, an [expr](https://expr-lang.org) expression over the
	// record read, as `expr` is, that gives what a JSON payload holds
	// (`hum: humidity`, `temp_f: temperature * 9 / 5 + 32`); the fields
	// read and left out are dropped. The record keeps its key and time,
	// and its value unless `expr` sets it. A name is 1 to 64 letters,
	// digits and `_`, not starting with a digit, and not `key`, `time` or
	// `value`, the record's own. Expressions after the map may name the
	// fields, checked against the types their expressions give.
	Fields map[string]string `yaml:"fields"`
	// FieldsWritten are Fields as the file writes them, before ${VAR}
	// substitution (Config.AsWritten), set by the validation: what the
	// operator's reasons for rejecting a record show.
	FieldsWritten map[string]string `yaml:"-"`
}

// opFilter passes the records its expression is true of.
var opFilter = operatorKind{name: "filter", needs: []string{"expr"}, keepsFields: true,
	validate: func(v *validator, o *Operator, in exprop.Fields) { checkExpr(v, o, in, exprop.CompileFilter) },
	build: func(o *Operator, _ Hooks) (func(int) graph.Operator, error) {
		return exprop.Filter(o.Expr, o.ExprWritten, o.PayloadFields)
	},
	doc: "Passes the records for which `expr` is true."}

// opMap sets each record's value to its expression's, or its payload to
// its fields.
var opMap = operatorKind{name: "map", needs: []string{"expr"}, keepsFields: true,
	validate: func(v *validator, o *Operator, in exprop.Fields) {
		if o.Fields == nil || o.Expr != "" {
			checkExpr(v, o, in, exprop.CompileMap)
		}
		if o.Fields != nil {
			v.mapFields(o, in)
		}
	},
	build: func(o *Operator, _ Hooks) (func(int) graph.Operator, error) {
		if o.Fields == nil {
			return exprop.Map(o.Expr, o.ExprWritten, o.PayloadFields)
		}
		fields := make([]exprop.Field, 0, len(o.Fields))
		for _, name := range slices.Sorted(maps.Keys(o.Fields)) {
			fields = append(fields, exprop.Field{Name: name, Expr: o.Fields[name], Shown: o.FieldsWritten[name]})
		}
		return exprop.MapFields(fields, o.Expr, o.ExprWritten, o.PayloadFields)
	},
	doc: "Sets each record's value to `expr`; with `fields`, or `fields` and `expr`, makes its payload those fields " +
		"(and its value `expr`), key and time kept."}

// mapFields checks the fields of map o, which reads records that carry
// the payload fields in: their names, and their expressions, compiled as
// the operator's are (exprop.CompileField). It notes the payload fields
// of o's records: those, of the types their expressions give.
func (v *validator) mapFields(o *Operator, in exprop.Fields) {
	c, name := v.c, v.c.show(&o.ID)
	if len(o.Fields) == 0 {
		v.errorf(c.at(&o.Fields, o.Pos), "operator %s: fields is empty: name one at least, such as hum: humidity", name)
	}
	out := make(exprop.Fields, len(o.Fields))
	o.FieldsWritten = make(map[string]string, len(o.Fields))
	for _, f := range slices.Sorted(maps.Keys(o.Fields)) {
		at := entry{&o.Fields, f}
		o.FieldsWritten[f] = c.asWritten(at, o.Fields[f])
		switch {
		case !aggregateName.MatchString(f):
			v.errorf(c.at(at, o.Pos), "operator %s: fields: %q is no name: write 1 to 64 letters, digits and _, not starting with a digit", name, f)
		case exprop.Own(f):
			v.errorf(c.at(at, o.Pos), "operator %s: fields: %s is a record's own, which every expression reads as the record's %s, not a payload field's: %s",
				name, f, f, map[string]string{"key": "key_by sets a record's key", "time": "a source's time sets a record's time", "value": "expr sets a record's value"}[f])
		}
		_, t, err := exprop.CompileField(o.Fields[f], in)
		if err != nil {
			v.exprError(o, at, "field "+f, in, err, func(shown, got, want string) string {
				return fmt.Sprintf("field %s %s gives %s: a field holds %s", f, shown, got, want)
			})
		}
		out[f] = t
	}
	v.fields[o.ID] = out
}

// checkExpr checks the expression of filter or map o, which reads
// records that carry the payload fields in (nil: not known): it is
// there, it compiles with them by compile (exprop.CompileFilter or
// CompileMap, what the operator is built with), and so gives what o
// needs.
func checkExpr[P any](v *validator, o *Operator, in exprop.Fields, compile func(string, exprop.Fields) (P, error)) {
	o.ExprWritten = v.c.AsWritten(&o.Expr)
	if o.Expr == "" {
		v.errorf(o.Pos, "operator %s: %s needs expr", v.c.show(&o.ID), o.Type)
		return
	}
	if _, err := compile(o.Expr, in); err != nil {
		v.exprError(o, &o.Expr, "expr", in, err, func(shown, got, want string) string {
			return fmt.Sprintf("a %s's expr must give %s; %s gives %s", o.Type, want, shown, got)
		})
	}
}

// exprError reports err, which compiling the expression at field (&o.Expr,
// or an entry of o.Aggregates) over records that carry the payload fields
// in gave, for the expression named as what says ("expr", "aggregate
// temp_avg"): at the very character where the file holds the expression
// as it is, and without the compiler's message if it could quote the
// environment. An expression that compiles, to the wrong type, is
// reported as gives says, with the expression shown, what it gives and
// what it must.
func (v *validator) exprError(o *Operator, field any, what string, in exprop.Fields, err error, gives func(shown, got, want string) string) {
	e := &exprop.Error{Msg: err.Error()}
	errors.As(err, &e)
	p := v.c.at(field, o.Pos)
	if q, ok := v.c.inside(field, e.Column); ok && e.Line == 1 {
		p = q // the very character
	}
	name, shown := v.c.show(&o.ID), v.c.show(field)
	switch {
	case e.Gives != "":
		v.errorf(p, "operator %s: %s", name, gives(shown, e.Gives, e.Want))
	case v.c.fromEnv(field):
		// The compiler's message quotes the expression's names and
		// tokens, and so what the environment gave.
		v.errorf(p, "operator %s: %s %s does not compile; the compiler's message could quote the environment's value, so it is not shown", name, what, shown)
	default:
		msg := e.Msg
		if e.Line > 0 {
			msg += fmt.Sprintf(" (%d:%d)", e.Line, e.Column)
		}
		v.errorf(p, "operator %s: %s %s does not compile: %s%s", name, what, shown, msg, v.namesKnown(e, in))
	}
}

// namesKnown is what an error about e, an expression over records that
// carry the payload fields in, adds when e says a name is unknown: the
// names the records have.
func (v *validator) namesKnown(e *exprop.Error, in exprop.Fields) string {
	if !strings.HasPrefix(e.Msg, "unknown name ") {
		return ""
	}
	var known []string
	hidden := false
	for _, f := range slices.Sorted(maps.Keys(in)) {
		switch {
		case v.hidden[f]:
			hidden = true
		case !exprop.Own(f):
			known = append(known, f)
		}
	}
	msg := "; its records have key, time, value"
	switch {
	case len(known) > 0:
		msg += " and the fields " + strings.Join(known, ", ")
	case !hidden:
		msg += " and no payload fields"
	}
	if hidden {
		msg += ", and fields that levels of topics from the environment name"
	}
	return msg
}
