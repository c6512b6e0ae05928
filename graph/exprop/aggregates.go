package exprop

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/zeebo/xxh3"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser/lexer"
	"github.com/expr-lang/expr/vm"

	"github.com/cairn-edge/cairn/graph"
)

// A Call is one of a window's many aggregates as a pipeline file writes
// it: a function of the values an expression gives over the window's
// records, such as avg(temperature), p95(vibration),
// quantile(vibration, 0.9) or distinct(code), or count(), of the records.
type Call struct {
	Func graph.Aggregate
	// Quantile is AggQuantile's q, in [0, 1].
	Quantile float64
	// Arg is the argument, an expression that gives a number (for
	// distinct, a number or a string), as the call writes it between the
	// parentheses (less the spaces around it); "" for count().
	Arg string

	argAt   int         // the character of the call where Arg starts, from 0
	program *vm.Program // Arg compiled (CompileCall); nil for count()
	field   string      // Arg when it is a bare name, read without the VM
}

// A function is what a Call may make, by its name.
type function struct {
	name string
	agg  graph.Aggregate
	q    float64 // AggQuantile's, but for quantile, whose call gives it
}

// functions are the functions a Call names, in the order errors list them.
var functions = []function{
	{name: "count", agg: graph.AggCount}, {name: "sum", agg: graph.AggSum}, {name: "min", agg: graph.AggMin},
	{name: "max", agg: graph.AggMax}, {name: "avg", agg: graph.AggAvg}, {name: "first", agg: graph.AggFirst},
	{name: "last", agg: graph.AggLast}, {name: "stddev", agg: graph.AggStddev},
	{"p50", graph.AggQuantile, 0.5}, {"p90", graph.AggQuantile, 0.9}, {"p95", graph.AggQuantile, 0.95}, {"p99", graph.AggQuantile, 0.99},
	{name: "quantile", agg: graph.AggQuantile}, {name: "distinct", agg: graph.AggDistinct},
}

// functionNames lists the functions' names for an error.
func functionNames() string {
	names := make([]string, len(functions))
	for i, f := range functions {
		names[i] = f.name
	}
	last := len(names) - 1
	return strings.Join(names[:last], ", ") + " and " + names[last]
}

