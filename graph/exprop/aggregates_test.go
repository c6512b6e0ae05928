package exprop

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cairn-edge/cairn/graph"
)

// TestParseCall reads every function, arguments that hold commas and
// parentheses of their own, and says what is wrong with a call, where.
func TestParseCall(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want Call
	}{
		{"count()", Call{Func: graph.AggCount}},
		{" COUNT ( ) ", Call{Func: graph.AggCount}},
		{"sum(value)", Call{Func: graph.AggSum, Arg: "value"}},
		{"min(a)", Call{Func: graph.AggMin, Arg: "a"}},
		{"max( humidity  )", Call{Func: graph.AggMax, Arg: "humidity"}},
		{"avg(max(a, b))", Call{Func: graph.AggAvg, Arg: "max(a, b)"}},
		{"first(len(\"a,)b\") + x)", Call{Func: graph.AggFirst, Arg: "len(\"a,)b\") + x"}},
		{"last([a, b][0] /* ) */)", Call{Func: graph.AggLast, Arg: "[a, b][0]"}},
		{"stddev(vibration * 2)", Call{Func: graph.AggStddev, Arg: "vibration * 2"}},
		{"p50(x)", Call{Func: graph.AggQuantile, Quantile: 0.5, Arg: "x"}},
		{"p90(x)", Call{Func: graph.AggQuantile, Quantile: 0.9, Arg: "x"}},
		{"p95(x)", Call{Func: graph.AggQuantile, Quantile: 0.95, Arg: "x"}},
		{"p99(x)", Call{Func: graph.AggQuantile, Quantile: 0.99, Arg: "x"}},
		{"quantile(x, 0.999)", Call{Func: graph.AggQuantile, Quantile: 0.999, Arg: "x"}},
		{"quantile({a: 1}.a, 1)", Call{Func: graph.AggQuantile, Quantile: 1, Arg: "{a: 1}.a"}},
		{"quantile(x, 0)", Call{Func: graph.AggQuantile, Arg: "x"}},
		{"quantile(x,1e-1)", Call{Func: graph.AggQuantile, Quantile: 0.1, Arg: "x"}},
		{"avg(\n  temperature\n)", Call{Func: graph.AggAvg, Arg: "temperature"}},
		{"distinct(code)", Call{Func: graph.AggDistinct, Arg: "code"}},
		{"Distinct(site + \",\" + code)", Call{Func: graph.AggDistinct, Arg: "site + \",\" + code"}},
	} {
		got, err := ParseCall(tc.src)
		got.argAt = 0
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.src, got, err, tc.want)
		}
	}
	const functions = "count, sum, min, max, avg, first, last, stddev, p50, p90, p95, p99, quantile and distinct"
	for _, tc := range []struct {
		src, msg  string
		line, col int
	}{
		{"", "want a call such as avg(temperature) or count()", 1, 1},
		{"avg", "want a call such as avg(temperature) or count()", 1, 1},
		{"  temperature * 2", "want a call such as avg(temperature) or count()", 1, 3},
		{"(avg)(x)", "want a call such as avg(temperature) or count()", 1, 1},
		{"mean(x)", "unknown function mean; the functions are " + functions, 1, 1},
		{"avg(x", "the ( after avg is not closed", 1, 4},
		{"avg(f(x)", "the ( after avg is not closed", 1, 4},
		{"avg(x) + 1", "+ 1 after the call: an aggregate is one call", 1, 8},
		{"avg(x))", ") after the call: an aggregate is one call", 1, 7},
		{"count(x)", "count() takes no argument: it counts the records", 1, 7},
		{"count(,)", "count() takes no argument: it counts the records", 1, 7},
		{"avg()", "avg needs an argument, the expression whose values it aggregates: avg(temperature)", 1, 5},
		{"avg( , x)", "avg needs an argument, the expression whose values it aggregates: avg(temperature)", 1, 6},
		{"quantile()", "quantile needs an argument, the expression whose values it aggregates: quantile(temperature, 0.9)", 1, 10},
		{"max(a, b)", "max takes one argument", 1, 6},
		{"avg(x,)", "avg takes one argument", 1, 6},
		{"quantile(x)", "quantile needs q after the expression, a number from 0 to 1: quantile(x, 0.9)", 1, 11},
		{"quantile(x, )", "quantile needs q after the expression, a number from 0 to 1: quantile(x, 0.9)", 1, 13},
		{"quantile(x, 0.5, 1)", "quantile takes two, an expression and q", 1, 16},
		{"quantile(x, y)", "q y is not a number from 0 to 1, such as 0.9", 1, 13},
		{"quantile(x, 0.5 * 2)", "q 0.5 * 2 is not a number from 0 to 1, such as 0.9", 1, 13},
		{"quantile(x, -0.5)", "q -0.5 is not a number from 0 to 1, such as 0.9", 1, 13},
		{"quantile(x, 1.5)", "q 1.5 is not from 0 to 1", 1, 13},
		{"quantile(x, 0x10)", "q 0x10 is not a number from 0 to 1, such as 0.9", 1, 13},
		{"avg(\"x)", "literal not terminated", 1, 8},
		{"avg(\n  x,\n  y)", "avg takes one argument", 2, 4},
		{"p95(é, x)", "p95 takes one argument", 1, 6},
		{"distinct()", "distinct needs an argument, the expression whose values it aggregates: distinct(temperature)", 1, 10},
		{"distinct(code, 0.5)", "distinct takes one argument", 1, 14},
	} {
		_, err := ParseCall(tc.src)
		var e *Error
		if !errors.As(err, &e) || e.Msg != tc.msg || e.Line != tc.line || e.Column != tc.col || e.Expr != tc.src {
			t.Errorf("%q: %#v, want %q at %d:%d", tc.src, err, tc.msg, tc.line, tc.col)
		}
	}
}

