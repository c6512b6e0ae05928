package config

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/graph/exprop"
)

// TestMapFields: a map with fields makes records whose payload fields are
// those, of the types their expressions give, whether or not the fields
// of what it reads are known; expressions after it are checked against
// them.
func TestMapFields(t *testing.T) {
	c, errs := Parse("m.yaml", []byte(exprSources+`  - id: shaped
    type: map
    inputs: [readings]
    fields:
      hum: humidity
      temp_f: temperature * 9 / 5 + 32
      where: site + "/" + device
      ok: ok
      tags: '[site, "x"]'
      at: time
  - {id: hot, type: filter, inputs: [shaped], expr: temp_f > 86 && hum < 90 && where != ""}
  - id: loose_shaped
    type: map
    inputs: [loose]
    expr: value * 2
    fields: {seen: whatever, n: len(key)}
  - {id: after, type: filter, inputs: [loose_shaped], expr: n > 1 && seen != nil}
`), env(nil))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := map[string]exprop.Fields{
		"hot": {"hum": exprop.Number, "temp_f": exprop.Number, "where": exprop.String, "ok": exprop.Bool, "tags": exprop.List, "at": exprop.Number},
		// The fields read are not known: what they give is not either,
		// but their names are.
		"after": {"seen": exprop.Any, "n": exprop.Number},
	}
	for _, o := range c.Operators {
		if w, ok := want[o.ID]; ok && !maps.Equal(o.PayloadFields, w) {
			t.Errorf("operator %s reads fields %v, want %v", o.ID, o.PayloadFields, w)
		}
	}

	for _, tc := range []struct{ ops, want string }{
		// The exact character of a field's expression.
		{"  - id: m\n    type: map\n    inputs: [readings]\n    fields:\n      hum: humidty * 2\n",
			`m.yaml:21:12: operator "m": field hum "humidty * 2" does not compile: unknown name humidty (1:1); its records have key, time, value and the fields device, humidity, ok, site, temperature`},
		{"  - {id: m, type: map, inputs: [readings], fields: {t: 'temperature + site'}}\n",
			`m.yaml:17:69: operator "m": field t "temperature + site" does not compile: invalid operation: + (mismatched types float64 and string) (1:13)`},
		// After the map, only its fields are there.
		{"  - {id: m, type: map, inputs: [readings], fields: {hum: humidity}}\n  - {id: f, type: filter, inputs: [m], expr: temperature > 1}\n",
			`m.yaml:18:46: operator "f": expr "temperature > 1" does not compile: unknown name temperature (1:1); its records have key, time, value and the fields hum`},
		{"  - {id: m, type: map, inputs: [readings], fields: {w: site}}\n  - {id: f, type: filter, inputs: [m], expr: w > 1}\n",
			`m.yaml:18:48: operator "f": expr "w > 1" does not compile: invalid operation: > (mismatched types string and int64) (1:3)`},
		// Names.
		{"  - {id: m, type: map, inputs: [readings], fields: {value: humidity}}\n",
			`m.yaml:17:60: operator "m": fields: value is a record's own, which every expression reads as the record's value, not a payload field's: expr sets a record's value`},
		{"  - {id: m, type: map, inputs: [readings], fields: {\"temp-c\": temperature}}\n",
			`m.yaml:17:63: operator "m": fields: "temp-c" is no name: write 1 to 64 letters, digits and _, not starting with a digit`},
		{"  - {id: m, type: map, inputs: [readings], fields: {a: humidity, a: temperature}}\n",
			`m.yaml:17:66: key "a" given twice`},
		{"  - {id: m, type: map, inputs: [readings], fields: {}}\n",
			`m.yaml:17:52: operator "m": fields is empty: name one at least, such as hum: humidity`},
		// What no payload holds, and a map's expr beside its fields.
		{"  - {id: m, type: map, inputs: [readings], fields: {when: now()}}\n",
			`m.yaml:17:59: operator "m": field when "now()" gives a time.Time: a field holds a number, a string, true or false, a list or an object`},
		{"  - {id: m, type: map, inputs: [readings], expr: site, fields: {s: site}}\n",
			`m.yaml:17:50: operator "m": a map's expr must give a number; "site" gives a string`},
		{"  - {id: m, type: map, inputs: [readings]}\n",
			`m.yaml:17:5: operator "m": map needs expr`},
	} {
		_, errs := Parse("m.yaml", []byte(exprSources+tc.ops), env(nil))
		if len(errs) != 1 || errs[0].Error() != tc.want {
			t.Errorf("%s\ngave %v\nwant %s", tc.ops, errs, tc.want)
		}
	}
}

