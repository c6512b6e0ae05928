package exprop

import (
	"cmp"
	"fmt"
	"math"
	"reflect"
	"strings"
	"unicode"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"

	"github.com/cairn-edge/cairn/graph"
)

// A Field is one field of the payloads a map makes, as a pipeline file
// writes it under the map's fields.
type Field struct {
	Name string
	// Expr gives the field's value, over the record the map reads; Shown
	// is Expr as the reasons for rejecting a record show it ("": Expr),
	// which may be as the user wrote it rather than Expr.
	Expr, Shown string
}

// CompileField compiles the expression of a map's field over records
// whose payload fields are fields: it must give what a JSON payload
// holds, a number, a string, true or false, a list or an object; one
// whose type is known to be another is an error (*Error). Type is what
// it gives, as expressions after the map see the field: Any where that
// is not known.
func CompileField(src string, fields Fields) (*vm.Program, Type, error) {
	p, err := compile(src, fields, "a number, a string, true or false, a list or an object", isJSONKind)
	if err != nil {
		return nil, Any, err
	}
	nt := p.Node().Nature()
	if nt.Type == nil {
		return p, Any, nil
	}
	switch k := nt.Kind; {
	case isNumber(k):
		return p, Number, nil
	case k == reflect.String:
		return p, String, nil
	case k == reflect.Bool:
		return p, Bool, nil
	case k == reflect.Map:
		return p, Object, nil
	case k == reflect.Slice || k == reflect.Array:
		return p, List, nil
	}
	return p, Any, nil
}

// isJSONKind reports whether an expression's result of kind k may be a
// payload's field.
func isJSONKind(k reflect.Kind) bool {
	return isNumber(k) || k == reflect.String || k == reflect.Bool || k == reflect.Map || k == reflect.Slice || k == reflect.Array
}

// MapFields returns a map whose records' payloads are fields, exactly:
// a map[string]any of each field's value, its expression (compiled by
// CompileField) evaluated over the record read, whose key and time the
// record keeps, and its value too, unless src is given: then src sets it,
// as Map's does (shown as shown, "": src). A field's value is as a JSON
// payload holds it: an integer becomes a float64, and so do the numbers
// inside a list or an object.
//
// A bare name (a payload field, key, time or value) is read without
// expr's VM; the other expressions are evaluated over one environment per
// record. A record for which one fails, or gives nothing (a field the
// record lacks, or null), a number that is not finite or what no JSON
// payload holds, is rejected (graph.Reject) for a reason that names the
// first such field:
//
//	map field hum: humidity: field "humidity" is missing
func MapFields(fields []Field, src, shown string, in Fields) (func(int) graph.Operator, error) {
	out := make([]payloadField, len(fields))
	for i, f := range fields {
		p, _, err := CompileField(f.Expr, in)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.Name, err)
		}
		out[i] = payloadField{name: f.Name, program: p, reason: "map field " + f.Name + ": " + cmp.Or(f.Shown, f.Expr) + ": "}
		if id, ok := p.Node().(*ast.IdentifierNode); ok {
			out[i].field = id.Value
			out[i].subject = fmt.Sprintf("field %q", id.Value)
			if f.Shown != "" && f.Shown != f.Expr {
				out[i].subject = "it"
			}
		}
	}
	var value *vm.Program
	if src != "" {
		var err error
		if value, err = CompileMap(src, in); err != nil {
			return nil, err
		}
	}
	shown = cmp.Or(shown, src)
	return func(subtask int) graph.Operator {
		machine := new(vm.VM) // the subtask's, its stack kept from record to record
		return graph.MapErr(func(r *graph.Record) error {
			var vars map[string]any // env(r), made for the first expression the VM evaluates
			payload := make(map[string]any, len(out))
			for i := range out {
				v, err := out[i].eval(r, machine, &vars)
				if err != nil {
					return err
				}
				payload[out[i].name] = v
			}
			if value != nil {
				if vars == nil {
					vars = env(r)
				}
				v, err := machine.Run(value, vars)
				if err != nil {
					return graph.Reject(fmt.Errorf("map %q: %s", shown, firstLine(err)))
				}
				if r.Value, err = mapValue(shown, v); err != nil {
					return err
				}
			}
			r.Payload = payload
			return nil
		})(subtask)
	}, nil
}

// A payloadField is a field of the payloads MapFields makes.
type payloadField struct {
	name    string
	program *vm.Program
	// field is the expression if it is a bare name, read without the VM;
	// reason starts the field's rejections ("map field NAME: EXPR: "),
	// and subject is what they call a bare name: `field "humidity"`, or
	// "it" when the expression is shown otherwise (as written, where
	// the environment gave the name).
	field, reason, subject string
}

