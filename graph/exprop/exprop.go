// Package exprop holds the operators written as expressions
// (expr-lang/expr), filter and map (of the value, Map, or of a payload of
// its own, MapFields), the arguments of a window's many aggregates
// (WindowAggregates) and the keys of key_by (KeyBy). An expression sees
// a record as the variables key (a string), time (milliseconds, an
// int64) and value (a float64), plus every field of a map payload (a
// decoded JSON message, say), or of a window's row: start, end and count
// (int64s) and each aggregate by its name (a float64). Its integers,
// literals up to 2^63-1 and arithmetic on them, are int64 on every
// platform, 32-bit ARM too (third_party/README.md).
//
// CompileFilter, CompileMap, CompileField, CompileKey and CompileCall are
// the one place an expression is compiled: the config's validation and
// the operators use them alike, so a pipeline that validates runs the
// expressions it validated.
package exprop

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/types"
	"github.com/expr-lang/expr/vm"

	"github.com/cairn-edge/cairn/graph"
)

// Type is what a payload field holds, as decoded JSON holds it.
type Type uint8

// The types of payload fields, named in a pipeline file as number,
// string, bool, object, list and any.
const (
	Any Type = iota
	Number
	String
	Bool
	Object
	List
)

var typeNames = []string{Any: "any", Number: "number", String: "string", Bool: "bool", Object: "object", List: "list"}

func (t Type) String() string { return typeNames[t] }

// ParseType reads a type by its name, in any case.
func ParseType(name string) (Type, error) {
	if i := slices.IndexFunc(typeNames, func(n string) bool { return strings.EqualFold(n, name) }); i >= 0 {
		return Type(i), nil
	}
	return Any, fmt.Errorf("type %q is none of %s", name, strings.Join(typeNames[1:], ", ")+" or any")
}

// exprType is t for expr's checker: the Go types JSON decodes to.
func (t Type) exprType() types.Type {
	switch t {
	case Number:
		return types.Float64
	case String:
		return types.String
	case Bool:
		return types.Bool
	case Object:
		return types.TypeOf(map[string]any(nil))
	case List:
		return types.TypeOf([]any(nil))
	}
	return types.Any
}

// Fields are the payload fields of the records an expression sees, with
// their types: then a name that is none of them, key, time or value is an
// error, and so are operations their types do not allow. A nil Fields is
// not known: any name may be used, and is nil in a record without it.
//
// A record may still lack a field its Fields name, or hold another type
// there: the expression then fails on it, and the operator rejects it.
type Fields map[string]Type

// Own reports whether name is one of the variables every record has,
// whatever its payload (key, time and value): they hide a payload field
// of the same name.
func Own(name string) bool { return name == "key" || name == "time" || name == "value" }

// environment is the options that compile an expression over records
// whose payload fields are fields.
func environment(fields Fields) []expr.Option {
	env := types.Map{"key": types.String, "time": types.Int64, "value": types.Float64}
	for name, t := range fields {
		if !Own(name) {
			env[name] = t.exprType()
		}
	}
	opts := []expr.Option{expr.Env(env)}
	if fields == nil {
		opts = append(opts, expr.AllowUndefinedVariables())
	}
	return opts
}

// Error is an expression that does not compile, or that gives what its
// operator cannot use.
type Error struct {
	Expr string
	// Msg says what is wrong, on one line.
	Msg string
	// Line and Column (from 1, in characters) are where in Expr it goes
	// wrong; 0 when that is not known.
	Line, Column int
	// Gives, for an expression that compiles, is what it gives ("a
	// number") and Want what its operator needs ("true or false").
	Gives, Want string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("expression %q: %s (%d:%d)", e.Expr, e.Msg, e.Line, e.Column)
	}
	return fmt.Sprintf("expression %q: %s", e.Expr, e.Msg)
}

// CompileFilter compiles the expression of a filter over records whose
// payload fields are fields. It must give true or false: one whose type
// is known to be another is an error (*Error).
func CompileFilter(src string, fields Fields) (*vm.Program, error) {
	return compile(src, fields, "true or false", func(k reflect.Kind) bool { return k == reflect.Bool })
}

// CompileMap compiles the expression of a map over records whose payload
// fields are fields. It must give a number: one whose type is known to be
// another is an error (*Error).
func CompileMap(src string, fields Fields) (*vm.Program, error) {
	return compile(src, fields, "a number", isNumber)
}

