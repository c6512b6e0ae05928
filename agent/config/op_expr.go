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
	// PayloadFields are the payload fields of the records the operator
	// reads, as the validation found them (nil: not known); its
	// expression is compiled with them.
	PayloadFields exprop.Fields `yaml:"-"`
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
// needs. It notes in in o.PayloadFields.
func checkExpr[P any](v *validator, o *Operator, in exprop.Fields, compile func(string, exprop.Fields) (P, error)) {
	o.PayloadFields, o.ExprWritten = in, v.c.AsWritten(&o.Expr)
	if o.Expr == "" {
		v.errorf(o.Pos, "operator %s: %s needs expr", v.c.show(&o.ID), o.Type)
		return
	}
	_, err := compile(o.Expr, o.PayloadFields)
	if err == nil {
		return
	}
	e := &exprop.Error{Msg: err.Error()}
	errors.As(err, &e)
	p := v.c.at(&o.Expr, o.Pos)
	if q, ok := v.c.inside(&o.Expr, e.Column); ok && e.Line == 1 {
		p = q // the very character
	}
	name, expr := v.c.show(&o.ID), v.c.show(&o.Expr)
	switch {
	case e.Gives != "":
		v.errorf(p, "operator %s: a %s's expr must give %s; %s gives %s", name, o.Type, e.Want, expr, e.Gives)
	case v.c.fromEnv(&o.Expr):
		// The compiler's message quotes the expression's names and
		// tokens, and so what the environment gave.
		v.errorf(p, "operator %s: expr %s does not compile; the compiler's message could quote the environment's value, so it is not shown", name, expr)
	default:
		msg := e.Msg
		if e.Line > 0 {
			msg += fmt.Sprintf(" (%d:%d)", e.Line, e.Column)
		}
		if strings.HasPrefix(e.Msg, "unknown name ") {
			var known []string
			hidden := false
			for _, f := range slices.Sorted(maps.Keys(o.PayloadFields)) {
				switch {
				case v.hidden[f]:
					hidden = true
				case !exprop.Own(f):
					known = append(known, f)
				}
			}
			msg += "; its records have key, time, value"
			switch {
			case len(known) > 0:
				msg += " and the fields " + strings.Join(known, ", ")
			case !hidden:
				msg += " and no payload fields"
			}
			if hidden {
				msg += ", and fields that levels of topics from the environment name"
			}
		}
		v.errorf(p, "operator %s: expr %s does not compile: %s", name, expr, msg)
	}
}