// eval returns the field's value for r, or the record's rejection. A
// bare name is read as it is (key, time, value, a field of a map
// payload); anything else is evaluated by machine, in *vars: env(r), made
// at the first need. Either way a record gets the value, or the
// rejection, that the VM's result gives it.
func (f *payloadField) eval(r *graph.Record, machine *vm.VM, vars *map[string]any) (any, error) {
	var out any
	switch p, isMap := r.Payload.(map[string]any); {
	case f.field == "key":
		out = r.Key
	case f.field == "time":
		out = r.Time
	case f.field == "value":
		out = r.Value
	case f.field != "" && isMap:
		out = p[f.field]
	default:
		if *vars == nil {
			*vars = env(r)
		}
		var err error
		if out, err = machine.Run(f.program, *vars); err != nil {
			return nil, graph.Reject(fmt.Errorf("%s%s", f.reason, firstLine(err)))
		}
	}
	v, ok := jsonValue(out)
	switch {
	case ok && out != nil:
		return v, nil
	case out == nil && f.field != "":
		return nil, graph.Reject(fmt.Errorf("%s%s is missing", f.reason, f.subject))
	case out == nil:
		return nil, graph.Reject(fmt.Errorf("%sgave nothing", f.reason))
	}
	return nil, graph.Reject(fmt.Errorf("%sgave %s, which no JSON payload holds", f.reason, unheld(out)))
}

// jsonValue returns v as a decoded JSON payload holds it: nil, a float64,
// a string, a bool, a map[string]any or a []any of such values, the
// numbers of every other type made float64s; false if v, or a value
// inside it, is a number that is not finite or another type. It copies
// only what it changes.
func jsonValue(v any) (any, bool) {
	switch v := v.(type) {
	case nil, string, bool:
		return v, true
	case float64:
		return v, !math.IsInf(v, 0) && !math.IsNaN(v)
	case map[string]any:
		var out map[string]any // a copy, once an entry changes
		for k, e := range v {
			j, ok := jsonValue(e)
			switch {
			case !ok:
				return nil, false
			case out == nil && !same(j, e):
				out = make(map[string]any, len(v))
				for k, e := range v {
					out[k] = e
				}
				fallthrough
			case out != nil:
				out[k] = j
			}
		}
		if out != nil {
			return out, true
		}
		return v, true
	case []any:
		var out []any
		for i, e := range v {
			j, ok := jsonValue(e)
			switch {
			case !ok:
				return nil, false
			case out == nil && !same(j, e):
				out = append(make([]any, 0, len(v)), v[:i]...)
				fallthrough
			case out != nil:
				out = append(out, j)
			}
		}
		if out != nil {
			return out, true
		}
		return v, true
	}
	f, ok := number(v)
	return f, ok && !math.IsInf(f, 0) && !math.IsNaN(f)
}

// same reports whether jsonValue left e as it was: only a number of
// another type than float64, or what holds one, is changed.
func same(j, e any) bool {
	switch j.(type) {
	case map[string]any, []any:
		return reflect.ValueOf(j).UnsafePointer() == reflect.ValueOf(e).UnsafePointer()
	case float64:
		_, ok := e.(float64)
		return ok
	}
	return true
}

// unheld says what a field's expression gave that no JSON payload
// holds: a number that is not finite, or a Go type.
func unheld(out any) string {
	if v, ok := number(out); ok {
		return fmt.Sprint(v)
	}
	switch out.(type) {
	case map[string]any, []any:
		return describe(reflect.TypeOf(out).Kind()) + " holding a number that is not finite"
	}
	return fmt.Sprintf("%T", out)
}

// mapValue is what the map's expression, shown as shown, gave (out) as a
// record's value: a finite number, or the record's rejection.
func mapValue(shown string, out any) (float64, error) {
	v, ok := number(out)
	if !ok {
		return 0, graph.Reject(fmt.Errorf("map %q gave %T, want a number", shown, out))
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		// value / 0, say: no total, comparison or JSON output can use it.
		return 0, graph.Reject(fmt.Errorf("map %q gave %v, want a finite number", shown, v))
	}
	return v, nil
}

