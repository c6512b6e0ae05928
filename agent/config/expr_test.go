package config

import (
	"maps"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/graph/exprop"
)

// exprSources are two MQTT sources with fields and one without.
const exprSources = `brokers:
  b: {url: 'tcp://b:1883'}
sources:
  - id: readings
    broker: b
    topics: ["sensors/{device}/t"]
    value: temperature
    fields: {temperature: number, humidity: number, site: string, ok: bool}
  - id: other
    broker: b
    topics: [other/t]
    fields: {humidity: number, site: any}
  - {id: loose,
     broker: b,
     topics: [loose/t], time: ts}
operators:
`

// TestTypedExpressions: an expression is compiled against what is known of
// the records it reads, and an error points at the character it is about
// where the file holds the expression as it is.
func TestTypedExpressions(t *testing.T) {
	c, errs := Parse("e.yaml", []byte(exprSources+`  - {id: hot, type: filter, inputs: [readings], expr: temperature > 30 && ok && device != "d0"}
  - {id: both, type: union, inputs: [readings, other]}
  - {id: damp, type: filter, inputs: [both], expr: "humidity > 50 && site == 'north'"}
  - {id: all, type: union, inputs: [readings, loose]}
  - {id: any, type: filter, inputs: [all], expr: whatever > 1}
  - {id: scaled, type: map, inputs: [hot], expr: temperature * 2}
  - {id: agg, type: count, inputs: [readings], key_by: key}
  - {id: big, type: filter, inputs: [agg], expr: value > 100}
`), env(nil))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := map[string]exprop.Fields{
		"hot":  {"temperature": exprop.Number, "humidity": exprop.Number, "site": exprop.String, "ok": exprop.Bool, "device": exprop.String},
		"damp": {"humidity": exprop.Number, "site": exprop.Any},
		"any":  nil,
		"big":  {},
	}
	for _, o := range c.Operators {
		if w, ok := want[o.ID]; ok && (!maps.Equal(o.PayloadFields, w) || (w == nil) != (o.PayloadFields == nil)) {
			t.Errorf("operator %s reads fields %v, want %v", o.ID, o.PayloadFields, w)
		}
	}

	for _, tc := range []struct{ ops, want string }{
		// The exact character, in plain and quoted scalars.
		{"  - id: f\n    type: filter\n    inputs: [readings]\n    expr: temperature > 30 && humidty > 50\n",
			`e.yaml:20:31: operator "f": expr "temperature > 30 && humidty > 50" does not compile: unknown name humidty (1:21); its records have key, time, value and the fields device, humidity, ok, site, temperature`},
		{"  - id: f\n    type: filter\n    inputs: [readings]\n    expr: 'site > 1'\n",
			`e.yaml:20:17: operator "f": expr "site > 1" does not compile: invalid operation: > (mismatched types string and int64) (1:6)`},
		{"  - {id: f, type: filter, inputs: [readings], expr: \"tmp > 1\"}\n",
			`e.yaml:17:54: operator "f": expr "tmp > 1" does not compile: unknown name tmp (1:1); its records have key, time, value and the fields device, humidity, ok, site, temperature`},
		// Where the file does not hold it as it is: at its start.
		{"  - id: f\n    type: filter\n    inputs: [readings]\n    expr: \"\\x74mp > 1\"\n",
			`e.yaml:20:11: operator "f": expr "tmp > 1" does not compile: unknown name tmp (1:1); its records have key, time, value and the fields device, humidity, ok, site, temperature`},
		{"  - id: f\n    type: filter\n    inputs: [readings]\n    expr: |\n      tmp > 1\n",
			`e.yaml:20:11: operator "f": expr "tmp > 1\n" does not compile: unknown name tmp (1:1); its records have key, time, value and the fields device, humidity, ok, site, temperature`},
		// A union has the fields all its inputs have.
		{"  - {id: u, type: union, inputs: [readings, other]}\n  - {id: f, type: filter, inputs: [u], expr: ok}\n",
			`e.yaml:18:46: operator "f": expr "ok" does not compile: unknown name ok (1:1); its records have key, time, value and the fields humidity, site`},
		// An aggregate's records carry no payload fields.
		{"  - {id: w, type: window, inputs: [loose], key_by: key, window: {kind: tumbling, size: 1m}, aggregate: avg}\n  - {id: f, type: filter, inputs: [w], expr: site == 'x'}\n",
			`e.yaml:18:46: operator "f": expr "site == 'x'" does not compile: unknown name site (1:1); its records have key, time, value and no payload fields`},
		// Results of the wrong type, known with fields or without.
		{"  - {id: f, type: filter, inputs: [loose], expr: value * 2}\n",
			`e.yaml:17:50: operator "f": a filter's expr must give true or false; "value * 2" gives a number`},
		{"  - {id: m, type: map, inputs: [readings], expr: site}\n",
			`e.yaml:17:50: operator "m": a map's expr must give a number; "site" gives a string`},
		{"  - {id: m, type: map, inputs: [loose], expr: key + 1}\n",
			`e.yaml:17:51: operator "m": expr "key + 1" does not compile: invalid operation: + (mismatched types string and int64) (1:5)`},
	} {
		_, errs := Parse("e.yaml", []byte(exprSources+tc.ops), env(nil))
		if len(errs) != 1 || errs[0].Error() != tc.want {
			t.Errorf("%s\ngave %v\nwant %s", tc.ops, errs, tc.want)
		}
	}
	// ${VAR} moves the characters after it: the error is at the start,
	// and says neither the value nor the compiler's message, which could
	// quote it.
	_, errs = Parse("e.yaml", []byte(exprSources+"  - id: f\n    type: filter\n    inputs: [readings]\n    expr: ${F} > tmp\n"), env(map[string]string{"F": "temperature"}))
	if want := `e.yaml:20:11: operator "f": expr "${F} > tmp" (from the environment) does not compile;`; len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), want) || strings.Contains(errs[0].Msg, "temperature") {
		t.Errorf("gave %v, want %s", errs, want)
	}
}

