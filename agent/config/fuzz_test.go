package config

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph/exprop"
	"github.com/cairn-edge/cairn/mqttio"
)

// FuzzParse feeds arbitrary files to the loader. It must never panic; it
// either accepts a file or names every problem at a position inside it,
// in file order, none showing what the environment gave (${SECRET}); and
// a file it accepts is one the agent can run: a known
// checkpointing mode, operators reading streams defined above them, window
// operators that build (their windows, and their aggregate or a window's
// aggregates), expressions that compile as the operators will compile
// them, sinks on known brokers with topics a broker takes. Seeds (with
// the crash it once found): testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("sources: [{id: a, simulator: {devices: 1}}]\noperators: [{id: b, type: window, inputs: [a], window: {kind: x}}]"))
	f.Add([]byte("&a [*a]"))
	f.Add([]byte(exprSources + "  - {id: hot, type: filter, inputs: [readings], expr: temperature > 30 && site == 'x'}\n"))
	f.Add([]byte("agent: {log_level: '${SECRET}', metrics: '${SECRET}:x'}\nbrokers:\n  b: {url: 'tcp://${SECRET}', keepalive: '${SECRET}', users: [{username: '${SECRET}'}]}\n" +
		"sources: [{id: '${SECRET}', broker: b, topics: ['a/{${SECRET}}/{}'], fields: {x: '${SECRET}'}}]\n" +
		"operators: [{id: f, type: filter, inputs: [s], expr: 'value > ${SECRET}'}, {id: w, type: window, inputs: [f], window: {kind: '${SECRET}'}, aggregate: '${SECRET}'}]\n"))
	f.Add([]byte("brokers:\n  b: {url: 'tcp://b:1883', status_topic: 's/${SECRET}/+'}\nsources: [{id: s, broker: b, topics: [a], dead_letter_topic: '${SECRET}#'}]\n" +
		"sinks: [{id: o, input: s, broker: b, topic: 'out/${SECRET}+/{key}'}]\n"))
	f.Add([]byte(aggSources + "    aggregates:\n      n: count()\n      t: avg(temperature * 2)\n      v_p95: p95(vibration)\n      q: quantile(humidity, 0.9)\n" +
		"  - {id: hot, type: filter, inputs: [stats], expr: t > 30 && n > 1}\n"))
	f.Add([]byte(aggSources + "    aggregates: {count: 'avrg(max(a, \"b)\"))', 't-1': '${SECRET}(x)', s: max(site), q: 'quantile(x, ${SECRET})'}\n" +
		"  - {id: j, type: join, inputs: [readings, loose], key_by: key, window: {kind: tumbling, size: 1s}, aggregates: {n: count()}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, errs := Parse("fuzz.yaml", data, env(map[string]string{"MQTT_USER": "u", "SECRET": fuzzSecret}))
		lines := yamlLines(data)
		// Unless the file spells the secret itself (or could, through
		// an escape), no error holds it.
		spelt := bytes.Contains(bytes.ToLower(data), []byte(fuzzSecret)) || bytes.ContainsRune(data, '\\')
		for _, e := range errs {
			if e.File != "fuzz.yaml" || e.Line < 1 || e.Line > lines || e.Col < 1 || e.Msg == "" {
				t.Fatalf("error %q is not at a position in the %d-line file", e.Error(), lines)
			}
			if !spelt && strings.Contains(strings.ToLower(e.Msg), fuzzSecret) {
				t.Fatalf("error %q shows the value of ${SECRET}", e.Error())
			}
		}
		if !slices.IsSortedFunc(errs, func(a, b Error) int {
			if a.Line != b.Line {
				return a.Line - b.Line
			}
			return a.Col - b.Col
		}) {
			t.Fatalf("errors are not in file order:\n%v", errs)
		}
		if len(errs) > 0 {
			return
		}
		if c == nil {
			t.Fatal("no config and no error")
		}
		if _, err := checkpoint.ParseMode(c.Checkpoints.Mode); err != nil {
			t.Fatalf("accepted mode %q: %v", c.Checkpoints.Mode, err)
		}
		if len(c.Sources) == 0 {
			t.Fatal("accepted a file without sources")
		}
		defined := map[string]bool{}
		for _, s := range c.Sources {
			defined[s.ID] = true
			if s.Parallelism < 1 || (s.Simulator == nil && c.Brokers[s.Broker] == nil) {
				t.Fatalf("accepted source %+v", s)
			}
		}
		for _, o := range c.Operators {
			for _, in := range o.Inputs {
				if !defined[in] {
					t.Fatalf("operator %q reads %q, which is not defined above it", o.ID, in)
				}
			}
			switch o.Type {
			case "filter":
				if _, err := exprop.CompileFilter(o.Expr, o.PayloadFields); err != nil {
					t.Fatalf("accepted filter %q: %v", o.ID, err)
				}
			case "map":
				if _, err := exprop.CompileMap(o.Expr, o.PayloadFields); err != nil {
					t.Fatalf("accepted map %q: %v", o.ID, err)
				}
			}
			if o.Type == "window" || o.Type == "join" {
				if o.Window == nil || o.Aggregates != nil && (o.Type == "join" || o.Aggregate != "") {
					t.Fatalf("accepted window operator %+v", o)
				}
				if _, err := o.Build(Hooks{}); err != nil {
					t.Fatalf("accepted window operator %q, which does not build: %v", o.ID, err)
				}
			}
			defined[o.ID] = true
		}
		for _, s := range c.Sinks {
			if !defined[s.Input] || c.Brokers[s.Broker] == nil || mqttio.CheckTopicTemplate(s.Topic) != nil {
				t.Fatalf("accepted sink %+v", s)
			}
		}
	})
}

// fuzzSecret is FuzzParse's ${SECRET}, in lower case.
const fuzzSecret = "hunter2"

// yamlLines is how many lines a YAML parser sees in data: it breaks lines at
// \n, \r\n, a lone \r, and NEL, LS and PS.
func yamlLines(data []byte) int {
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	n := 1
	for _, r := range s {
		switch r {
		case '\n', '\r', '\u0085', '\u2028', '\u2029':
			n++
		}
	}
	return n
}
