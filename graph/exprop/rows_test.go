package exprop

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/graph"
)

// formatKey stands in for mqttio.FormatKey, which the agent gives KeyBy:
// a number in plain decimal, anything else as fmt prints it.
func formatKey(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

func TestMapFields(t *testing.T) {
	m, err := MapFields([]Field{{Name: "hum", Expr: "humidity"}, {Name: "temp_f", Expr: "temperature * 9 / 5 + 32"},
		{Name: "at", Expr: "time"}, {Name: "tags", Expr: `[site, 1, {"n": 2}]`}}, "", "", Fields{"humidity": Number, "temperature": Number, "site": String})
	if err != nil {
		t.Fatal(err)
	}
	in := graph.Record{Key: "dev-7", Time: 1_000, Value: 3, Payload: map[string]any{"humidity": 40.0, "temperature": 100.0, "site": "north", "x": 1.0}}
	got, err := run(t, m, in)
	want := map[string]any{"hum": 40.0, "temp_f": 212.0, "at": 1000.0, "tags": []any{"north", 1.0, map[string]any{"n": 2.0}}}
	if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0].Payload, want) || got[0].Key != "dev-7" || got[0].Time != 1_000 || got[0].Value != 3 {
		t.Fatalf("gave %+v, %v; want the payload %v, key, time and value kept", got, err, want)
	}
	if _, err := json.Marshal(got[0].Payload); err != nil {
		t.Fatal(err)
	}

	// With expr, the value is the expression's over the record read.
	m, err = MapFields([]Field{{Name: "v", Expr: "value"}}, "value * 2", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := run(t, m, graph.Record{Value: 4}); err != nil || got[0].Value != 8 || !reflect.DeepEqual(got[0].Payload, map[string]any{"v": 4.0}) {
		t.Fatalf("gave %+v, %v", got, err)
	}

	// What a field cannot hold rejects the record, naming the field.
	for _, tc := range []struct {
		expr, shown string
		payload     any
		want        string
	}{
		{"humidity", "", map[string]any{}, `map field f: humidity: field "humidity" is missing`},
		{"humidity", "", map[string]any{"humidity": nil}, `map field f: humidity: field "humidity" is missing`},
		{"humidity", "${H}", map[string]any{}, `map field f: ${H}: it is missing`},
		{"humidity * 2", "", map[string]any{"humidity": "x"}, `map field f: humidity * 2: invalid operation`},
		{"humidity / 0", "", map[string]any{"humidity": 1.0}, `map field f: humidity / 0: gave +Inf, which no JSON payload holds`},
		{"[humidity / 0]", "", map[string]any{"humidity": 1.0}, `map field f: [humidity / 0]: gave a list holding a number that is not finite, which no JSON payload holds`},
		{"humidity == 1 ? now() : 0", "", map[string]any{"humidity": 1.0}, `map field f: humidity == 1 ? now() : 0: gave time.Time, which no JSON payload holds`},
		{"humidity?.x", "", map[string]any{"humidity": map[string]any{}}, `map field f: humidity?.x: gave nothing`},
	} {
		m, err := MapFields([]Field{{Name: "f", Expr: tc.expr, Shown: tc.shown}}, "", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = run(t, m, graph.Record{Payload: tc.payload})
		if _, ok := errors.AsType[*graph.RecordError](err); !ok || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s of %v: %v, want a rejection %s", tc.expr, tc.payload, err, tc.want)
		}
	}
}

func TestCompileFieldTypes(t *testing.T) {
	fields := Fields{"n": Number, "s": String, "b": Bool, "o": Object, "l": List, "a": Any}
	for src, want := range map[string]Type{"n": Number, "n * 2": Number, "len(s)": Number, "s": String, "s + 'x'": String, "b": Bool, "n > 1": Bool,
		"o": Object, `{"a": n}`: Object, "l": List, "[n, s]": List, "a": Any, "time": Number, "key": String, "value": Number} {
		if _, got, err := CompileField(src, fields); err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v", src, got, err, want)
		}
	}
	if _, _, err := CompileField("now()", fields); err == nil || err.(*Error).Gives != "a time.Time" {
		t.Errorf("now(): %v, want an error of what it gives", err)
	}
}

