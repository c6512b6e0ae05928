package config

import (
	"maps"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/graph/exprop"
)

// joinSources are two sources with fields and event time, one with
// neither: operators follow at line 14.
const joinSources = `brokers:
  b: {url: 'tcp://b:1883'}
sources:
  - {id: supply,
     broker: b, time: ts,
     topics: ["supply/{device}"],
     fields: {temp: number, ok: bool}}
  - {id: setpoints,
     broker: b, time: ts,
     topics: ["setpoints/{device}"],
     fields: {target: number, mode: string}}
  - {id: loose, broker: b, topics: [loose]}
operators:
`

// TestJoinsFields: the records of an interval join carry each input's
// fields named after it, with its value and time, and a lookup join's
// the first input's fields as they are and the table's named after it;
// the expressions after them are checked against those, and are not
// where an input's fields are not known.
func TestJoinsFields(t *testing.T) {
	c, errs := Parse("j.yaml", []byte(joinSources+`  - {id: pairs, type: interval_join, inputs: [supply, setpoints], key_by: device, within: {before: 5s, after: 2s}}
  - {id: hot, type: filter, inputs: [pairs], expr: "supply_temp > setpoints_target && supply_time <= setpoints_time + 5000 && setpoints_mode == 'auto'"}
  - {id: with, type: lookup_join, inputs: [supply, setpoints], key_by: device, within: {before: 1h, after: 1h}}
  - {id: off, type: filter, inputs: [with], expr: "temp - setpoints_target > 2 && ok && setpoints_value > 0"}
  - {id: blind, type: lookup_join, inputs: [loose, setpoints], key_by: key}
  - {id: any, type: filter, inputs: [blind], expr: "whatever > 1"}
`), env(nil))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	pairs := exprop.Fields{"supply_temp": exprop.Number, "supply_ok": exprop.Bool, "supply_device": exprop.String, "supply_value": exprop.Number, "supply_time": exprop.Number,
		"setpoints_target": exprop.Number, "setpoints_mode": exprop.String, "setpoints_device": exprop.String, "setpoints_value": exprop.Number, "setpoints_time": exprop.Number}
	with := exprop.Fields{"temp": exprop.Number, "ok": exprop.Bool, "device": exprop.String,
		"setpoints_target": exprop.Number, "setpoints_mode": exprop.String, "setpoints_device": exprop.String, "setpoints_value": exprop.Number, "setpoints_time": exprop.Number}
	for i, want := range map[int]exprop.Fields{1: pairs, 3: with, 5: nil} {
		if got := c.Operators[i].PayloadFields; !maps.Equal(got, want) || (got == nil) != (want == nil) {
			t.Errorf("%s reads the fields %v, want %v", c.Operators[i].ID, got, want)
		}
	}
	if w := c.Operators[0].Within; w.Before != 5*time.Second || w.After != 2*time.Second {
		t.Errorf("within %+v", w)
	}
	if h := c.WindowHorizon(); h != 5*time.Second {
		t.Errorf("the horizon is %v, want the interval join's 5s (a lookup join ignores within)", h)
	}
	for _, o := range c.Operators {
		if newOp, err := o.Build(Hooks{}); err != nil || newOp(0) == nil {
			t.Errorf("%s: build: %v", o.ID, err)
		}
	}
}

// TestJoinsErrors: what is wrong with a join is reported where the file
// says it.
func TestJoinsErrors(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"  - {id: p, type: interval_join, inputs: [supply, setpoints], key_by: device}\n",
			`j.yaml:14:5: operator "p": an interval_join needs within: {before: ..., after: ...}`},
		{"  - {id: p, type: interval_join, inputs: [supply, setpoints], key_by: device, within: {before: -5s}}\n",
			`j.yaml:14:96: want a duration such as 500ms or 10s, not "-5s"`},
		{"  - {id: p, type: interval_join, inputs: [supply], key_by: device, within: {after: 1s}}\n",
			`j.yaml:14:42: operator "p": interval_join has exactly two inputs`},
		{"  - {id: p, type: interval_join, inputs: [supply, supply], key_by: device, within: {after: 1s}}\n",
			`j.yaml:14:51: operator "p": joins "supply" with itself: name two inputs`},
		{"  - {id: p, type: lookup_join, inputs: [supply, setpoints]}\n",
			`j.yaml:14:5: operator "p": lookup_join is keyed: set key_by`},
		{"  - {id: p, type: lookup_join, inputs: [supply, setpoints, loose], key_by: device}\n",
			`j.yaml:14:40: operator "p": lookup_join has exactly two inputs: the records, then the table`},
		{"  - {id: p, type: interval_join, inputs: [supply, setpoints], key_by: device, within: {after: 1s}}\n  - {id: f, type: filter, inputs: [p], expr: temp > 1}\n",
			`j.yaml:15:46: operator "f": expr "temp > 1" does not compile: unknown name temp (1:1); its records have key, time, value and the fields setpoints_device, setpoints_mode, setpoints_target, setpoints_time, setpoints_value, supply_device, supply_ok, supply_temp, supply_time, supply_value`},
		{"  - {id: p, type: lookup_join, inputs: [supply, setpoints], key_by: device}\n  - {id: f, type: filter, inputs: [p], expr: setpoints_mode > 1}\n",
			`j.yaml:15:61: operator "f": expr "setpoints_mode > 1" does not compile: invalid operation: > (mismatched types string and int64) (1:16)`},
		// The table's fields named as fields the records have: a lookup
		// of the table again.
		{"  - {id: w, type: lookup_join, inputs: [supply, setpoints], key_by: device}\n  - {id: p, type: lookup_join, inputs: [w, setpoints], key_by: device}\n",
			`j.yaml:15:40: operator "p": its records would have two fields setpoints_device, field setpoints_device of w and field device of setpoints: rename a field or an input`},
	} {
		_, errs := Parse("j.yaml", []byte(joinSources+tc.file), env(nil))
		if len(errs) == 0 || errs[0].Error() != tc.want {
			t.Errorf("%s\ngave %v\nwant %s", tc.file, errs, tc.want)
		}
	}
}

// TestJoinFieldsOfIdsNoExpressionCanName: an input's id with a - or a .
// names its fields in a join's records with _ in their place, so that an
// expression can name them.
func TestJoinFieldsOfIdsNoExpressionCanName(t *testing.T) {
	c, errs := Parse("j.yaml", []byte(`brokers:
  b: {url: 'tcp://b:1883'}
sources:
  - {id: supply-line.2, broker: b, topics: ["supply/{device}"], time: ts, fields: {temp: number}}
  - {id: set-points, broker: b, topics: ["setpoints/{device}"], time: ts, fields: {target: number}}
operators:
  - {id: p, type: interval_join, inputs: [supply-line.2, set-points], key_by: device, within: {after: 1s}}
  - {id: hot, type: filter, inputs: [p], expr: "supply_line_2_temp > set_points_target"}
  - {id: w, type: lookup_join, inputs: [supply-line.2, set-points], key_by: device}
  - {id: warm, type: filter, inputs: [w], expr: "temp > set_points_target + set_points_value"}
`), env(nil))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := c.Operators[1].PayloadFields["set_points_target"]; got != exprop.Number {
		t.Errorf("the filter after the join reads set_points_target as %v, want a number", got)
	}
}