// CompileKey compiles an expression of an operator's key_by over the
// records it reads, whose payload fields are fields: it must give a
// string, a number or true or false; one whose type is known to be
// another is an error (*Error). A name with - or . in it (device-id,
// serial.no) is a payload field's name too (KeyBy reads that field
// first): where fields are known and hold it, it is that field alone,
// and the program is nil.
func CompileKey(src string, fields Fields) (*vm.Program, error) {
	p, err := compile(src, fields, "a string, a number or true or false", func(k reflect.Kind) bool {
		return isNumber(k) || k == reflect.String || k == reflect.Bool
	})
	if _, declared := fields[src]; err != nil && declared && dottedName(src) {
		return nil, nil
	}
	return p, err
}

// dottedName reports whether s is a name with - or . between its parts
// (device-id, serial.no): a payload field's name, which an expression
// reads otherwise (device - id, serial's no).
func dottedName(s string) bool {
	seps, prev := 0, '.' // as if after a separator: none may come first
	for i, r := range s {
		switch {
		case r == '-' || r == '.':
			if prev == '-' || prev == '.' {
				return false
			}
			seps++
		case r != '_' && !unicode.IsLetter(r) && (!unicode.IsDigit(r) || i == 0):
			return false
		}
		prev = r
	}
	return seps > 0 && prev != '-' && prev != '.'
}

// KeyBy returns the key of a record by exprs, the expressions of an
// operator's key_by (each compiled by CompileKey), with format writing
// each one's value: of one expression, what format writes; of more, a
// composite key, what format writes of each joined by "/", each with its
// "%" and "/" escaped as "%25" and "%2F", so that no two lists of parts
// make one key ("north/line-2/dev-7"). A record for which an expression
// fails or gives nothing has the key missing.
//
// A bare name is a payload field: the record's value of it, null too
// (format(nil)), or missing where the record lacks it; key, time and
// value are the record's own, as in every expression. So is a name with
// - or . in it (dottedName) where the record has a field of exactly that
// name; where it has none, the expression decides. Of one such name, a
// record's key is the field's value as format writes it, byte for byte,
// as key_by has always keyed a field, so that keyed state in checkpoints
// and savepoints of an earlier cairn is found again.
//
// The key returned may be called by many goroutines at once.
func KeyBy(exprs []string, fields Fields, format func(any) string, missing string) (func(*graph.Record) string, error) {
	parts := make([]keyPart, len(exprs))
	for i, src := range exprs {
		p, err := CompileKey(src, fields)
		if err != nil {
			return nil, err
		}
		parts[i].program = p
		if p == nil || dottedName(src) {
			parts[i].field = src
		} else if id, ok := p.Node().(*ast.IdentifierNode); ok {
			parts[i].field, parts[i].bare = id.Value, true
		}
	}
	if len(parts) == 1 {
		part := parts[0]
		return func(r *graph.Record) string {
			v, ok := part.value(r, new(map[string]any))
			if !ok {
				return missing
			}
			return format(v)
		}, nil
	}
	return func(r *graph.Record) string {
		var (
			vars map[string]any
			b    strings.Builder
		)
		b.Grow(16 * len(parts))
		for i := range parts {
			v, ok := parts[i].value(r, &vars)
			if !ok {
				return missing
			}
			if i > 0 {
				b.WriteByte('/')
			}
			keyEscaper.WriteString(&b, format(v))
		}
		return b.String()
	}, nil
}

// keyEscaper escapes a part of a composite key.
var keyEscaper = strings.NewReplacer("%", "%25", "/", "%2F")

// A keyPart is an expression of a key_by.
type keyPart struct {
	// program is nil for a name with - or . that is a declared field
	// and no expression (CompileKey).
	program *vm.Program
	// field is the payload field the part names: the expression itself
	// if it is a bare name (bare) or a name with - or . (dottedName).
	field string
	bare  bool
}

// value returns the part's value for r: false if r lacks the field a bare
// name names, or the expression fails on r or gives nothing. The VM
// evaluates it in *vars: env(r), made at the first need.
func (k *keyPart) value(r *graph.Record, vars *map[string]any) (any, bool) {
	p, isMap := r.Payload.(map[string]any)
	switch {
	case k.bare && k.field == "key":
		return r.Key, true
	case k.bare && k.field == "time":
		return r.Time, true
	case k.bare && k.field == "value":
		return r.Value, true
	case k.field != "" && isMap:
		if v, ok := p[k.field]; ok || k.bare {
			return v, ok
		}
	}
	if k.program == nil {
		return nil, false
	}
	if *vars == nil {
		*vars = env(r)
	}
	out, err := expr.Run(k.program, *vars)
	return out, err == nil && out != nil
}