// TestKeyByReadsAsBefore: of one bare name, KeyBy gives every record the
// key the partitioner of key_by before expressions gave it (oldKey), so
// that keyed state an earlier cairn kept is found again.
func TestKeyByReadsAsBefore(t *testing.T) {
	oldKey := func(field string) func(*graph.Record) string {
		return func(r *graph.Record) string {
			if p, ok := r.Payload.(map[string]any); ok {
				if v, ok := p[field]; ok {
					return formatKey(v)
				}
			}
			return "(missing)"
		}
	}
	// A field's name with - or . reads as an expression too (device - id,
	// serial's no), but a record that has the field is keyed by it.
	for _, name := range []string{"device", "device-id", "serial.no", "site_2.line-2"} {
		for _, fields := range []Fields{nil, {name: Any}} {
			key, err := KeyBy([]string{name}, fields, formatKey, "(missing)")
			if err != nil {
				t.Fatalf("%s, fields %v: %v", name, fields, err)
			}
			for seed := range uint64(500) {
				rng := rand.New(rand.NewPCG(seed, 36))
				r := graph.Record{Key: "k", Payload: randomPayload(rng, []string{name, "other"})}
				if rng.IntN(5) == 0 {
					r.Payload = []any{nil, []byte("raw"), graph.WindowResult{Start: 1}}[rng.IntN(3)]
				}
				got, want := key(&r), oldKey(name)(&r)
				if p, ok := r.Payload.(map[string]any); name != "device" && (!ok || !hasKey(p, name)) {
					continue // no such field: the expression decides (device - id, serial's no)
				}
				if got != want {
					t.Fatalf("%s, fields %v, seed %d: %+v: key %q, before %q", name, fields, seed, r, got, want)
				}
			}
		}
	}
	// Where the field is missing, a name with . reads a map's field.
	key, err := KeyBy([]string{"serial.no"}, nil, formatKey, "(missing)")
	if err != nil {
		t.Fatal(err)
	}
	if got := key(&graph.Record{Payload: map[string]any{"serial": map[string]any{"no": "A7"}}}); got != "A7" {
		t.Errorf("serial.no of {serial: {no: A7}}: key %q, want A7", got)
	}
	// A name with - that is not among the fields known is an error.
	if _, err := KeyBy([]string{"device-id"}, Fields{"device_id": Any}, formatKey, "(missing)"); err == nil {
		t.Error("key_by device-id over the fields [device_id]: no error")
	}
}

func hasKey(p map[string]any, name string) bool {
	_, ok := p[name]
	return ok
}

func TestDottedName(t *testing.T) {
	for s, want := range map[string]bool{
		"device-id": true, "serial.no": true, "a.b-c_d": true, "line-2": true, "x_1.y2": true,
		"device": false, "-a": false, "a-": false, "a--b": false, "a..b": false, "1a-b": false,
		"a - b": false, `a-"b"`: false, "a-b+c": false, "": false, "é-ü": true,
	} {
		if got := dottedName(s); got != want {
			t.Errorf("dottedName(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestRowsFollowTheModel drives maps of generated fields and keys of
// generated parts — bare names, key, time and value, arithmetic, strings
// joined, lists, over generated payload fields declared or not — with
// generated records whose fields may be missing, null or of another type,
// and requires of each record what a plain model of the contract gives:
// the payload exactly or the rejection naming the first field that
// cannot be made, the value kept or set, key and time kept; and the key,
// which reads back into its parts.
func TestRowsFollowTheModel(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 36))
		names := randomNames(rng)
		var declared Fields
		if rng.IntN(2) == 0 {
			declared = Fields{}
			for _, n := range names {
				declared[n] = Any
			}
		}
		var fields []Field
		var models []modelExpr
		for i := range 1 + rng.IntN(4) {
			src, model := randomExpr(rng, names)
			fields = append(fields, Field{Name: fmt.Sprint("f", i), Expr: src})
			models = append(models, model)
		}
		value := ""
		if rng.IntN(2) == 0 {
			value = "value * 2"
		}
		newOp, err := MapFields(fields, value, "", declared)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		var parts []string
		var partModels []modelExpr
		for range 1 + rng.IntN(3) {
			src, model := randomExpr(rng, names)
			if model.list {
				continue // a key is no list
			}
			parts, partModels = append(parts, src), append(partModels, model)
		}
		if len(parts) == 0 {
			parts, partModels = []string{"key"}, []modelExpr{{eval: func(r *graph.Record) (any, bool) { return r.Key, true }, bare: true}}
		}
		key, err := KeyBy(parts, declared, formatKey, "(missing)")
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}

		out := &collect{}
		op := newOp(0)
		if err := op.Open(graph.NewTaskState(graph.TaskInfo{Operator: "m", Parallelism: 1}, out).Context()); err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			in := graph.Record{Key: randomString(rng), Time: rng.Int64N(1 << 45), Value: math.Round(rng.NormFloat64()*1000) / 8,
				Payload: randomPayload(rng, names)}
			r := in
			r.Payload = cloneJSON(in.Payload)
			out.got = out.got[:0]
			err := op.ProcessRecord(0, &r)
			if !reflect.DeepEqual(r, graph.Record{Key: in.Key, Time: in.Time, Value: in.Value, Payload: in.Payload}) {
				t.Fatalf("seed %d record %d: the map changed the record it read: %+v, was %+v", seed, i, r, in)
			}
			want, rejectedBy := modelMap(&in, fields, models)
			if value != "" {
				want.Value = in.Value * 2
			}
			switch _, rejected := errors.AsType[*graph.RecordError](err); {
			case rejectedBy != "" && (!rejected || !strings.HasPrefix(err.Error(), "map field "+rejectedBy+": ")):
				t.Fatalf("seed %d record %d %+v, fields %+v: gave %v, %v; the model rejects it for field %s", seed, i, in, fields, out.got, err, rejectedBy)
			case rejectedBy == "" && (err != nil || len(out.got) != 1 || !reflect.DeepEqual(out.got[0], want)):
				t.Fatalf("seed %d record %d %+v, fields %+v: gave %+v, %v; the model %+v", seed, i, in, fields, out.got, err, want)
			}
			if got, want := key(&in), modelKey(&in, partModels); got != want {
				t.Fatalf("seed %d record %d %+v: key_by %q gave %q, the model %q", seed, i, in, parts, got, want)
			}
			if got := key(&in); len(parts) > 1 && got != "(missing)" {
				var back []string
				for _, p := range strings.Split(got, "/") {
					back = append(back, strings.NewReplacer("%2F", "/", "%25", "%").Replace(p))
				}
				var each []string
				for _, m := range partModels {
					v, _ := m.eval(&in)
					each = append(each, formatKey(v))
				}
				if !slices.Equal(back, each) {
					t.Fatalf("seed %d: key %q reads back as %q, not its parts %q", seed, got, back, each)
				}
			}
		}
	}
}

