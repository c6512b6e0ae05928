package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/graph/exprop"
)

// aggSources are a source with fields, one without, both with event
// time, and the start of a window over the first, up to line 16:
// aggregates follow at line 17.
const aggSources = `brokers:
  b: {url: 'tcp://b:1883'}
sources:
  - id: readings
    broker: b
    topics: ["sensors/{device}/t"]
    time: ts
    fields: {temperature: number, humidity: number, vibration: number, site: string}
  - {id: loose, broker: b, topics: [loose/t],
     time: ts}
operators:
  - id: stats
    type: window
    inputs: [readings]
    key_by: device
    window: {kind: tumbling, size: 10s}
`

// TestWindowAggregates: a window takes every function, builds the
// aggregates in the order of their names over one value per argument,
// and its records carry the aggregates, start, end and count as payload
// fields for the expressions after it, and no others.
func TestWindowAggregates(t *testing.T) {
	c, errs := Parse("a.yaml", []byte(aggSources+`    aggregates:
      n: count()
      t_sum: sum(temperature)
      t_min: min(temperature)
      t_max: max(temperature)
      t_avg: avg(temperature)
      t_first: first(temperature)
      t_last: last(temperature)
      t_sd: stddev(temperature)
      h_p50: p50(humidity)
      h_p90: p90(humidity)
      v_p95: P95( vibration )
      v_p99: p99(vibration)
      v_q: quantile(vibration, 0.999)
      sites: distinct(site)
      t_n: distinct(temperature)
      f: avg(temperature * ${K} + 32)
  - {id: hot, type: filter, inputs: [stats], expr: t_avg > 30 && count > 5 && end - start == 10000}
  - {id: any, type: window, inputs: [loose], key_by: key, window: {kind: session, gap: 1m}, aggregates: {x: max(whatever)}}
sinks:
  - {id: out, input: stats, broker: b, topic: 'stats/{key}'}
`), env(map[string]string{"K": "1.8"}))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	stats := c.Operators[0]
	newOp, err := stats.Build(Hooks{})
	if err != nil || newOp(0) == nil {
		t.Fatalf("build: %v", err)
	}
	if got := c.AggregateOf("stats"); got != "" {
		t.Errorf("the output names aggregate %q: its records hold many", got)
	}
	want := exprop.Fields{"start": exprop.Number, "end": exprop.Number, "count": exprop.Number}
	for name := range stats.Aggregates {
		want[name] = exprop.Number
	}
	if hot := c.Operators[1]; !maps.Equal(hot.PayloadFields, want) {
		t.Errorf("the filter after the window reads the fields %v, want %v", hot.PayloadFields, want)
	}

	spec, err := stats.Window.Spec(graph.AggCount)
	if err != nil {
		t.Fatal(err)
	}
	var aggs []exprop.Aggregate
	for _, name := range slices.Sorted(maps.Keys(stats.Aggregates)) {
		aggs = append(aggs, exprop.Aggregate{Name: name, Call: stats.Aggregates[name], Shown: stats.AggregatesWritten[name]})
	}
	if err := exprop.WindowAggregates(&spec, aggs, stats.PayloadFields); err != nil {
		t.Fatal(err)
	}
	// In the order of the names; f reads argument 0, the humidity 1, the
	// temperature 2 and the vibration 3.
	wantAggs := []graph.NamedAggregate{
		{Name: "f", Func: graph.AggAvg, Arg: 0},
		{Name: "h_p50", Func: graph.AggQuantile, Quantile: 0.5, Arg: 1},
		{Name: "h_p90", Func: graph.AggQuantile, Quantile: 0.9, Arg: 1},
		{Name: "n", Func: graph.AggCount},
		{Name: "sites", Func: graph.AggDistinct, Arg: 0},
		{Name: "t_avg", Func: graph.AggAvg, Arg: 2},
		{Name: "t_first", Func: graph.AggFirst, Arg: 2},
		{Name: "t_last", Func: graph.AggLast, Arg: 2},
		{Name: "t_max", Func: graph.AggMax, Arg: 2},
		{Name: "t_min", Func: graph.AggMin, Arg: 2},
		{Name: "t_n", Func: graph.AggDistinct, Arg: 1},
		{Name: "t_sd", Func: graph.AggStddev, Arg: 2},
		{Name: "t_sum", Func: graph.AggSum, Arg: 2},
		{Name: "v_p95", Func: graph.AggQuantile, Quantile: 0.95, Arg: 3},
		{Name: "v_p99", Func: graph.AggQuantile, Quantile: 0.99, Arg: 3},
		{Name: "v_q", Func: graph.AggQuantile, Quantile: 0.999, Arg: 3},
	}
	if !slices.Equal(spec.Aggregates, wantAggs) || spec.NArgs != 4 || spec.NHashes != 2 {
		t.Fatalf("aggregates %v over %d arguments and %d hashed,\nwant %v over 4 and 2", spec.Aggregates, spec.NArgs, spec.NHashes, wantAggs)
	}
	args, hashes := make([]float64, spec.NArgs), make([]uint64, spec.NHashes)
	if err := spec.Args(&graph.Record{Payload: map[string]any{"temperature": 20.0, "humidity": 50.0, "vibration": 0.5, "site": "north"}}, args, hashes); err != nil || !slices.Equal(args, []float64{68, 50, 20, 0.5}) {
		t.Errorf("args %v, %v; want [68 50 20 0.5]", args, err)
	}
	north := slices.Clone(hashes)
	if err := spec.Args(&graph.Record{Payload: map[string]any{"temperature": 20, "humidity": 50.0, "vibration": 0.5, "site": "south"}}, args, hashes); err != nil ||
		hashes[0] == north[0] || hashes[1] != north[1] {
		t.Errorf("the hashes of north and 20.0 %x, of south and 20 %x, %v: want the sites' to differ, the temperatures' alike", north, hashes, err)
	}
	// A reason shows the call as the file writes it.
	err = spec.Args(&graph.Record{Payload: map[string]any{"temperature": "hot"}}, args, hashes)
	if want := "aggregate f: avg(temperature * ${K} + 32): "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("a rejection: %v, want it to start %q", err, want)
	}

	// Only what the window makes follows it.
	_, errs = Parse("a.yaml", []byte(aggSources+"    aggregates: {t_avg: avg(temperature)}\n  - {id: f, type: filter, inputs: [stats], expr: temperature > 30}\n"), env(nil))
	if want := `a.yaml:18:50: operator "f": expr "temperature > 30" does not compile: unknown name temperature (1:1); its records have key, time, value and the fields count, end, start, t_avg`; len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("gave %v\nwant %s", errs, want)
	}
}