// TestSourceFields checks the fields a source declares.
func TestSourceFields(t *testing.T) {
	const source = "brokers:\n  b: {url: 'tcp://b:1883'}\nsources:\n  - id: s\n    broker: b\n    topics: ['a/{device}/t']\n"
	for src, want := range map[string]string{
		"    fields: {temperature: numbr}\n":            `f.yaml:7:27: source "s": fields: temperature: type "numbr" is none of number, string, bool, object, list or any`,
		"    fields: {value: number}\n":                 `f.yaml:7:21: source "s": fields: value is a record's own, with key and time and value, not a payload field`,
		"    fields: {device: number}\n":                `f.yaml:7:22: source "s": fields: device is a level of topic "a/{device}/t", a string, not number`,
		"    value: temp\n    fields: {temp: string}\n": `f.yaml:8:20: source "s": fields: temp is the value field, which must be a number, not string`,
		"    time: ts\n    fields: {ts: bool}\n":        `f.yaml:8:18: source "s": fields: ts is the time field, which must be milliseconds (a number) or an RFC 3339 string, not bool`,
		"    format: raw\n    fields: {a: number}\n":    `f.yaml:8:13: source "s": fields: a raw payload has none (format: raw)`,
	} {
		_, errs := Parse("f.yaml", []byte(source+src), env(nil))
		if len(errs) != 1 || errs[0].Error() != want {
			t.Errorf("%s\ngave %v\nwant %s", src, errs, want)
		}
	}
	// A raw source's records have no payload fields; a source that
	// declares none has none either.
	for src, want := range map[string]string{
		"    format: raw\noperators:\n  - {id: f, type: filter, inputs: [s], expr: device == 'x'}\n": "unknown name device",
		"    fields: {}\noperators:\n  - {id: f, type: filter, inputs: [s], expr: ok}\n":             "unknown name ok (1:1); its records have key, time, value and the fields device",
	} {
		_, errs := Parse("f.yaml", []byte(source+src), env(nil))
		if !strings.Contains(errs.Error(), want) {
			t.Errorf("%s\ngave %v\nwant %s", src, errs, want)
		}
	}
}