// A modelExpr is what a generated expression gives a record, by the
// model: eval's false is no value (a rejection for a map's field, the
// missing key for key_by). bare marks a bare name: a field's value, null
// too, is a key; list marks an expression that gives a list.
type modelExpr struct {
	eval       func(*graph.Record) (any, bool)
	bare, list bool
}

// modelMap is the record a map of fields made by models makes of r: its
// payload the fields' values, or the name of the first field that fails.
func modelMap(r *graph.Record, fields []Field, models []modelExpr) (graph.Record, string) {
	payload := map[string]any{}
	for i, m := range models {
		v, ok := m.eval(r)
		if !ok || v == nil {
			return graph.Record{}, fields[i].Name
		}
		payload[fields[i].Name] = v
	}
	return graph.Record{Key: r.Key, Time: r.Time, Value: r.Value, Payload: payload}, ""
}

// modelKey is the key parts made by models give r.
func modelKey(r *graph.Record, models []modelExpr) string {
	var parts []string
	for _, m := range models {
		v, ok := m.eval(r)
		if !ok || v == nil && !m.bare {
			return "(missing)"
		}
		parts = append(parts, formatKey(v))
	}
	if len(parts) == 1 {
		return parts[0]
	}
	for i, p := range parts {
		var b strings.Builder
		for _, c := range p {
			switch c {
			case '%':
				b.WriteString("%25")
			case '/':
				b.WriteString("%2F")
			default:
				b.WriteRune(c)
			}
		}
		parts[i] = b.String()
	}
	return strings.Join(parts, "/")
}

// randomExpr returns an expression over payload fields names, and the
// model of what it gives.
func randomExpr(rng *rand.Rand, names []string) (string, modelExpr) {
	f, g := names[rng.IntN(len(names))], names[rng.IntN(len(names))]
	field := func(r *graph.Record, name string) (any, bool) {
		p, ok := r.Payload.(map[string]any)
		if !ok {
			return nil, false
		}
		v, ok := p[name]
		return v, ok
	}
	switch rng.IntN(7) {
	case 0:
		return "key", modelExpr{eval: func(r *graph.Record) (any, bool) { return r.Key, true }, bare: true}
	case 1:
		return "time", modelExpr{eval: func(r *graph.Record) (any, bool) { return float64(r.Time), true }, bare: true}
	case 2:
		return "value", modelExpr{eval: func(r *graph.Record) (any, bool) { return r.Value, true }, bare: true}
	case 3:
		return fmt.Sprintf("%s * 3 + 1", f), modelExpr{eval: func(r *graph.Record) (any, bool) {
			v, _ := field(r, f)
			x, ok := v.(float64)
			return x*3 + 1, ok
		}}
	case 4:
		return fmt.Sprintf(`%s + "/" + %s`, f, g), modelExpr{eval: func(r *graph.Record) (any, bool) {
			v, _ := field(r, f)
			w, _ := field(r, g)
			a, ok1 := v.(string)
			b, ok2 := w.(string)
			return a + "/" + b, ok1 && ok2
		}}
	case 5:
		return fmt.Sprintf("[%s, value]", f), modelExpr{eval: func(r *graph.Record) (any, bool) {
			v, _ := field(r, f)
			return []any{v, r.Value}, true
		}, list: true}
	}
	return f, modelExpr{eval: func(r *graph.Record) (any, bool) { return field(r, f) }, bare: true}
}