func isNumber(k reflect.Kind) bool { return k >= reflect.Int && k <= reflect.Float64 }

func compile(src string, fields Fields, want string, ok func(reflect.Kind) bool) (*vm.Program, error) {
	p, err := expr.Compile(src, environment(fields)...)
	if err != nil {
		e := &Error{Expr: src, Msg: err.Error()}
		if fe := (*file.Error)(nil); errors.As(err, &fe) {
			e.Msg, e.Line, e.Column = fe.Message, fe.Line, fe.Column+1
		}
		e.Msg, _, _ = strings.Cut(e.Msg, "\n")
		return nil, e
	}
	// Not expr.AsBool or AsFloat64: they convert the result at run time,
	// and a field a record lacks (nil) would become false, the record
	// dropped rather than rejected. Filter and Map check what they get.
	nt := p.Node().Nature()
	if known := nt.Type != nil && nt.Kind != reflect.Interface; known && !ok(nt.Kind) {
		gives := describe(nt.Kind)
		if nt.Kind == reflect.Struct {
			gives = "a " + nt.Type.String() // now(): a time.Time, no object
		}
		return nil, &Error{Expr: src, Msg: fmt.Sprintf("gives %s, not %s", gives, want), Gives: gives, Want: want}
	}
	return p, nil
}

// describe names a kind of result for an error.
func describe(k reflect.Kind) string {
	switch {
	case k == reflect.Bool:
		return "true or false"
	case k == reflect.String:
		return "a string"
	case isNumber(k):
		return "a number"
	case k == reflect.Map || k == reflect.Struct:
		return "an object"
	case k == reflect.Slice || k == reflect.Array:
		return "a list"
	}
	return k.String()
}

// firstLine is an expression's error without the lines that draw where in
// the expression it is: a dead letter's reason, a log line's attribute.
func firstLine(err error) string {
	line, _, _ := strings.Cut(err.Error(), "\n")
	return line
}

// env is what an expression sees of r: its payload's fields, then its
// own, which hide a field of the same name.
func env(r *graph.Record) map[string]any {
	m := make(map[string]any, 8)
	graph.EachField(r.Payload, func(name string, v any) { m[name] = v })
	m["key"], m["time"], m["value"] = r.Key, r.Time, r.Value
	return m
}

// Filter returns an operator that keeps the records for which src is true
// (compiled by CompileFilter). A record for which it fails or is not a
// boolean is rejected (graph.RecordError), for a reason that shows the
// expression as shown ("": src), which may be as the user wrote it rather
// than src.
func Filter(src, shown string, fields Fields) (func(int) graph.Operator, error) {
	p, err := CompileFilter(src, fields)
	if err != nil {
		return nil, err
	}
	shown = cmp.Or(shown, src)
	return graph.FilterErr(func(r *graph.Record) (bool, error) {
		out, err := expr.Run(p, env(r))
		if err != nil {
			return false, graph.Reject(fmt.Errorf("filter %q: %s", shown, firstLine(err)))
		}
		keep, ok := out.(bool)
		if !ok {
			return false, graph.Reject(fmt.Errorf("filter %q gave %T, want true or false", shown, out))
		}
		return keep, nil
	}), nil
}

// Map returns an operator that sets each record's Value to src (compiled
// by CompileMap). A record for which it fails or gives no number is
// rejected (graph.RecordError), for a reason that shows the expression as
// shown ("": src).
func Map(src, shown string, fields Fields) (func(int) graph.Operator, error) {
	p, err := CompileMap(src, fields)
	if err != nil {
		return nil, err
	}
	shown = cmp.Or(shown, src)
	return graph.MapErr(func(r *graph.Record) error {
		out, err := expr.Run(p, env(r))
		if err != nil {
			return graph.Reject(fmt.Errorf("map %q: %s", shown, firstLine(err)))
		}
		r.Value, err = mapValue(shown, out)
		return err
	}), nil
}

// number is out as a float64, if it is a number: expr gives float64,
// int64 (integers: time, literals, arithmetic), or int (len, count).
func number(out any) (float64, bool) {
	switch v := out.(type) {
	case float64:
		return v, true
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	}
	rv := reflect.ValueOf(out)
	if rv.IsValid() && rv.CanFloat() {
		return rv.Float(), true
	}
	if rv.IsValid() && rv.CanInt() {
		return float64(rv.Int()), true
	}
	if rv.IsValid() && rv.CanUint() {
		return float64(rv.Uint()), true
	}
	return 0, false
}
