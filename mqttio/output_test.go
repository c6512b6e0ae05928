package mqttio

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/graph"
)

// published is what a sink publishes of r in format f, with id "X".
func published(t *testing.T, f OutputFormat, r graph.Record) string {
	t.Helper()
	f.prepare()
	body, err := f.appendBody(nil, &r)
	if err != nil {
		t.Fatal(err)
	}
	return `{"id":"X"` + string(body)
}

// TestOutputVersion2 gives every kind of record in version 2: lower-case
// fields, what made it, the aggregate named, an alarm's reading as its
// value; times in each format; fields renamed and added.
func TestOutputVersion2(t *testing.T) {
	const at = 1_700_000_059_999 // 2023-11-14T22:14:19.999Z
	window := graph.Record{Key: "dev-1", Time: at, Value: 24.5, Payload: graph.WindowResult{Start: at - 59_999, End: at + 1, Count: 12}}
	row := graph.Record{Key: "dev-1", Time: at, Payload: graph.WindowRow{Start: at - 9_999, End: at + 1, Count: 10,
		Names: []string{"hum_max", "n", "temp_avg", "vib_p95"}, Values: []float64{61, 10, 21.5, 0.31}}}
	for _, c := range []struct {
		name string
		f    OutputFormat
		r    graph.Record
		want string
	}{
		{"window", OutputFormat{Operator: "per-device", Aggregate: "avg"}, window,
			`{"id":"X","v":2,"operator":"per-device","key":"dev-1","time":1700000059999,"value":24.5,"aggregate":"avg","start":1700000000000,"end":1700000060000,"count":12}`},
		{"row", OutputFormat{Operator: "stats"}, row,
			`{"id":"X","v":2,"operator":"stats","key":"dev-1","time":1700000059999,"start":1700000050000,"end":1700000060000,"count":10,"hum_max":61,"n":10,"temp_avg":21.5,"vib_p95":0.31}`},
		{"row, renamed, both times", OutputFormat{Operator: "stats", Aggregate: "avg", Time: TimeBoth, Names: map[string]string{"count": "records"}}, row,
			`{"id":"X","v":2,"operator":"stats","key":"dev-1","time":1700000059999,"time_rfc3339":"2023-11-14T22:14:19.999Z","start":1700000050000,"start_rfc3339":"2023-11-14T22:14:10.000Z","end":1700000060000,"end_rfc3339":"2023-11-14T22:14:20.000Z","records":10,"hum_max":61,"n":10,"temp_avg":21.5,"vib_p95":0.31}`},
		{"join", OutputFormat{Operator: "drift", Aggregate: "sum"},
			graph.Record{Key: "k", Time: 9, Value: -1, Payload: graph.JoinResult{Start: 0, End: 10, Left: 2, Right: 3, LeftCount: 1, RightCount: 2}},
			`{"id":"X","v":2,"operator":"drift","key":"k","time":9,"value":-1,"aggregate":"sum","start":0,"end":10,"left":2,"right":3,"left_count":1,"right_count":2}`},
		{"alarm", OutputFormat{Operator: "alarm"}, graph.Record{Key: "k", Time: 5, Value: 1, Payload: graph.Alert{Raised: true, Value: 31.2}},
			`{"id":"X","v":2,"operator":"alarm","key":"k","time":5,"value":31.2,"raised":true}`},
		{"count", OutputFormat{Operator: "counts", Aggregate: "count"}, graph.Record{Key: "k", Time: 5, Value: 3},
			`{"id":"X","v":2,"operator":"counts","key":"k","time":5,"value":3,"aggregate":"count"}`},
		{"reading", OutputFormat{Operator: "hot"}, graph.Record{Key: "k", Time: 5, Value: 3, Payload: map[string]any{"temp": 30.5, "site": "<north>"}},
			`{"id":"X","v":2,"operator":"hot","key":"k","time":5,"value":3,"payload":{"site":"\u003cnorth\u003e","temp":30.5}}`},
		{"rfc3339", OutputFormat{Time: TimeRFC3339}, window,
			`{"id":"X","v":2,"key":"dev-1","time":"2023-11-14T22:14:19.999Z","value":24.5,"start":"2023-11-14T22:13:20.000Z","end":"2023-11-14T22:14:20.000Z","count":12}`},
		{"both", OutputFormat{Time: TimeBoth}, graph.Record{Key: "k", Time: at, Value: 1},
			`{"id":"X","v":2,"key":"k","time":1700000059999,"time_rfc3339":"2023-11-14T22:14:19.999Z","value":1}`},
		{"renamed and added", OutputFormat{Operator: "per-device", Aggregate: "avg", Names: map[string]string{"key": "device", "value": "temperature"},
			Add: map[string]string{"gateway": "gw-0042", "area": "north"}}, graph.Record{Key: "dev-1", Time: 5, Value: 21},
			`{"id":"X","v":2,"operator":"per-device","device":"dev-1","time":5,"temperature":21,"aggregate":"avg","area":"north","gateway":"gw-0042"}`},
	} {
		if got := published(t, c.f, c.r); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
		if !json.Valid([]byte(published(t, c.f, c.r))) {
			t.Errorf("%s: not JSON", c.name)
		}
	}
}