// ParseCall reads src, one of a window's many aggregates: a function
// (count, sum, min, max, avg, first, last, stddev, p50, p90, p95, p99,
// quantile or distinct, in any case) and its argument in parentheses, an expression
// (in expr's syntax, read by expr's lexer: a string or a nested call may
// hold commas and parentheses), none for count(), and for quantile the
// quantile after it, a number from 0 to 1. An error is an *Error whose
// Line and Column are in src. ParseCall does not compile the argument:
// CompileCall does.
func ParseCall(src string) (Call, error) {
	chars := []rune(src)
	fail := func(at int, format string, args ...any) (Call, error) {
		line, col := position(chars, at)
		return Call{}, &Error{Expr: src, Msg: fmt.Sprintf(format, args...), Line: line, Column: col}
	}
	tokens, err := lexer.Lex(file.NewSource(src))
	if err != nil {
		if fe := (*file.Error)(nil); errors.As(err, &fe) {
			return fail(fe.From, "%s", fe.Message)
		}
		return fail(0, "%s", firstLine(err))
	}
	tokens = tokens[:len(tokens)-1] // the EOF token the lexer ends with
	if len(tokens) < 2 || tokens[0].Kind != lexer.Identifier || !tokens[1].Is(lexer.Bracket, "(") {
		at := 0
		if len(tokens) > 0 {
			at = tokens[0].From
		}
		return fail(at, "want a call such as avg(temperature) or count()")
	}
	name := tokens[0].Value
	i := slices.IndexFunc(functions, func(f function) bool { return strings.EqualFold(f.name, name) })
	if i < 0 {
		return fail(tokens[0].From, "unknown function %s; the functions are %s", name, functionNames())
	}
	f := functions[i]

	// The arguments: the tokens between the commas outside any bracket,
	// up to the ) that closes the list.
	var (
		args   = [][]lexer.Token{nil}
		commas []int  // where each comma is
		open   []byte // the closing bracket of each open inside the list
		closed = -1   // the token that closes the list
	)
	for i := 2; i < len(tokens) && closed < 0; i++ {
		t := tokens[i]
		switch {
		case t.Is(lexer.Bracket, "(", "[", "{"):
			open = append(open, ")]}"[strings.Index("([{", t.Value)])
		case len(open) > 0 && t.Is(lexer.Bracket, string(open[len(open)-1])):
			open = open[:len(open)-1]
		case len(open) == 0 && t.Is(lexer.Bracket, ")"):
			closed = i
			continue
		case len(open) == 0 && t.Is(lexer.Operator, ","):
			args, commas = append(args, nil), append(commas, t.From)
			continue
		}
		args[len(args)-1] = append(args[len(args)-1], t)
	}
	if closed < 0 {
		return fail(tokens[1].From, "the ( after %s is not closed", name)
	}
	if rest := tokens[closed+1:]; len(rest) > 0 {
		return fail(rest[0].From, "%s after the call: an aggregate is one call", string(chars[rest[0].From:rest[len(rest)-1].To]))
	}
	end := tokens[closed].From
	text := func(ts []lexer.Token) string { return string(chars[ts[0].From:ts[len(ts)-1].To]) }

	c := Call{Func: f.agg, Quantile: f.q}
	want, usage := 1, f.name+"(temperature)"
	switch f.name {
	case "count":
		if len(args) > 1 || len(args[0]) > 0 {
			return fail(tokens[2].From, "count() takes no argument: it counts the records")
		}
		return c, nil
	case "quantile":
		want, usage = 2, "quantile(temperature, 0.9)"
	}
	if len(args[0]) == 0 {
		return fail(tokens[2].From, "%s needs an argument, the expression whose values it aggregates: %s", name, usage)
	}
	c.Arg, c.argAt = text(args[0]), args[0][0].From
	switch {
	case len(args) > want:
		return fail(commas[want-1], "%s takes %s", name, map[int]string{1: "one argument", 2: "two, an expression and q"}[want])
	case want == 2 && (len(args) < 2 || len(args[1]) == 0):
		return fail(end, "quantile needs q after the expression, a number from 0 to 1: quantile(%s, 0.9)", c.Arg)
	case want == 2:
		q, err := strconv.ParseFloat(args[1][0].Value, 64)
		if len(args[1]) > 1 || args[1][0].Kind != lexer.Number || err != nil {
			return fail(args[1][0].From, "q %s is not a number from 0 to 1, such as 0.9", text(args[1]))
		}
		if q < 0 || q > 1 {
			return fail(args[1][0].From, "q %s is not from 0 to 1", args[1][0].Value)
		}
		c.Quantile = q
	}
	return c, nil
}

// position returns the line and column (from 1, in characters) of the
// character at from 0 of chars.
func position(chars []rune, at int) (line, col int) {
	line, col = 1, 1
	for _, r := range chars[:min(at, len(chars))] {
		if col++; r == '\n' {
			line, col = line+1, 1
		}
	}
	return line, col
}

// offset returns the character (from 0) of chars at line and column
// (from 1, in characters): position's inverse.
func offset(chars []rune, line, col int) int {
	at := 0
	for ; line > 1 && at < len(chars); at++ {
		if chars[at] == '\n' {
			line--
		}
	}
	return at + col - 1
}

// CompileCall parses src (ParseCall) and compiles its argument over
// records whose payload fields are fields, as CompileMap does: it must
// give a number, or for distinct a number or a string. An error is an
// *Error whose Line and Column are in src; one about a result of the
// wrong type has Gives and Want.
func CompileCall(src string, fields Fields) (Call, error) {
	c, err := ParseCall(src)
	if err != nil || c.Func == graph.AggCount {
		return c, err
	}
	want, ok := "a number", isNumber
	if c.Func == graph.AggDistinct {
		want, ok = "a number or a string", func(k reflect.Kind) bool { return isNumber(k) || k == reflect.String }
	}
	if c.program, err = compile(c.Arg, fields, want, ok); err != nil {
		e := &Error{Msg: err.Error()}
		errors.As(err, &e)
		if e.Line > 0 { // in the argument: make it in the call
			e.Line, e.Column = position([]rune(src), c.argAt+offset([]rune(c.Arg), e.Line, e.Column))
		}
		e.Expr = src
		return Call{}, e
	}
	if id, ok := c.program.Node().(*ast.IdentifierNode); ok {
		c.field = id.Value
	}
	return c, nil
}

