package localrecovery

import (
	"bytes"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
)

// FuzzDecodeRecord feeds arbitrary bytes to the decoder of the store's
// records (chunks, completion records, ids). It must never panic; whatever
// decodes encodes to a record that decodes to the same, and the encoding of
// a completion record is canonical from then on. Seeds:
// testdata/fuzz/FuzzDecodeRecord.
func FuzzDecodeRecord(f *testing.F) {
	m := &checkpoint.Manifest{ID: 42, Mode: checkpoint.AtLeastOnce, Triggered: time.Second, Duration: 30 * time.Millisecond,
		Subtasks: []checkpoint.Ack{
			{Task: checkpoint.TaskID{Operator: "count", Subtask: 1}, ID: 42, State: checkpoint.StateHandle{Key: "42/count/1", Size: 10, CRC32C: 7},
				Base: []checkpoint.StateHandle{{Key: "40/count/1", Size: 99, CRC32C: 1}}, MaxParallelism: 128, Watermark: -5,
				Stats: checkpoint.SubtaskStats{Alignment: time.Millisecond, BufferedRecords: 3, Sync: 1, Async: 2, StateSize: 10}},
			{Task: checkpoint.TaskID{Operator: "mqtt", Subtask: 0}, ID: 42, State: checkpoint.StateHandle{Key: "42/mqtt/0"}, Source: true, Offset: 1 << 40},
		}}
	record, err := encodeCompletion(m)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(record)
	f.Add(append(chunkHeader("7/count/0", 3), "chunk bytes"...))
	f.Add(encodeLastID(1 << 40))
	f.Add([]byte{'M', '{'})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := decodeEntry(data)
		if err != nil {
			return
		}
		var again []byte
		switch e.kind {
		case chunkRecord:
			again = append(chunkHeader(e.key, e.index), e.data...)
		case completionRecord:
			if again, err = encodeCompletion(e.manifest); err != nil {
				t.Fatalf("a decoded manifest does not encode: %v", err)
			}
		case lastIDRecord:
			again = encodeLastID(e.id)
		default:
			t.Fatalf("decoded a record of kind %q", e.kind)
		}
		e2, err := decodeEntry(again)
		if err != nil {
			t.Fatalf("a re-encoded record does not decode: %v", err)
		}
		switch e.kind {
		case chunkRecord:
			if e2.key != e.key || e2.index != e.index || !bytes.Equal(e2.data, e.data) {
				t.Fatalf("chunk %q %d changed in a round trip", e.key, e.index)
			}
		case completionRecord:
			third, err := encodeCompletion(e2.manifest)
			if err != nil || !bytes.Equal(again, third) {
				t.Fatalf("encoding is not canonical:\n%s\n%s", again, third)
			}
			if e2.manifest.ID != e.manifest.ID || len(e2.manifest.Subtasks) != len(e.manifest.Subtasks) {
				t.Fatalf("round trip changed the manifest: %+v became %+v", e.manifest, e2.manifest)
			}
		case lastIDRecord:
			if e2.id != e.id {
				t.Fatalf("id %d became %d", e.id, e2.id)
			}
		}
	})
}