// TestAggregatesErrors: each problem of a window's aggregates is
// reported at the value, at the very character where the file holds it
// as it is, saying what is wrong.
func TestAggregatesErrors(t *testing.T) {
	const functions = "count, sum, min, max, avg, first, last, stddev, p50, p90, p95, p99, quantile and distinct"
	long := strings.Repeat("a", 65)
	for _, tc := range []struct{ file, want string }{
		// In the call: the function, its arguments, q.
		{"    aggregates:\n      temp_avg: avrg(temperature)\n",
			`a.yaml:18:17: operator "stats": aggregate temp_avg "avrg(temperature)" does not compile: unknown function avrg; the functions are ` + functions + ` (1:1)`},
		{"    aggregates:\n      temp_avg: avg\n",
			`a.yaml:18:17: operator "stats": aggregate temp_avg "avg" does not compile: want a call such as avg(temperature) or count() (1:1)`},
		{"    aggregates:\n      a: avg()\n",
			`a.yaml:18:14: operator "stats": aggregate a "avg()" does not compile: avg needs an argument, the expression whose values it aggregates: avg(temperature) (1:5)`},
		{"    aggregates:\n      m: max(temperature, humidity)\n",
			`a.yaml:18:25: operator "stats": aggregate m "max(temperature, humidity)" does not compile: max takes one argument (1:16)`},
		{"    aggregates:\n      n: count(temperature)\n",
			`a.yaml:18:16: operator "stats": aggregate n "count(temperature)" does not compile: count() takes no argument: it counts the records (1:7)`},
		{"    aggregates:\n      a: avg(temperature) * 2\n",
			`a.yaml:18:27: operator "stats": aggregate a "avg(temperature) * 2" does not compile: * 2 after the call: an aggregate is one call (1:18)`},
		{"    aggregates:\n      q: quantile(temperature)\n",
			`a.yaml:18:30: operator "stats": aggregate q "quantile(temperature)" does not compile: quantile needs q after the expression, a number from 0 to 1: quantile(temperature, 0.9) (1:21)`},
		{"    aggregates:\n      q: \"quantile(temperature, 1.5)\"\n",
			`a.yaml:18:33: operator "stats": aggregate q "quantile(temperature, 1.5)" does not compile: q 1.5 is not from 0 to 1 (1:23)`},
		{"    aggregates: {q: 'quantile(vibration, q)'}\n",
			`a.yaml:17:42: operator "stats": aggregate q "quantile(vibration, q)" does not compile: q q is not a number from 0 to 1, such as 0.9 (1:21)`},
		// In the argument: a name the records lack, a result no number.
		{"    aggregates:\n      t: p95(temprature)\n",
			`a.yaml:18:14: operator "stats": aggregate t "p95(temprature)" does not compile: unknown name temprature (1:5); its records have key, time, value and the fields device, humidity, site, temperature, vibration`},
		{"    aggregates:\n      s: max(site)\n",
			`a.yaml:18:10: operator "stats": aggregate s "max(site)": its argument must give a number, not a string`},
		{"    aggregates:\n      d: distinct(site == 'north')\n",
			`a.yaml:18:10: operator "stats": aggregate d "distinct(site == 'north')": its argument must give a number or a string, not true or false`},
		{"    aggregates:\n      d: distinct(sites)\n",
			`a.yaml:18:19: operator "stats": aggregate d "distinct(sites)" does not compile: unknown name sites (1:10); its records have key, time, value and the fields device, humidity, site, temperature, vibration`},
		{"    aggregates:\n      d: distinct(site, 2)\n",
			`a.yaml:18:23: operator "stats": aggregate d "distinct(site, 2)" does not compile: distinct takes one argument (1:14)`},
		// Where the file does not hold it as it is: at its start.
		{"    aggregates:\n      t: \"\\x61vg(tmp)\"\n",
			`a.yaml:18:10: operator "stats": aggregate t "avg(tmp)" does not compile: unknown name tmp (1:5); its records have key, time, value and the fields device, humidity, site, temperature, vibration`},
		{"    aggregates:\n      t: |\n        avg(tmp)\n",
			`a.yaml:18:10: operator "stats": aggregate t "avg(tmp)\n" does not compile: unknown name tmp (1:5); its records have key, time, value and the fields device, humidity, site, temperature, vibration`},
		// The names.
		{"    aggregates:\n      temp-avg: avg(temperature)\n",
			`a.yaml:18:17: operator "stats": aggregates: "temp-avg" is no name: write 1 to 64 letters, digits and _, not starting with a digit`},
		{"    aggregates:\n      9lives: count()\n",
			`a.yaml:18:15: operator "stats": aggregates: "9lives" is no name: write 1 to 64 letters, digits and _, not starting with a digit`},
		{"    aggregates:\n      " + long + ": count()\n",
			`a.yaml:18:74: operator "stats": aggregates: "` + long + `" is no name: write 1 to 64 letters, digits and _, not starting with a digit`},
		{"    aggregates:\n      count: count()\n",
			`a.yaml:18:14: operator "stats": aggregates: "count" is the name of a field the window's output has besides its aggregates (id, v, operator, key, time, value, aggregate, start, end, count, payload, time_rfc3339, start_rfc3339, end_rfc3339): name it otherwise`},
		{"    aggregates: {value: avg(temperature)}\n",
			`a.yaml:17:25: operator "stats": aggregates: "value" is the name of a field the window's output has besides its aggregates (id, v, operator, key, time, value, aggregate, start, end, count, payload, time_rfc3339, start_rfc3339, end_rfc3339): name it otherwise`},
		// The operator.
		{"    aggregates: {}\n",
			`a.yaml:17:17: operator "stats": aggregates is empty: name one at least, such as n: count()`},
		{"    aggregate: avg\n    aggregates: {n: count()}\n",
			`a.yaml:18:17: operator "stats": aggregate and aggregates: write one of them`},
		{"    aggregates:\n",
			`a.yaml:12:5: operator "stats": a window needs aggregate or aggregates`},
		{"    aggregate: avg\n  - {id: j, type: join, inputs: [readings, loose], key_by: key, window: {kind: tumbling, size: 1s}, aggregates: {n: count()}}\n",
			`a.yaml:18:113: operator "j": a join makes one aggregate of each input (aggregate), not many: aggregates is for a window, for now`},
		// A sink's output keeps its fields' names clear of the aggregates'.
		{"    aggregates: {n: count()}\nsinks:\n  - {id: out, input: stats, broker: b, topic: o, output: {names: {count: n}}}\n",
			`a.yaml:19:66: sink "out": output field count renamed to "n", the name of an aggregate of the window`},
		{"    aggregates: {n: count()}\nsinks:\n  - {id: out, input: stats, broker: b, topic: o, output: {add: {n: gw-1}}}\n",
			`a.yaml:19:64: sink "out": output field "n" added is the name of an aggregate of the window`},
	} {
		_, errs := Parse("a.yaml", []byte(aggSources+tc.file), env(nil))
		if len(errs) != 1 || errs[0].Error() != tc.want {
			t.Errorf("%s\ngave %v\nwant %s", tc.file, errs, tc.want)
		}
	}
	// ${VAR} moves the characters after it: the error is at the start,
	// and shows neither the value nor the compiler's message, which could
	// quote it.
	_, errs := Parse("a.yaml", []byte(aggSources+"    aggregates:\n      t: avg(${F})\n"), env(map[string]string{"F": "hunter2"}))
	if want := `a.yaml:18:10: operator "stats": aggregate t "avg(${F})" (from the environment) does not compile; the compiler's message could quote the environment's value, so it is not shown`; len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("gave %v\nwant %s", errs, want)
	}
}

// TestAggregatesBuiltAsValidated: Build compiles the calls the validation
// compiled, with the fields it found: a file that validates builds, and
// the build's error, for one that does not, is the call's.
func TestAggregatesBuiltAsValidated(t *testing.T) {
	c, errs := Parse("a.yaml", []byte(aggSources+"    aggregates: {t: avg(temperature)}\n"), env(nil))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	o := c.Operators[0]
	o.Aggregates = map[string]string{"t": "avg(tmp)"}
	_, err := o.Build(Hooks{})
	var e *exprop.Error
	if !errors.As(err, &e) || fmt.Sprint(err) != `aggregate t: expression "avg(tmp)": unknown name tmp (1:5)` {
		t.Errorf("build: %v", err)
	}
}