// An Aggregate is one of a window's many aggregates, as a pipeline file
// names and writes it.
type Aggregate struct {
	// Name is the result's (graph.NamedAggregate.Name).
	Name string
	// Call is what it is (ParseCall), and Shown the call as the reasons
	// for rejecting a record show it ("": Call), which may be as the user
	// wrote it rather than Call.
	Call, Shown string
}

// WindowAggregates sets spec's Aggregates (in the order of aggs), Args,
// NArgs and NHashes to make aggs of the windows of records whose payload
// fields are fields: each call compiled by CompileCall, whose error it
// returns, for the first that fails. Calls whose arguments are written
// alike share the value Args reads, and distinct counts the hash.
//
// Args, which subtasks may call at once, evaluates every argument of a
// record (a bare name, time, value or a field of a map payload, read as
// it is; anything else by expr's VM, over one environment per record)
// and rejects the record (graph.Reject) when one fails, or gives no
// number or one that is not finite (for distinct, neither a string nor a
// number other than NaN), for a reason that names the first aggregate
// that reads it:
//
//	aggregate temp_avg: avg(temperature): field "temperature" is missing, want a number
//
// The value of a distinct count is hashed (hashString, hashNumber).
func WindowAggregates(spec *graph.WindowSpec, aggs []Aggregate, fields Fields) error {
	var (
		named          []graph.NamedAggregate
		args, hashed   []argument
		slot, hashSlot = make(map[string]int), make(map[string]int) // by Arg
	)
	for _, a := range aggs {
		c, err := CompileCall(a.Call, fields)
		if err != nil {
			return fmt.Errorf("aggregate %s: %w", a.Name, err)
		}
		list, slots := &args, slot
		if c.Func == graph.AggDistinct {
			list, slots = &hashed, hashSlot
		}
		i, ok := slots[c.Arg]
		if !ok && c.Func != graph.AggCount {
			i = len(*list)
			slots[c.Arg] = i
			*list = append(*list, newArgument(c, a))
		}
		named = append(named, graph.NamedAggregate{Name: a.Name, Func: c.Func, Quantile: c.Quantile, Arg: i})
	}
	spec.Aggregates, spec.Args, spec.NArgs, spec.NHashes = named, nil, len(args), len(hashed)
	if len(args)+len(hashed) > 0 {
		spec.Args = evalAll(args, hashed)
	}
	return nil
}

// evalAll returns what evaluates args for a record, into values, and
// hashed, into hashes.
func evalAll(args, hashed []argument) func(r *graph.Record, values []float64, hashes []uint64) error {
	return func(r *graph.Record, values []float64, hashes []uint64) error {
		var vars map[string]any // env(r), made for the first argument the VM evaluates
		for i := range args {
			v, err := args[i].eval(r, &vars)
			if err != nil {
				return err
			}
			values[i] = v
		}
		for i := range hashed {
			h, err := hashed[i].hash(r, &vars)
			if err != nil {
				return err
			}
			hashes[i] = h
		}
		return nil
	}
}

// An argument is a value a window's aggregates read, of a call that
// CompileCall compiled.
type argument struct {
	Call
	// reason starts its rejections ("aggregate NAME: CALL: "), and
	// subject is what they call it if it is a bare name: `field
	// "temperature"`, or "its argument" when the call is shown otherwise
	// (as written, where the environment gave the name).
	reason, subject string
}

// newArgument returns the argument of c, the call of aggregate a.
func newArgument(c Call, a Aggregate) argument {
	shown, subject := cmp.Or(a.Shown, a.Call), fmt.Sprintf("field %q", c.field)
	if shown != a.Call {
		subject = "its argument"
	}
	return argument{Call: c, reason: "aggregate " + a.Name + ": " + shown + ": ", subject: subject}
}