// TestCompileCall: the argument is compiled as a map's expression is, and
// an error in it is at its line and column in the call.
func TestCompileCall(t *testing.T) {
	fields := Fields{"temperature": Number, "site": String, "ok": Bool}
	for _, src := range []string{"avg(temperature)", "p95(time / 1000)", "count()", "quantile(value, 0.5)", "distinct(site)", "distinct(temperature)", "distinct(key + site)"} {
		if _, err := CompileCall(src, fields); err != nil {
			t.Errorf("%s: %v", src, err)
		}
	}
	for _, tc := range []struct {
		src, msg    string
		line, col   int
		gives, want string
	}{
		{"avg(tmp)", "unknown name tmp", 1, 5, "", ""},
		{"quantile( temperature + tmp, 0.5)", "unknown name tmp", 1, 25, "", ""},
		{"avg(\n  temperature +\n    tmp)", "unknown name tmp", 3, 5, "", ""},
		{"é_avg(x)", "unknown function é_avg; the functions are count, sum, min, max, avg, first, last, stddev, p50, p90, p95, p99, quantile and distinct", 1, 1, "", ""},
		{"sum(é + 1)", "unknown name é", 1, 5, "", ""},
		{"max(site)", "gives a string, not a number", 0, 0, "a string", "a number"},
		{"distinct(ok)", "gives true or false, not a number or a string", 0, 0, "true or false", "a number or a string"},
		{"distinct(\n  tmp)", "unknown name tmp", 2, 3, "", ""},
	} {
		_, err := CompileCall(tc.src, fields)
		var e *Error
		if !errors.As(err, &e) || e.Msg != tc.msg || e.Line != tc.line || e.Column != tc.col || e.Expr != tc.src || e.Gives != tc.gives || e.Want != tc.want {
			t.Errorf("%q: %#v, want %q at %d:%d", tc.src, err, tc.msg, tc.line, tc.col)
		}
	}
}

