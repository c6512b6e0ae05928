package mqttio

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/ingest"
)

// FuzzDecode feeds arbitrary topics and payloads to the decoder. It must
// never panic; a failure is a *DecodeError with a reason (it becomes a dead
// letter); a JSON payload is refused as malformed exactly when the standard
// library's decoder refuses it too; and a decoded record carries the
// payload's object, its key (from the topic level, else the payload), value
// and time as they are in the payload. Seeds:
// testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	f.Add("sensors/d1/telemetry", []byte(`{"temp":21.5,"ts":1700000000000}`))
	f.Add("sensors/d1/telemetry", []byte(`{"temp":"x"}`))
	f.Add("sensors", []byte(`{"temp":1,"ts":"2026-01-02T03:04:05.123+01:00","device":7}`))
	f.Add("a", []byte(`[`))
	d := Decoding{TopicFields: map[int]string{1: "device"}, KeyField: "device", ValueField: "temp", TimeField: "ts", MaxPayload: 1 << 12}
	raw := Decoding{Format: Raw, TopicFields: map[int]string{1: "device"}, KeyField: "device"}
	received := time.UnixMilli(1_700_000_000_123)
	f.Fuzz(func(t *testing.T, topic string, payload []byte) {
		m := ingest.Message{Topic: topic, Payload: payload, Received: received}
		var r graph.Record
		err := d.decode(m, &r)

		var std map[string]any
		stdErr := stdjson.Unmarshal(payload, &std)
		isObject := stdErr == nil && std != nil
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || de.Reason == "" {
				t.Fatalf("error %v (%T) is not a DecodeError with a reason", err, err)
			}
			refused := strings.HasPrefix(de.Reason, "malformed JSON") || de.Reason == "JSON payload is not an object"
			if len(payload) <= d.MaxPayload && refused && isObject {
				t.Fatalf("refused %q, which is a JSON object: %v", payload, err)
			}
			return
		}
		if !isObject {
			t.Fatalf("decoded %q, which encoding/json refuses as an object: %v", payload, stdErr)
		}
		obj, ok := r.Payload.(map[string]any)
		if !ok {
			t.Fatalf("payload decoded as %T, want an object", r.Payload)
		}
		if level, ok := topicLevel(topic, 1); ok && (r.Key != level || obj["device"] != level) {
			t.Fatalf("key %q, payload device %v; want the topic level %q", r.Key, obj["device"], level)
		}
		if v, ok := std["temp"].(float64); !ok || v != r.Value {
			t.Fatalf("value %v, but the payload's temp is %v", r.Value, std["temp"])
		}
		switch ts := std["ts"].(type) {
		case float64:
			if float64(r.Time) != float64(int64(ts)) || ts > 1<<53 || ts < -(1<<53) {
				t.Fatalf("time %d from a payload time of %v ms: not exact", r.Time, ts)
			}
			if y := time.UnixMilli(r.Time).UTC().Year(); y < 1 || y > 9999 {
				t.Fatalf("time %v ms (year %d) accepted", ts, y)
			}
		case string:
			want, err := time.Parse(time.RFC3339Nano, ts)
			if err != nil || r.Time != want.UnixMilli() {
				t.Fatalf("time %d from %q (%v)", r.Time, ts, err)
			}
		default:
			t.Fatalf("decoded with a time field of %T", ts)
		}

		// A raw payload is kept as it came, in a copy.
		if err := raw.decode(m, &r); err != nil {
			if len(payload) <= 256<<10 {
				t.Fatalf("raw decoding failed: %v", err)
			}
			return
		}
		if b, ok := r.Payload.([]byte); !ok || !bytes.Equal(b, payload) || r.Time != received.UnixMilli() {
			t.Fatalf("raw payload %q at %d, want %q at %d", r.Payload, r.Time, payload, received.UnixMilli())
		}
		if len(payload) > 0 && &r.Payload.([]byte)[0] == &payload[0] {
			t.Fatal("a raw payload aliases the message")
		}
	})
}
