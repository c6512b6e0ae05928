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

// opFilter passes the records its expression is true of.
var opFilter = operatorKind{name: "filter", needs: []string{"expr"}, keepsFields: true,
	validate: func(v *validator, o *Operator, in exprop.Fields) { checkExpr(v, o, in, exprop.CompileFilter) },
	build: func(o *Operator, _ Hooks) (func(int) graph.Operator, error) {
		return exprop.Filter(o.Expr, o.ExprWritten, o.PayloadFields)
	},
	doc: "Passes the records for which `expr` is true."}

// opMap sets each record's value to its expression's.
var opMap = operatorKind{name: "map", needs: []string{"expr"}, keepsFields: true,
	validate: func(v *validator, o *Operator, in exprop.Fields) { checkExpr(v, o, in, exprop.CompileMap) },
	build: func(o *Operator, _ Hooks) (func(int) graph.Operator, error) {
		return exprop.Map(o.Expr, o.ExprWritten, o.PayloadFields)
	},
	doc: "Sets each record's value to `expr`."}

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