// TestWindowAggregates: the spec gets the aggregates in the order given,
// one value per argument however many read it, none for count(); Args
// fills them from a record, or rejects it naming the aggregate.
func TestWindowAggregates(t *testing.T) {
	var spec graph.WindowSpec
	err := WindowAggregates(&spec, []Aggregate{
		{Name: "hum_max", Call: "max(humidity)"},
		{Name: "n", Call: "count()"},
		{Name: "temp_avg", Call: "avg(temperature)"},
		{Name: "temp_f", Call: "avg(temperature * 1.8 + 32)", Shown: "avg(temperature * ${K} + 32)"},
		{Name: "temp_p90", Call: "p90( temperature )"},
		{Name: "temp_q", Call: "quantile(temperature, 0.25)"},
	}, Fields{"temperature": Number, "humidity": Number})
	if err != nil {
		t.Fatal(err)
	}
	want := []graph.NamedAggregate{
		{Name: "hum_max", Func: graph.AggMax, Arg: 0},
		{Name: "n", Func: graph.AggCount},
		{Name: "temp_avg", Func: graph.AggAvg, Arg: 1},
		{Name: "temp_f", Func: graph.AggAvg, Arg: 2},
		{Name: "temp_p90", Func: graph.AggQuantile, Quantile: 0.9, Arg: 1},
		{Name: "temp_q", Func: graph.AggQuantile, Quantile: 0.25, Arg: 1},
	}
	if fmt.Sprint(spec.Aggregates) != fmt.Sprint(want) || spec.NArgs != 3 {
		t.Fatalf("aggregates %v over %d arguments, want %v over 3", spec.Aggregates, spec.NArgs, want)
	}
	args := make([]float64, spec.NArgs)
	if err := spec.Args(&graph.Record{Payload: map[string]any{"temperature": 20.0, "humidity": int64(40)}}, args, nil); err != nil || fmt.Sprint(args) != "[40 20 68]" {
		t.Fatalf("args %v, %v; want [40 20 68]", args, err)
	}
	for _, tc := range []struct {
		payload any
		want    string
	}{
		{map[string]any{"temperature": 20.0}, `aggregate hum_max: max(humidity): field "humidity" is missing, want a number`},
		{map[string]any{"temperature": 20.0, "humidity": nil}, `aggregate hum_max: max(humidity): field "humidity" is missing, want a number`},
		{map[string]any{"temperature": "warm", "humidity": 1.0}, `aggregate temp_avg: avg(temperature): field "temperature" holds a string, want a number`},
		{map[string]any{"temperature": math.Inf(1), "humidity": 1.0}, `aggregate temp_avg: avg(temperature): field "temperature" holds +Inf, want a finite number`},
		{map[string]any{"temperature": 1e308, "humidity": 1.0}, `aggregate temp_f: avg(temperature * ${K} + 32): gave +Inf, want a finite number`},
		{nil, `aggregate hum_max: max(humidity): field "humidity" is missing, want a number`},
	} {
		err := spec.Args(&graph.Record{Payload: tc.payload}, args, nil)
		var rejected *graph.RecordError
		if !errors.As(err, &rejected) || err.Error() != tc.want {
			t.Errorf("%v: %v, want %s", tc.payload, err, tc.want)
		}
	}

	// A name the environment gave is not shown.
	if err := WindowAggregates(&spec, []Aggregate{{Name: "v", Call: "avg(vibration)", Shown: "avg(${V})"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := spec.Args(&graph.Record{Payload: map[string]any{}}, args, nil); err == nil || err.Error() != "aggregate v: avg(${V}): its argument is missing, want a number" {
		t.Errorf("a name from the environment: %v", err)
	}

	// count() alone reads nothing.
	spec = graph.WindowSpec{}
	if err := WindowAggregates(&spec, []Aggregate{{Name: "n", Call: "count()"}}, nil); err != nil || spec.Args != nil || spec.NArgs+spec.NHashes != 0 {
		t.Errorf("count() alone: args %v over %d and %d hashed, %v", spec.Args != nil, spec.NArgs, spec.NHashes, err)
	}
	// An error names the aggregate, and is the call's.
	err = WindowAggregates(&spec, []Aggregate{{Name: "a", Call: "avg(x)"}, {Name: "b", Call: "avg(tmp)"}}, Fields{"x": Number})
	var e *Error
	if !errors.As(err, &e) || err.Error() != `aggregate b: expression "avg(tmp)": unknown name tmp (1:5)` {
		t.Errorf("an unknown name: %v", err)
	}
}

// TestDistinctHashes: a distinct count's argument gets a hash slot of its
// own, shared by the counts of one argument but not with a number's
// slot; a string and a number hash alike whether read as they are or by
// the VM, an integer as its float, -0 as 0, and the number 1 otherwise
// than the string "1"; NaN, true or false and a missing field reject the
// record, an infinity does not; and reading the hashes of a record
// allocates nothing.
func TestDistinctHashes(t *testing.T) {
	var spec graph.WindowSpec
	err := WindowAggregates(&spec, []Aggregate{
		{Name: "codes", Call: "distinct(code)"},
		{Name: "n_avg", Call: "avg(n)"},
		{Name: "ns", Call: "distinct(n)"},
		{Name: "codes_vm", Call: "distinct(code + '')"},
		{Name: "codes_again", Call: "distinct( code )"},
	}, Fields{"code": String, "n": Number})
	if err != nil {
		t.Fatal(err)
	}
	want := []graph.NamedAggregate{{Name: "codes", Func: graph.AggDistinct, Arg: 0}, {Name: "n_avg", Func: graph.AggAvg, Arg: 0},
		{Name: "ns", Func: graph.AggDistinct, Arg: 1}, {Name: "codes_vm", Func: graph.AggDistinct, Arg: 2}, {Name: "codes_again", Func: graph.AggDistinct, Arg: 0}}
	if fmt.Sprint(spec.Aggregates) != fmt.Sprint(want) || spec.NArgs != 1 || spec.NHashes != 3 {
		t.Fatalf("aggregates %v over %d arguments and %d hashed, want %v over 1 and 3", spec.Aggregates, spec.NArgs, spec.NHashes, want)
	}
	args, hashes := make([]float64, 1), make([]uint64, 3)
	hashesOf := func(code string, n any) [3]uint64 {
		t.Helper()
		if err := spec.Args(&graph.Record{Payload: map[string]any{"code": code, "n": n}}, args, hashes); err != nil {
			t.Fatalf("%q, %v: %v", code, n, err)
		}
		if hashes[0] != hashes[2] {
			t.Errorf("%q hashes to %x read, %x by the VM", code, hashes[0], hashes[2])
		}
		return [3]uint64(hashes)
	}
	e17, one := hashesOf("E17", 1.0), hashesOf("1", int64(1))
	if e17[1] != one[1] || one[0] == one[1] || e17[0] == one[0] {
		t.Errorf("1.0 hashes to %x, int64 1 to %x, \"1\" to %x, \"E17\" to %x", e17[1], one[1], one[0], e17[0])
	}
	if zero, negZero := hashesOf("", 0.0), hashesOf("", math.Copysign(0, -1)); zero[1] != negZero[1] {
		t.Errorf("0 hashes to %x, -0 to %x", zero[1], negZero[1])
	}
	for _, tc := range []struct {
		payload map[string]any
		want    string
	}{
		{map[string]any{"code": "E17", "n": 1.0, "x": 0}, ""},
		{map[string]any{"n": 1.0}, `aggregate codes: distinct(code): field "code" is missing, want a number or a string`},
		{map[string]any{"code": true, "n": 1.0}, `aggregate codes: distinct(code): field "code" holds true or false, want a number or a string`},
	} {
		if err := spec.Args(&graph.Record{Payload: tc.payload}, args, hashes); fmt.Sprint(err) != cmp.Or(tc.want, "<nil>") {
			t.Errorf("%v: %v, want %s", tc.payload, err, tc.want)
		}
	}
	// avg(n) rejects NaN first; a distinct count alone does too.
	if err := WindowAggregates(&spec, []Aggregate{{Name: "ns", Call: "distinct(n)"}, {Name: "vm", Call: "distinct(n * 1)"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := spec.Args(&graph.Record{Payload: map[string]any{"n": math.NaN()}}, args, hashes); fmt.Sprint(err) != `aggregate ns: distinct(n): field "n" holds NaN, want a number other than NaN, or a string` {
		t.Errorf("NaN: %v", err)
	}
	if err := spec.Args(&graph.Record{Payload: map[string]any{"n": math.Inf(-1)}}, args, hashes); err != nil || hashes[0] == hashNumber(1) {
		t.Errorf("-Inf: hash %x, %v", hashes[0], err)
	}
	for _, v := range []any{21.5, "a much longer error code than thirty-two bytes"} {
		if err := WindowAggregates(&spec, []Aggregate{{Name: "vs", Call: "distinct(v)"}}, nil); err != nil {
			t.Fatal(err)
		}
		r := graph.Record{Payload: map[string]any{"v": v}}
		if allocs := testing.AllocsPerRun(100, func() { _ = spec.Args(&r, args, hashes) }); allocs != 0 {
			t.Errorf("hashing %v read as it is allocates %v times", v, allocs)
		}
	}
}

// TestBareNamesReadAsTheVMDoes compares, over generated records, the
// arguments that are bare names and read without the VM with the same
// arguments evaluated by it: each record gets the same value, or the same
// rejection.
func TestBareNamesReadAsTheVMDoes(t *testing.T) {
	values := []any{nil, 21.5, math.Copysign(0, -1), int64(7), int(3), "21.5", true, map[string]any{"a": 1.0}, []any{1.0}, math.Inf(-1), math.NaN()}
	for _, fields := range []Fields{nil, {"temperature": Number, "other": Any}} {
		for _, call := range []string{"avg(temperature)", "avg(other)", "avg(value)", "avg(time)",
			"distinct(temperature)", "distinct(other)", "distinct(value)", "distinct(time)"} {
			name := call[strings.Index(call, "(")+1 : len(call)-1]
			if fields == nil && name == "other" {
				continue
			}
			c, err := CompileCall(call, fields)
			if err != nil || c.field != name {
				t.Fatalf("%s over %v: field %q, %v; want it read without the VM", call, fields, c.field, err)
			}
			a := newArgument(c, Aggregate{Name: "r", Call: call})
			for seed := range uint64(200) {
				rng := rand.New(rand.NewPCG(seed, 36))
				r := graph.Record{Key: "k", Time: rng.Int64N(1 << 50), Value: rng.NormFloat64()}
				switch rng.IntN(4) {
				case 0: // no payload, or one that is no map
					r.Payload = []any{nil, []byte("raw"), graph.WindowResult{Start: 1}}[rng.IntN(3)]
				default:
					p := map[string]any{}
					for _, f := range []string{"temperature", "other", "value", "time"} {
						if rng.IntN(3) > 0 {
							p[f] = values[rng.IntN(len(values))]
						}
					}
					r.Payload = p
				}
				var got, want any
				var gotErr, wantErr error
				out, wantErr := a.run(&r, new(map[string]any))
				if c.Func == graph.AggDistinct {
					got, gotErr = a.hash(&r, new(map[string]any))
					if wantErr == nil {
						want, wantErr = a.hashOf(out)
					}
				} else {
					got, gotErr = a.eval(&r, new(map[string]any))
					if wantErr == nil {
						want, wantErr = a.result(out)
					}
				}
				if fmt.Sprint(got, gotErr) != fmt.Sprint(want, wantErr) {
					t.Fatalf("seed %d: %s of %+v: read %v, %v; the VM %v, %v", seed, call, r, got, gotErr, want, wantErr)
				}
			}
		}
	}
}

// FuzzParseCall feeds arbitrary calls to ParseCall and CompileCall. They
// must never panic; an error is an *Error at a line and column of the
// call (but one about what the argument gives); and a call they accept names a function with its quantile, has
// an argument but for count(), which is a part of the call, and reads the
// same again when written anew from what was read.
func FuzzParseCall(f *testing.F) {
	for _, seed := range []string{"count()", "avg(temperature)", "p95(vibration)", "quantile(x, 0.9)", "avg(max(a, b))",
		`first(len("a,)b"))`, "last([a, (b)][0] /* ) */)", "quantile(x, 1e-3)", "avg(\n x)", "avg(x) + 1", "avg(\"x", "(", "mean(é)"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, src string) {
		lines := strings.Split(string([]rune(src)), "\n")
		at := func(err error) {
			var e *Error
			switch {
			case !errors.As(err, &e) || e.Expr != src:
				t.Fatalf("%q: error %#v is not the call's", src, err)
			case e.Gives != "" && e.Line == 0: // what the argument gives: at no character
			case e.Line < 1 || e.Line > len(lines) || e.Column < 1 || e.Column > utf8.RuneCountInString(lines[e.Line-1])+1:
				t.Fatalf("%q: error %#v is not at a line and column of the call", src, err)
			}
		}
		c, err := ParseCall(src)
		if _, cerr := CompileCall(src, nil); cerr != nil && (err == nil || cerr.Error() != err.Error()) {
			at(cerr)
		}
		if err != nil {
			at(err)
			return
		}
		switch {
		case !slices.ContainsFunc(functions, func(f function) bool { return f.agg == c.Func }) ||
			c.Quantile < 0 || c.Quantile > 1 || c.Func != graph.AggQuantile && c.Quantile != 0:
			t.Fatalf("%q read as %+v", src, c)
		case (c.Arg == "") != (c.Func == graph.AggCount) || string([]rune(src)[c.argAt:c.argAt+utf8.RuneCountInString(c.Arg)]) != c.Arg:
			t.Fatalf("%q read as %+v: the argument is not the call's", src, c)
		}
		again := fmt.Sprintf("quantile(%s, %v)", c.Arg, c.Quantile)
		if c.Func != graph.AggQuantile {
			again = fmt.Sprintf("%s(%s)", functions[slices.IndexFunc(functions, func(f function) bool { return f.agg == c.Func })].name, c.Arg)
		}
		if d, err := ParseCall(again); err != nil || d.Func != c.Func || d.Quantile != c.Quantile || d.Arg != c.Arg {
			t.Fatalf("%q read as %+v, and %q written from it as %+v, %v", src, c, again, d, err)
		}
	})
}