// randomNames returns 1 to 4 names of payload fields.
func randomNames(rng *rand.Rand) []string {
	pool := []string{"device", "site", "line", "temperature", "humidity", "ok", "tags", "_x", "Ünit"}
	rng.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
	return pool[:1+rng.IntN(4)]
}

// randomPayload returns a decoded JSON object holding some of names, of
// any type, null too, and another field.
func randomPayload(rng *rand.Rand, names []string) map[string]any {
	p := map[string]any{"other": 1.0}
	for _, n := range names {
		if rng.IntN(4) > 0 {
			p[n] = randomJSON(rng, 2)
		}
	}
	return p
}

// randomJSON returns a value of decoded JSON, nested depth deep at most.
func randomJSON(rng *rand.Rand, depth int) any {
	switch n := rng.IntN(8); {
	case n == 0:
		return nil
	case n == 1:
		return rng.IntN(2) == 0
	case n < 4:
		return []float64{0, math.Copysign(0, -1), 1, -2.5, 1e21, 1e-7, 123456789}[rng.IntN(7)]
	case n < 7 || depth == 0:
		return randomString(rng)
	case rng.IntN(2) == 0:
		return []any{randomJSON(rng, depth-1), randomJSON(rng, depth-1)}
	}
	return map[string]any{"a": randomJSON(rng, depth-1)}
}

// randomString returns a short string, with the characters a composite
// key escapes among others.
func randomString(rng *rand.Rand) string {
	const chars = "ab/%-2é"
	var b strings.Builder
	for range rng.IntN(5) {
		b.WriteString(string([]rune(chars)[rng.IntN(len([]rune(chars)))]))
	}
	return b.String()
}

// cloneJSON returns a deep copy of v, decoded JSON.
func cloneJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = cloneJSON(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = cloneJSON(e)
		}
		return out
	}
	return v
}

// FuzzRows feeds arbitrary expressions, as a map's field and as key_by's
// parts, and arbitrary JSON payloads to MapFields and KeyBy. They must
// never panic; an expression that does not compile is an *Error; and a
// record is either rejected (graph.RecordError) or made into one whose
// payload holds only what decoded JSON holds, which JSON encodes.
func FuzzRows(f *testing.F) {
	for _, seed := range [][2]string{
		{"humidity", `{"humidity": 40}`}, {"temperature * 9 / 5 + 32", `{"temperature": 20}`}, {`site + "/" + line`, `{"site": "n/1", "line": "%"}`},
		{"[a, {\"b\": 1}]", `{"a": [1, {"c": null}]}`}, {"a / 0", `{"a": 1}`}, {"now()", `{}`}, {"a?.b ?? 'x'", `{"a": {"b": 2}}`}, {"1 +", `{}`},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, src, payload string) {
		var p any
		if json.Unmarshal([]byte(payload), &p) != nil {
			return
		}
		r := graph.Record{Key: "k", Time: 1, Value: 2, Payload: p}
		m, err := MapFields([]Field{{Name: "f", Expr: src}}, "", "", nil)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%q: error %#v is no *Error", src, err)
			}
		} else {
			out := &collect{}
			op := m(0)
			if err := op.Open(graph.NewTaskState(graph.TaskInfo{Operator: "m", Parallelism: 1}, out).Context()); err != nil {
				t.Fatal(err)
			}
			err := op.ProcessRecord(0, &r)
			if _, rejected := errors.AsType[*graph.RecordError](err); err != nil && !rejected {
				t.Fatalf("%q of %s: %v, not a rejection", src, payload, err)
			}
			if err == nil {
				if !decodedJSON(out.got[0].Payload) {
					t.Fatalf("%q of %s gave %#v, which decoded JSON does not hold", src, payload, out.got[0].Payload)
				}
				if _, err := json.Marshal(out.got[0].Payload); err != nil {
					t.Fatalf("%q of %s gave %#v: %v", src, payload, out.got[0].Payload, err)
				}
			}
		}
		if key, err := KeyBy([]string{src, "key"}, nil, formatKey, "(missing)"); err == nil {
			key(&r)
		}
	})
}

// decodedJSON reports whether v holds only what encoding/json decodes
// into an any: nil, float64 (finite), string, bool, []any, map[string]any.
func decodedJSON(v any) bool {
	switch v := v.(type) {
	case nil, string, bool:
		return true
	case float64:
		return !math.IsInf(v, 0) && !math.IsNaN(v)
	case []any:
		for _, e := range v {
			if !decodedJSON(e) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range v {
			if !decodedJSON(e) {
				return false
			}
		}
		return true
	}
	return false
}