// eval returns the argument's value for r, or the record's rejection. A
// bare name that can be read as it is (time, value, a field of a map
// payload) is read so; anything else run evaluates. Either way a record
// gets the value, or the rejection, that the VM's result gives it.
func (a *argument) eval(r *graph.Record, vars *map[string]any) (float64, error) {
	switch p, isMap := r.Payload.(map[string]any); {
	case a.field == "value":
		return a.result(r.Value)
	case a.field == "time":
		return a.result(r.Time)
	case a.field != "" && isMap:
		return a.result(p[a.field])
	}
	out, err := a.run(r, vars)
	if err != nil {
		return 0, err
	}
	return a.result(out)
}

// hash returns the hash of the argument's value for r, or the record's
// rejection, read as eval reads the value.
func (a *argument) hash(r *graph.Record, vars *map[string]any) (uint64, error) {
	switch p, isMap := r.Payload.(map[string]any); {
	case a.field == "value":
		return a.hashOf(r.Value)
	case a.field == "time":
		return a.hashOf(r.Time)
	case a.field != "" && isMap:
		return a.hashOf(p[a.field])
	}
	out, err := a.run(r, vars)
	if err != nil {
		return 0, err
	}
	return a.hashOf(out)
}

// run evaluates the argument for r with expr's VM, in *vars: env(r),
// made at the first need.
func (a *argument) run(r *graph.Record, vars *map[string]any) (any, error) {
	if *vars == nil {
		*vars = env(r)
	}
	out, err := expr.Run(a.program, *vars)
	if err != nil {
		return nil, graph.Reject(fmt.Errorf("%s%s", a.reason, firstLine(err)))
	}
	return out, nil
}

// result returns out, what the argument gave, as a number, or the
// rejection of a record for which it gave no finite number.
func (a *argument) result(out any) (float64, error) {
	v, ok := number(out)
	if ok && !math.IsInf(v, 0) && !math.IsNaN(v) {
		return v, nil
	}
	return 0, a.reject(out, ok, v, "a number", "a finite number")
}

// hashOf returns the hash of out, what a distinct count's argument gave:
// of a string, or of a number other than NaN; or the rejection of a
// record for which it gave neither.
func (a *argument) hashOf(out any) (uint64, error) {
	if s, ok := out.(string); ok {
		return hashString(s), nil
	}
	v, ok := number(out)
	if ok && !math.IsNaN(v) {
		return hashNumber(v), nil
	}
	return 0, a.reject(out, ok, v, "a number or a string", "a number other than NaN, or a string")
}

// reject returns the rejection of a record for which the argument gave
// out, want: v if out is a number (isNumber), which is not wantNumber.
func (a *argument) reject(out any, isNumber bool, v float64, want, wantNumber string) error {
	var problem string
	switch {
	case isNumber:
		problem = fmt.Sprintf("%v, want %s", v, wantNumber) // +Inf, NaN
	case out == nil:
		problem = "nothing, want " + want
	default:
		problem = describe(reflect.TypeOf(out).Kind()) + ", want " + want
	}
	switch {
	case a.field == "":
		return graph.Reject(fmt.Errorf("%sgave %s", a.reason, problem))
	case out == nil: // absent, or null
		return graph.Reject(fmt.Errorf("%s%s is missing, want %s", a.reason, a.subject, want))
	}
	return graph.Reject(fmt.Errorf("%s%s holds %s", a.reason, a.subject, problem))
}

// The seeds of the hashes of a distinct count's values, one per kind of
// value, so that the number 1 and the string "1" are two values, however
// their bytes compare.
const (
	numberSeed = 1
	stringSeed = 2
)

// hashNumber is the hash of v, a number other than NaN, that a distinct
// count counts: XXH3 (64 bits) of its float64's bits, little endian,
// -0 read as 0, so that the values that compare equal hash alike, an
// integer as the float it reads as. It is stored in a window's state:
// changing it would count a value again after a restore.
func hashNumber(v float64) uint64 {
	if v == 0 {
		v = 0 // not -0
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
	return xxh3.HashSeed(b[:], numberSeed)
}

// hashString is the hash of s, as hashNumber is a number's: XXH3 of its
// bytes.
func hashString(s string) uint64 { return xxh3.HashStringSeed(s, stringSeed) }
