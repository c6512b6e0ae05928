package localrecovery

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
)

// FuzzDecodeRecord feeds arbitrary bytes to the decoder of completion
// records (a checkpoint's manifest and acknowledgements as JSON, then a
// CRC-32C). With sealed set, the harness appends the right checksum, so
// that the fuzzer reaches the JSON decoding. It must never panic; a record
// that is too short or fails its checksum says so; whatever decodes
// re-encodes to a record that decodes to the same manifest, and encoding is
// canonical from then on. Seeds: testdata/fuzz/FuzzDecodeRecord.
func FuzzDecodeRecord(f *testing.F) {
	m := &checkpoint.Manifest{ID: 42, Mode: checkpoint.AtLeastOnce, Triggered: time.Second, Duration: 30 * time.Millisecond,
		Subtasks: []checkpoint.Ack{
			{Task: checkpoint.TaskID{Operator: "count", Subtask: 1}, ID: 42, State: checkpoint.StateHandle{Key: "42/count/1", Size: 10, CRC32C: 7},
				Base: []checkpoint.StateHandle{{Key: "40/count/1", Size: 99, CRC32C: 1}}, MaxParallelism: 128, Watermark: -5,
				Stats: checkpoint.SubtaskStats{Alignment: time.Millisecond, BufferedRecords: 3, Sync: 1, Async: 2, StateSize: 10}},
			{Task: checkpoint.TaskID{Operator: "mqtt", Subtask: 0}, ID: 42, State: checkpoint.StateHandle{Key: "42/mqtt/0"}, Source: true, Offset: 1 << 40},
		}}
	record, err := encodeRecord(m)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(record, false)
	f.Add(record[:len(record)-4], true)
	f.Add([]byte(`{"id":1,"subtasks":null}`), true)
	f.Add([]byte{1, 2, 3}, false)
	f.Fuzz(func(t *testing.T, data []byte, sealed bool) {
		if sealed {
			data = binary.BigEndian.AppendUint32(bytes.Clone(data), checkpoint.Checksum(data))
		}
		m, err := decodeRecord(data)
		if err != nil {
			msg := err.Error()
			switch {
			case len(data) < 4:
				if msg != "record too short" {
					t.Fatalf("%d bytes: %v", len(data), err)
				}
			case !sealed && checkpoint.Checksum(data[:len(data)-4]) != binary.BigEndian.Uint32(data[len(data)-4:]):
				if msg != "record checksum mismatch" {
					t.Fatalf("a record that fails its checksum: %v", err)
				}
			case !isJSONError(err):
				t.Fatalf("a sealed record fails with a non-JSON error: %v", err)
			}
			return
		}
		if m == nil {
			t.Fatal("no manifest and no error")
		}
		again, err := encodeRecord(m)
		if err != nil {
			t.Fatalf("a decoded manifest does not encode: %v", err)
		}
		m2, err := decodeRecord(again)
		if err != nil {
			t.Fatalf("an encoded record does not decode: %v", err)
		}
		third, err := encodeRecord(m2)
		if err != nil || !bytes.Equal(again, third) {
			t.Fatalf("encoding is not canonical:\n%s\n%s", again, third)
		}
		if m2.ID != m.ID || m2.Mode != m.Mode || len(m2.Subtasks) != len(m.Subtasks) || len(m2.Operators()) != len(m.Operators()) {
			t.Fatalf("round trip changed the manifest: %+v became %+v", m, m2)
		}
		for _, a := range m2.Subtasks {
			if m2.Subtask(a.Task) == nil && isSorted(m2.Subtasks) {
				t.Fatalf("subtask %v not found in a sorted manifest", a.Task)
			}
		}
	})
}

// isJSONError reports whether err is encoding/json's account of bad JSON.
func isJSONError(err error) bool {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return errors.As(err, &syntax) || errors.As(err, &typ) || strings.HasPrefix(err.Error(), "json: ")
}

func isSorted(acks []checkpoint.Ack) bool {
	for i := 1; i < len(acks); i++ {
		if acks[i-1].Task.Compare(acks[i].Task) >= 0 {
			return false
		}
	}
	return true
}
