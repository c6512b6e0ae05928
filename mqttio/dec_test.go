package mqttio

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/ingest"
)

// BenchmarkDecodeJSON measures a telemetry message's decoding into a
// record, which dominates the per-message cost of a source, side by side
// with the bare json.Unmarshal it is built on: the difference is the
// record's fields, topic levels and checks.
func BenchmarkDecodeJSON(b *testing.B) {
	d := Decoding{TopicFields: map[int]string{1: "device"}, KeyField: "device", ValueField: "temp"}
	m := ingest.Message{Topic: "sensors/d042/telemetry", Payload: []byte(`{"temp":21.5,"humidity":40,"seq":12345,"site":"north-3"}`), Received: time.Now()}
	b.Run("decoder=cairn", func(b *testing.B) {
		var r graph.Record
		b.ReportAllocs()
		for range b.N {
			if err := d.decode(m, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decoder=unmarshal-only", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var obj map[string]any
			if err := json.Unmarshal(m.Payload, &obj); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// manyFields is a payload with temp, ts and n-2 more fields, each holding
// value (a number if empty).
func manyFields(n int, value string) string {
	if value == "" {
		value = "0"
	}
	var b strings.Builder
	b.WriteString(`{"temp":1,"ts":1`)
	for i := range n - 2 {
		fmt.Fprintf(&b, `,"f%d":%s`, i, value)
	}
	return b.String() + "}"
}

func TestDecodeFields(t *testing.T) {
	d := Decoding{TopicFields: map[int]string{1: "device"}, KeyField: "device", ValueField: "temp", TimeField: "ts"}
	var r graph.Record
	err := d.decode(ingest.Message{Topic: "sensors/d7/telemetry", Payload: []byte(`{"temp":21.5,"ts":"2026-01-02T03:04:05Z"}`)}, &r)
	if err != nil {
		t.Fatal(err)
	}
	if r.Key != "d7" || r.Value != 21.5 || r.Time != time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli() {
		t.Fatalf("decoded %+v", r)
	}
	if p := r.Payload.(map[string]any); p["device"] != "d7" {
		t.Fatalf("topic level not in the payload: %v", p)
	}
	if err := d.decode(ingest.Message{Topic: "sensors/d7/telemetry", Payload: []byte(manyFields(999, ""))}, &r); err != nil {
		t.Fatalf("a payload of 999 fields (1,000 with the topic's): %v", err)
	}
	for payload, want := range map[string]string{
		`{"temp":true,"ts":1}`:    `value field "temp" is a boolean, want a number`,
		`{"temp":1,"ts":{}}`:      `time field "ts" is an object`,
		`{"temp":1,"ts":"later"}`: `time field "ts"`,
		`{"temp":1,"ts":1e16}`:    `time field "ts" is 1e+16 ms, outside the years 0001 to 9999`,
		`{"temp":1,"ts":-1e300}`:  `outside the years 0001 to 9999`,
		`{"temp":1`:               `malformed JSON`,
		`"str"`:                   `not an object`,
		manyFields(1001, ""):      `JSON payload has more than 1000 fields`,
		manyFields(600, "[1,2]"):  `JSON payload has more than 1000 fields`, // 600 fields and 1,200 items
	} {
		err := d.decode(ingest.Message{Topic: "sensors/d7/telemetry", Payload: []byte(payload)}, &r)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", payload, err, want)
		}
	}
}

// TestNumberKeys: a number key is written in plain decimal, as a device id
// is, never with fmt's exponent (1.234567e+06), whose + would make a
// sink's topic of it invalid.
func TestNumberKeys(t *testing.T) {
	d := Decoding{KeyField: "device"}
	for payload, want := range map[string]string{
		`{"device":7}`:                    "7",
		`{"device":-3.5}`:                 "-3.5",
		`{"device":999999}`:               "999999",
		`{"device":1234567}`:              "1234567",
		`{"device":1e21}`:                 "1000000000000000000000",
		`{"device":0.00001}`:              "0.00001",
		`{"device":123456789012345}`:      "123456789012345",
		`{"device":"1.234567e+06"}`:       "1.234567e+06", // a string stays as it is
		`{"device":0.1}`:                  "0.1",
		`{"device":12345678901234567890}`: "12345678901234567000", // as a float64 holds it
	} {
		var r graph.Record
		if err := d.decode(ingest.Message{Topic: "t", Payload: []byte(payload)}, &r); err != nil || r.Key != want {
			t.Errorf("%s: key %q, %v; want %q", payload, r.Key, err, want)
		}
		if err := CheckTopic("out/" + r.Key); err != nil && payload != `{"device":"1.234567e+06"}` {
			t.Errorf("%s: %v", payload, err)
		}
	}
	if got := FormatKey(true); got != "true" {
		t.Errorf("FormatKey(true) = %q", got)
	}
}