// TestOutputVersion1IsAsBefore: version 1 is the encoding/json of Output,
// byte for byte: what cairn published before version 2.
func TestOutputVersion1IsAsBefore(t *testing.T) {
	for _, r := range []graph.Record{
		{Key: "dev-1", Time: 5, Value: 24.5, Payload: graph.WindowResult{Start: 1, End: 6, Count: 2}},
		{Key: "k", Value: 1, Payload: graph.Alert{Raised: true, Value: 31}},
		{Key: "k", Time: 5, Value: 3},
	} {
		want, _ := json.Marshal(Output{ID: "X", Key: r.Key, Time: r.Time, Value: r.Value, Payload: r.Payload})
		if got := published(t, OutputFormat{Version: 1}, r); got != string(want) {
			t.Errorf("version 1:\n got %s\nwant %s", got, want)
		}
	}
}

// TestOutputVersion1OfARow: version 1 gives a window's row as a window's
// result, its payload's fields then each aggregate under its name, and
// value 0.
func TestOutputVersion1OfARow(t *testing.T) {
	r := graph.Record{Key: "dev-1", Time: 9, Payload: graph.WindowRow{Start: 0, End: 10, Count: 3,
		Names: []string{"max", "p<95>"}, Values: []float64{61, 1e-9}}}
	want := `{"id":"X","key":"dev-1","time":9,"value":0,"payload":{"Start":0,"End":10,"Count":3,"max":61,"p\u003c95\u003e":1e-9}}`
	if got := published(t, OutputFormat{Version: 1}, r); got != want {
		t.Errorf("version 1:\n got %s\nwant %s", got, want)
	}
}

// TestOutputRefusesWhatJSONCannotHold: NaN and infinite values, in the
// record, its join or its row, are errUnencodable, in both versions.
func TestOutputRefusesWhatJSONCannotHold(t *testing.T) {
	for _, v := range []int{1, 2} {
		for _, r := range []graph.Record{{Value: math.NaN()}, {Value: math.Inf(1)}, {Payload: map[string]any{"x": math.NaN()}},
			{Payload: graph.WindowRow{Names: []string{"avg", "sd"}, Values: []float64{1, math.NaN()}}},
			{Payload: graph.WindowRow{Names: []string{"avg", "sd"}, Values: []float64{1}}}} {
			f := OutputFormat{Version: v}
			if _, err := f.appendBody(nil, &r); err == nil || !strings.Contains(err.Error(), "cannot be encoded as JSON") {
				t.Errorf("version %d, %+v: %v", v, r, err)
			}
		}
	}
	f := OutputFormat{}
	if _, err := f.appendBody(nil, &graph.Record{Payload: graph.JoinResult{Left: math.Inf(-1)}}); err == nil {
		t.Error("a join of -Inf was encoded")
	}
}

// TestOutputStringsAndNumbersAsEncodingJSON: strings (any bytes) and
// numbers (any finite float64) are written as encoding/json writes them.
func TestOutputStringsAndNumbersAsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = byte(rng.IntN(256))
			if rng.IntN(2) == 0 {
				b[i] = " \"\\<>&\n\t\x00\x1fa\u2028é"[rng.IntN(16)]
			}
		}
		s := string(b)
		if rng.IntN(10) == 0 {
			s = "x\u2028y\u2029"
		}
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("%q: %s, encoding/json %s", s, got, want)
		}
		v := math.Float64frombits(rng.Uint64())
		if !finite(v) {
			continue
		}
		if rng.IntN(2) == 0 {
			v = float64(rng.IntN(1e6)) / float64(1+rng.IntN(1000))
		}
		want, _ = json.Marshal(v)
		if got := appendJSONNumber(nil, v); string(got) != string(want) {
			t.Fatalf("%v: %s, encoding/json %s", v, got, want)
		}
	}
}

// TestOutputFormatChecks: what Check refuses.
func TestOutputFormatChecks(t *testing.T) {
	for _, c := range []struct {
		f    OutputFormat
		says string
	}{
		{OutputFormat{Version: 3}, "output version 3: want 1 or 2"},
		{OutputFormat{Names: map[string]string{"kee": "device"}}, `output has no field "kee" to rename`},
		{OutputFormat{Names: map[string]string{"key": "value"}}, `output fields key and value would both be "value"`},
		{OutputFormat{Names: map[string]string{"key": "v"}}, `output fields v and key would both be "v"`},
		{OutputFormat{Add: map[string]string{"time": "x"}}, `output field "time" added is the name of the field time`},
		{OutputFormat{Time: TimeBoth, Add: map[string]string{"time_rfc3339": "x"}}, `added is the name of the field time`},
		{OutputFormat{Names: map[string]string{"key": ""}}, "renamed to nothing"},
		{OutputFormat{Aggregates: []string{"n", "t_avg"}, Names: map[string]string{"count": "n"}}, `output field count renamed to "n", the name of an aggregate of the window`},
		{OutputFormat{Aggregates: []string{"n", "t_avg"}, Add: map[string]string{"t_avg": "x"}}, `output field "t_avg" added is the name of an aggregate of the window`},
	} {
		if err := c.f.Check(); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: %v, want %q", c.f, err, c.says)
		}
	}
	for _, good := range []OutputFormat{
		{Names: map[string]string{"key": "device"}, Add: map[string]string{"gateway": "g"}},
		{Version: 1, Aggregates: []string{"n"}, Add: map[string]string{"n": "x"}}, // a row is its payload
	} {
		if err := good.Check(); err != nil {
			t.Errorf("a good format %+v refused: %v", good, err)
		}
	}
}
