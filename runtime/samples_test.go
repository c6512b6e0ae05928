package runtime

import (
	"bytes"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/internal/testing/sample"
)

// sampleChannels are records in flight of every payload type that flows
// between the built-in operators, on three input channels, one empty.
func sampleChannels() [][]graph.Record {
	return [][]graph.Record{
		{
			{Key: "dev-1", Time: 1_700_000_000_000, Value: 21.5, Origin: 1<<40 | 7, Payload: map[string]any{
				"device": "dev-1", "temp": 21.5, "ok": false, "none": nil,
				"tags": []any{"a", 1.0, nil, true, map[string]any{"deep": []any{-2.5}}},
			}},
			{},
			{Key: "raw", Time: -1, Value: -0.5, Payload: []byte("raw \x00\xff bytes")},
		},
		nil,
		{
			{Key: "dev-2", Time: 1_700_000_060_000, Value: 3, Payload: graph.WindowResult{Start: 1_700_000_000_000, End: 1_700_000_060_000, Count: 3}},
			{Key: "dev-2", Value: -1.25, Payload: graph.JoinResult{Start: -60_000, End: 0, Left: 1.5, Right: 2.75, LeftCount: 2, RightCount: 1}},
			{Key: "dev-3", Value: 1, Payload: graph.Alert{Raised: true, Value: 99.5}},
			{Key: "dev-3", Payload: graph.Alert{}},
			{Key: "dev-4", Payload: []any{1.5, "x", map[string]any{"k": "v"}}},
			{Key: "dev-5", Payload: map[string]any{"n": 1e300, "s": "ünï", "list": []any{}, "empty": map[string]any{}}},
		},
	}
}

// TestStoredChannelState: channel state as a cairn wrote it with
// encoding/gob (testdata/channelstate-v1.bin, version 1) and with wire
// (testdata/channelstate-v2.bin) decodes to the records it held, and the
// same records encode to the same bytes today.
func TestStoredChannelState(t *testing.T) {
	// gob decoded an empty list as nil.
	v1 := sampleChannels()
	v1[2][5].Payload.(map[string]any)["list"] = []any(nil)
	stored := sample.Bytes(t, filepath.Join("testdata", "channelstate-v1.bin"), nil)
	got, err := decodeChannelState(stored, len(v1))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, v1) {
		t.Errorf("version 1 decoded as\n%#v\nwant\n%#v", got, v1)
	}

	want := sampleChannels()
	current, err := encodeChannelState(want)
	if err != nil {
		t.Fatal(err)
	}
	stored = sample.Bytes(t, filepath.Join("testdata", "channelstate-v2.bin"), func() []byte { return current })
	if got, err = decodeChannelState(stored, len(want)); err != nil {
		t.Fatal(err)
	}
	want[1] = nil // no records: none allocated
	if !reflect.DeepEqual(got, want) {
		t.Errorf("version 2 decoded as\n%#v\nwant\n%#v", got, want)
	}
	if !bytes.Equal(current, stored) {
		t.Errorf("the same records encode to other bytes today:\n%x\nstored\n%x", current, stored)
	}
}
