// Package exprop holds the operators written as expressions
// (expr-lang/expr): filter and map. An expression sees a record as the
// variables key, time and value, plus every field of a map payload (a
// decoded JSON message, say).
package exprop

import (
	"fmt"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

	"github.com/cairn-edge/cairn/graph"
)

func compile(src string) (*vm.Program, error) {
	p, err := expr.Compile(src, expr.AllowUndefinedVariables())
	if err != nil {
		return nil, fmt.Errorf("expression %q: %w", src, err)
	}
	return p, nil
}

// firstLine is an expression's error without the lines that draw where in
// the expression it is: a dead letter's reason, a log line's attribute.
func firstLine(err error) string {
	line, _, _ := strings.Cut(err.Error(), "\n")
	return line
}

func env(r *graph.Record) map[string]any {
	m := make(map[string]any, 8)
	if p, ok := r.Payload.(map[string]any); ok {
		for k, v := range p {
			m[k] = v
		}
	}
	m["key"], m["time"], m["value"] = r.Key, r.Time, r.Value
	return m
}

// Filter returns an operator that keeps the records for which src is true.
// A record for which it fails or is not a boolean is rejected
// (graph.RecordError).
func Filter(src string) (func(int) graph.Operator, error) {
	p, err := compile(src)
	if err != nil {
		return nil, err
	}
	return graph.FilterErr(func(r *graph.Record) (bool, error) {
		out, err := expr.Run(p, env(r))
		if err != nil {
			return false, graph.Reject(fmt.Errorf("filter %q: %s", src, firstLine(err)))
		}
		keep, ok := out.(bool)
		if !ok {
			return false, graph.Reject(fmt.Errorf("filter %q gave %T, want true or false", src, out))
		}
		return keep, nil
	}), nil
}

// Map returns an operator that sets each record's Value to src. A record
// for which it fails or gives no number is rejected (graph.RecordError).
func Map(src string) (func(int) graph.Operator, error) {
	p, err := compile(src)
	if err != nil {
		return nil, err
	}
	return graph.MapErr(func(r *graph.Record) error {
		out, err := expr.Run(p, env(r))
		if err != nil {
			return graph.Reject(fmt.Errorf("map %q: %s", src, firstLine(err)))
		}
		switch v := out.(type) {
		case float64:
			r.Value = v
		case int:
			r.Value = float64(v)
		default:
			return graph.Reject(fmt.Errorf("map %q gave %T, want a number", src, out))
		}
		return nil
	}), nil
}
