package exprop

import (
	"errors"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/graph"
)

type collect struct{ got []graph.Record }

func (c *collect) Emit(r *graph.Record) { c.got = append(c.got, *r) }

func run(t *testing.T, newOp func(int) graph.Operator, recs ...graph.Record) ([]graph.Record, error) {
	t.Helper()
	out := &collect{}
	s := graph.NewTaskState(graph.TaskInfo{Operator: "x", Parallelism: 1}, out)
	op := newOp(0)
	if err := op.Open(s.Context()); err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if err := op.ProcessRecord(0, &recs[i]); err != nil {
			return out.got, err
		}
	}
	return out.got, nil
}

func TestFilterAndMap(t *testing.T) {
	f, err := Filter(`value > 30 && site == "north"`, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := run(t, f,
		graph.Record{Key: "a", Value: 31, Payload: map[string]any{"site": "north"}},
		graph.Record{Key: "b", Value: 31, Payload: map[string]any{"site": "south"}},
		graph.Record{Key: "c", Value: 29, Payload: map[string]any{"site": "north"}})
	if err != nil || len(got) != 1 || got[0].Key != "a" {
		t.Fatalf("filter kept %v (%v)", got, err)
	}
	m, err := Map(`(value - 32) * 5 / 9`, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err = run(t, m, graph.Record{Key: "a", Value: 212})
	if err != nil || got[0].Value != 100 {
		t.Fatalf("map gave %v (%v)", got, err)
	}
}

// TestExpressionsSeeARow: an expression over a window's row sees its
// start, end and count as integers and each aggregate by its name. Where
// the fields are not known, count is expr's function, as in any record.
func TestExpressionsSeeARow(t *testing.T) {
	row := graph.Record{Key: "dev-1", Time: 9_999, Payload: graph.WindowRow{Start: 0, End: 10_000, Count: 10,
		Names: []string{"hum_max", "temp_avg"}, Values: []float64{61, 21.5}}}
	fields := Fields{"start": Any, "end": Any, "count": Any, "hum_max": Number, "temp_avg": Number}
	f, err := Filter(`count >= 10 && end - start == 10000 && end % 3 == 1 && temp_avg > 21 && key == "dev-1"`, "", fields)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := run(t, f, row); err != nil || len(got) != 1 {
		t.Fatalf("filter kept %v (%v)", got, err)
	}
	m, err := Map(`hum_max - temp_avg + count`, "", fields)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := run(t, m, row); err != nil || got[0].Value != 49.5 {
		t.Fatalf("map gave %v (%v)", got, err)
	}
	if m, err = Map(`(end - start) / 1000 + hum_max`, "", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := run(t, m, row); err != nil || got[0].Value != 71 {
		t.Fatalf("map of fields not known gave %v (%v)", got, err)
	}
}

func TestExpressionErrors(t *testing.T) {
	if _, err := Filter("value >", "", nil); err == nil {
		t.Fatal("a broken expression compiled")
	}
	// A reading without the field, or with one of another type, is
	// rejected alone: the operator goes on with the next.
	f, _ := Filter("humidity > 50", "", nil)
	var rejected *graph.RecordError
	for _, payload := range []map[string]any{{}, {"humidity": "wet"}} {
		_, err := run(t, f, graph.Record{Value: 1, Payload: payload})
		if !errors.As(err, &rejected) || !strings.HasPrefix(err.Error(), `filter "humidity > 50": invalid operation:`) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("a filter on %v: %v, want a one-line graph.RecordError", payload, err)
		}
	}
	if got, err := run(t, f, graph.Record{Key: "k", Payload: map[string]any{"humidity": 60.0}}); err != nil || len(got) != 1 {
		t.Fatalf("the filter after a rejected record kept %v (%v)", got, err)
	}
	f, _ = Filter("reading", "", nil)
	if _, err := run(t, f, graph.Record{Value: 1, Payload: map[string]any{"reading": 1.0}}); !errors.As(err, &rejected) || !strings.Contains(err.Error(), "want true or false") {
		t.Fatalf("a filter giving a number: %v", err)
	}
	m, _ := Map(`label`, "", nil)
	if _, err := run(t, m, graph.Record{Value: 1, Payload: map[string]any{"label": "text"}}); !errors.As(err, &rejected) || !strings.Contains(err.Error(), "want a number") {
		t.Fatalf("a map giving a string: %v", err)
	}
}

// TestCompileWhatIsKnown: key, time and value are typed always, payload
// fields where they are given; a name they lack, an operation their types
// forbid, and a result of the wrong type are errors, with their column.
func TestCompileWhatIsKnown(t *testing.T) {
	fields := Fields{"humidity": Number, "site": String, "ok": Bool, "meta": Object, "tags": List, "extra": Any}
	for _, src := range []string{"humidity > 50 && site == 'north'", "ok", "meta.room == 'a' && len(tags) > 0", "extra", "key == 'd1' && time > 0"} {
		if _, err := CompileFilter(src, fields); err != nil {
			t.Errorf("filter %s: %v", src, err)
		}
	}
	for _, src := range []string{"humidity * 2", "time", "time / 1000", "len(site)"} {
		if _, err := CompileMap(src, fields); err != nil {
			t.Errorf("map %s: %v", src, err)
		}
	}
	for _, tc := range []struct {
		filter bool
		src    string
		fields Fields
		msg    string
		col    int
	}{
		{true, "humidty > 50", fields, "unknown name humidty", 1},
		{true, "value > 1 && humidty > 50", fields, "unknown name humidty", 14},
		{true, "site > 1", fields, "invalid operation: > (mismatched types string and int64)", 6},
		{true, "value * 2", nil, "gives a number, not true or false", 0},
		{true, "key", nil, "gives a string, not true or false", 0},
		{true, "value >", nil, "unexpected token EOF", 7},
		{false, "site", fields, "gives a string, not a number", 0},
		{false, "ok", fields, "gives true or false, not a number", 0},
		{false, "key + 1", nil, "invalid operation: + (mismatched types string and int64)", 5},
		{false, "anything", Fields{}, "unknown name anything", 1},
	} {
		compile := CompileMap
		if tc.filter {
			compile = CompileFilter
		}
		_, err := compile(tc.src, tc.fields)
		var e *Error
		if !errors.As(err, &e) || e.Msg != tc.msg || e.Column != tc.col || e.Line != min(tc.col, 1) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %#v, want %q at column %d", tc.src, err, tc.msg, tc.col)
		}
	}
	// Without fields a name may be anything, as before.
	if _, err := CompileFilter("humidty > 50", nil); err != nil {
		t.Errorf("an unknown name without fields: %v", err)
	}
}

// TestTypedExpressionsRejectBadRecords: a record that lacks a field its
// source declares, or holds another type there, is rejected, never
// dropped in silence or a crash.
func TestTypedExpressionsRejectBadRecords(t *testing.T) {
	fields := Fields{"humidity": Number, "site": String, "ok": Bool}
	for _, src := range []string{"humidity > 50", "site == 'north'", "ok", "!ok", "ok && value > 0"} {
		f, err := Filter(src, "", fields)
		if err != nil {
			t.Fatal(err)
		}
		for _, payload := range []any{map[string]any{}, map[string]any{"humidity": "wet", "site": 1.0, "ok": "yes"}, nil, []byte("raw")} {
			got, err := run(t, f, graph.Record{Value: 1, Payload: payload})
			var rejected *graph.RecordError
			if !errors.As(err, &rejected) || len(got) != 0 {
				t.Errorf("filter %s on %v: kept %v, %v; want it rejected", src, payload, got, err)
			}
		}
		if _, err := run(t, f, graph.Record{Value: 1, Payload: map[string]any{"humidity": 60.0, "site": "north", "ok": true}}); err != nil {
			t.Errorf("filter %s on a good record: %v", src, err)
		}
	}
	m, err := Map("time / 1000 + humidity", "", fields)
	if err != nil {
		t.Fatal(err)
	}
	got, err := run(t, m, graph.Record{Time: 5000, Payload: map[string]any{"humidity": 1.0}})
	if err != nil || got[0].Value != 6 {
		t.Fatalf("map gave %v, %v; want 6", got, err)
	}
	if _, err := run(t, m, graph.Record{Time: 5000}); err == nil {
		t.Fatal("a map over a missing field gave no error")
	}
	m, _ = Map("time", "", nil)
	if got, err := run(t, m, graph.Record{Time: 7}); err != nil || got[0].Value != 7 {
		t.Fatalf("map time gave %v, %v; want 7 (an int64 is a number)", got, err)
	}
}

func TestParseType(t *testing.T) {
	for _, name := range []string{"number", "string", "bool", "object", "list", "any"} {
		if ty, err := ParseType(name); err != nil || ty.String() != name {
			t.Errorf("%s: %v, %v", name, ty, err)
		}
	}
	if _, err := ParseType("float"); err == nil || err.Error() != `type "float" is none of number, string, bool, object, list or any` {
		t.Errorf("float: %v", err)
	}
}

// TestMapRejectsNonFinite: a map that gives an infinity or NaN (value / 0)
// rejects the record rather than pass on a number nothing downstream can
// use.
func TestMapRejectsNonFinite(t *testing.T) {
	m, err := Map("value / 0", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	op := m(0)
	state := graph.NewTaskState(graph.TaskInfo{Operator: "m", Parallelism: 1}, discard{})
	if err := op.Open(state.Context()); err != nil {
		t.Fatal(err)
	}
	for _, v := range []float64{1, 0} {
		err := op.ProcessRecord(0, &graph.Record{Value: v})
		var rejected *graph.RecordError
		if !errors.As(err, &rejected) || !strings.Contains(err.Error(), "want a finite number") {
			t.Fatalf("value %g / 0: %v, want it rejected", v, err)
		}
	}
}

type discard struct{}

func (discard) Emit(*graph.Record) {}