// TestKeyBy: key_by takes an expression or a list of them, checked
// against what is known of the records read, at the very character.
func TestKeyBy(t *testing.T) {
	c, errs := Parse("k.yaml", []byte(exprSources+`  - {id: a, type: count, inputs: [readings], key_by: device}
  - {id: b, type: count, inputs: [readings], key_by: key}
  - {id: c, type: count, inputs: [readings], key_by: site + "-" + device}
  - id: d
    type: count
    inputs: [readings]
    key_by: [site, device, ok]
  - {id: e, type: count, inputs: [loose], key_by: [whatever, key]}
`), env(nil))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for i, want := range [][]string{{"device"}, {"key"}, {`site + "-" + device`}, {"site", "device", "ok"}, {"whatever", "key"}} {
		if got := c.Operators[i].KeyBy; !slices.Equal(got, want) {
			t.Errorf("operator %s: key_by %q, want %q", c.Operators[i].ID, got, want)
		}
	}
	key, err := c.Operators[3].Key()
	if err != nil {
		t.Fatal(err)
	}
	r := graph.Record{Payload: map[string]any{"site": "no/rth", "device": "dev%7", "ok": true}}
	if got := key(&r); got != "no%2Frth/dev%257/true" {
		t.Errorf("key %q", got)
	}

	for _, tc := range []struct{ ops, want string }{
		{"  - {id: a, type: count, inputs: [readings], key_by: devcie}\n",
			`k.yaml:17:54: operator "a": key_by "devcie" does not compile: unknown name devcie (1:1); its records have key, time, value and the fields device, humidity, ok, site, temperature`},
		{"  - id: a\n    type: count\n    inputs: [readings]\n    key_by:\n      - site\n      - 'line + 1'\n",
			`k.yaml:22:10: operator "a": key_by "line + 1" does not compile: unknown name line (1:1); its records have key, time, value and the fields device, humidity, ok, site, temperature`},
		{"  - {id: a, type: count, inputs: [readings], key_by: [site, 'site > temperature']}\n",
			`k.yaml:17:67: operator "a": key_by "site > temperature" does not compile: invalid operation: > (mismatched types string and float64) (1:6)`},
		{"  - {id: a, type: count, inputs: [readings], key_by: '[site]'}\n",
			`k.yaml:17:54: operator "a": key_by "[site]" gives a list: a key is a string, a number or true or false`},
		{"  - {id: a, type: count, inputs: [readings], key_by: []}\n",
			`k.yaml:17:54: operator "a": key_by is empty: name a field, or list the parts of a composite key`},
		{"  - {id: a, type: count, inputs: [readings], key_by: ''}\n",
			`k.yaml:17:54: operator "a": key_by "" is empty: name a field, such as device, or write an expression`},
		{"  - {id: a, type: count, inputs: [readings], key_by: {site: 1}}\n",
			`k.yaml:17:54: want a list, not a mapping`},
	} {
		_, errs := Parse("k.yaml", []byte(exprSources+tc.ops), env(nil))
		if len(errs) != 1 || errs[0].Error() != tc.want {
			t.Errorf("%s\ngave %v\nwant %s", tc.ops, errs, tc.want)
		}
	}
	// ${VAR} in a part: the error shows the part as written.
	_, errs = Parse("k.yaml", []byte(exprSources+"  - {id: a, type: count, inputs: [readings], key_by: [site, '${K}']}\n"), env(map[string]string{"K": "secret"}))
	if want := `k.yaml:17:61: operator "a": key_by "${K}" (from the environment) does not compile;`; len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), want) || strings.Contains(errs[0].Msg, "secret") {
		t.Errorf("gave %v, want %s", errs, want)
	}
}

// TestKeyByAFieldNamedWithDashesOrDots: key_by names a payload field
// whose name has - or . in it, as files before expressions did, whether
// or not the source declares its fields; one not declared where fields
// are is an error.
func TestKeyByAFieldNamedWithDashesOrDots(t *testing.T) {
	c, errs := Parse("k.yaml", []byte(`brokers:
  b: {url: 'tcp://b:1883'}
sources:
  - {id: declared, broker: b, topics: [d/t], fields: {device-id: string, temperature: number}}
  - {id: loose, broker: b, topics: [l/t]}
operators:
  - {id: a, type: count, inputs: [declared], key_by: device-id}
  - {id: b, type: count, inputs: [loose], key_by: [serial.no, line-2]}
`), env(nil))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for i, tc := range []struct {
		payload map[string]any
		want    string
	}{
		{map[string]any{"device-id": "dev-7", "temperature": 20.5}, "dev-7"},
		{map[string]any{"serial.no": "A/1", "line-2": 3.0}, "A%2F1/3"},
	} {
		key, err := c.Operators[i].Key()
		if err != nil {
			t.Fatal(err)
		}
		if got := key(&graph.Record{Payload: tc.payload}); got != tc.want {
			t.Errorf("operator %s: key %q of %v, want %q", c.Operators[i].ID, got, tc.payload, tc.want)
		}
	}
	_, errs = Parse("k.yaml", []byte(`brokers:
  b: {url: 'tcp://b:1883'}
sources:
  - {id: declared, broker: b, topics: [d/t], fields: {device_id: string}}
operators:
  - {id: a, type: count, inputs: [declared], key_by: device-id}
`), env(nil))
	if want := `k.yaml:6:54: operator "a": key_by "device-id" does not compile: unknown name device`; len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), want) {
		t.Errorf("gave %v, want %s", errs, want)
	}
}
