package exprop

import (
	"testing"

	"github.com/expr-lang/expr"

	"github.com/cairn-edge/cairn/graph"
)

// BenchmarkExpressions evaluates filters and maps of the kinds pipelines
// write, on time, the value and a payload field, one record per
// iteration, as the operators do.
func BenchmarkExpressions(b *testing.B) {
	fields := Fields{"humidity": Number}
	for _, c := range []struct {
		name, src string
		filter    bool
	}{
		{"filter-time", "time > 1767225600000 and value > 20", true},
		{"filter-fields", "value > 20 and humidity < 90", true},
		{"map-time", "time % 1000", false},
		{"map-arithmetic", "value * 1.8 + 32", false},
	} {
		b.Run(c.name, func(b *testing.B) {
			compile := CompileMap
			if c.filter {
				compile = CompileFilter
			}
			p, err := compile(c.src, fields)
			if err != nil {
				b.Fatal(err)
			}
			r := graph.Record{Key: "d", Time: 1_772_323_230_500, Value: 21.5, Payload: map[string]any{"humidity": 40.0}}
			for b.Loop() {
				if _, err := expr.Run(p, env(&r)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAggregateArgs evaluates the arguments of a window's
// aggregates, one record per iteration, as its Args does: bare names read
// as they are (read) or by expr's VM (vm), one argument, four, or a
// distinct count's string, hashed.
func BenchmarkAggregateArgs(b *testing.B) {
	fields := Fields{"temperature": Number, "humidity": Number, "vibration": Number, "site": String}
	r := graph.Record{Key: "d", Time: 1_772_323_230_500, Value: 21.5,
		Payload: map[string]any{"temperature": 21.5, "humidity": 40.0, "vibration": 0.31, "site": "north"}}
	for _, c := range []struct {
		name  string
		calls []string
	}{
		{"one", []string{"avg(temperature)"}},
		{"four", []string{"avg(temperature)", "max(humidity)", "p95(vibration)", "sum(value)"}},
		{"distinct", []string{"distinct(site)"}},
	} {
		for _, vm := range []bool{false, true} {
			var args, hashed []argument
			for _, call := range c.calls {
				compiled, err := CompileCall(call, fields)
				if err != nil {
					b.Fatal(err)
				}
				if vm {
					compiled.field = ""
				}
				list := &args
				if compiled.Func == graph.AggDistinct {
					list = &hashed
				}
				*list = append(*list, newArgument(compiled, Aggregate{Name: "a", Call: call}))
			}
			path := "read"
			if vm {
				path = "vm"
			}
			b.Run(c.name+"/"+path, func(b *testing.B) {
				eval, values, hashes := evalAll(args, hashed), make([]float64, len(args)), make([]uint64, len(hashed))
				for b.Loop() {
					if err := eval(&r, values, hashes); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkMapFields runs maps, one record per iteration, through the
// operator: today's map of the value (expr), and maps that make a payload
// of three fields read as they are (names), computed (computed), and
// computed with the value set too (computed+expr).
func BenchmarkMapFields(b *testing.B) {
	fields := Fields{"temperature": Number, "humidity": Number, "site": String, "line": String}
	r := graph.Record{Key: "d", Time: 1_772_323_230_500, Value: 21.5,
		Payload: map[string]any{"temperature": 21.5, "humidity": 40.0, "site": "north", "line": "line-2", "vibration": 0.31}}
	names := []Field{{Name: "temp", Expr: "temperature"}, {Name: "hum", Expr: "humidity"}, {Name: "site", Expr: "site"}}
	computed := []Field{{Name: "temp_f", Expr: "temperature * 9 / 5 + 32"}, {Name: "hum", Expr: "humidity"}, {Name: "where", Expr: `site + "-" + line`}}
	for _, c := range []struct {
		name   string
		fields []Field
		expr   string
	}{
		{"expr", nil, "value * 1.8 + 32"},
		{"names", names, ""},
		{"computed", computed, ""},
		{"computed+expr", computed, "value * 1.8 + 32"},
	} {
		b.Run(c.name, func(b *testing.B) {
			newOp, err := Map(c.expr, "", fields)
			if c.fields != nil {
				newOp, err = MapFields(c.fields, c.expr, "", fields)
			}
			if err != nil {
				b.Fatal(err)
			}
			op := newOp(0)
			if err := op.Open(graph.NewTaskState(graph.TaskInfo{Operator: "m", Parallelism: 1}, discard{}).Context()); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				in := r
				if err := op.ProcessRecord(0, &in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkKeyBy makes the key of a record, one per iteration, by a field
// (as key_by of a field always did), a composite of three, and an
// expression.
func BenchmarkKeyBy(b *testing.B) {
	fields := Fields{"site": String, "line": String, "device": String}
	r := graph.Record{Key: "d", Payload: map[string]any{"site": "north", "line": "line-2", "device": "dev-7", "temperature": 21.5}}
	for _, c := range []struct {
		name  string
		parts []string
	}{
		{"field", []string{"device"}},
		{"composite", []string{"site", "line", "device"}},
		{"expression", []string{`site + "-" + line`}},
	} {
		b.Run(c.name, func(b *testing.B) {
			key, err := KeyBy(c.parts, fields, func(v any) string { return v.(string) }, "(missing)")
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				key(&r)
			}
		})
	}
}
