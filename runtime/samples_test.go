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

// sampleChannelState is sampleChannels with watermarks among the records:
// before the first, between two, two in one place, after the last, and
// on a channel with no record.
func sampleChannelState() []channelState {
	wm := func(after int, at int64, idle bool) watermarkInFlight {
		return watermarkInFlight{after: after, control: graph.Control{Kind: graph.WatermarkControl, Watermark: at, Idle: idle}}
	}
	state := recordsOnly(sampleChannels())
	state[0].watermarks = []watermarkInFlight{wm(0, 1_699_999_999_000, false), wm(2, 1_700_000_000_500, false), wm(2, 1_700_000_001_000, true)}
	state[1].watermarks = []watermarkInFlight{wm(0, -1, true)}
	state[2].watermarks = []watermarkInFlight{wm(6, 1_700_000_059_999, false)}
	return state
}

// TestStoredChannelState: channel state as a cairn wrote it with
// encoding/gob (testdata/channelstate-v1.bin, version 1), with wire and
// no watermarks (testdata/channelstate-v2.bin) and with the watermarks
// among the records (testdata/channelstate-v3.bin) decodes to what it
// held, and the same state encodes to the same bytes today.
func TestStoredChannelState(t *testing.T) {
	// gob decoded an empty list as nil.
	v1 := sampleChannels()
	v1[2][5].Payload.(map[string]any)["list"] = []any(nil)
	stored := sample.Bytes(t, filepath.Join("testdata", "channelstate-v1.bin"), nil)
	got, err := decodeChannelState(stored, len(v1))
	if err != nil {
		t.Fatal(err)
	}
	if want := recordsOnly(v1); !reflect.DeepEqual(got, want) {
		t.Errorf("version 1 decoded as\n%#v\nwant\n%#v", got, want)
	}

	v2 := recordsOnly(sampleChannels())
	v2[1].records = nil // no records: none allocated
	stored = sample.Bytes(t, filepath.Join("testdata", "channelstate-v2.bin"), nil)
	if got, err = decodeChannelState(stored, len(v2)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, v2) {
		t.Errorf("version 2 decoded as\n%#v\nwant\n%#v", got, v2)
	}

	want := sampleChannelState()
	current, err := encodeChannelState(want)
	if err != nil {
		t.Fatal(err)
	}
	stored = sample.Bytes(t, filepath.Join("testdata", "channelstate-v3.bin"), func() []byte { return current })
	if got, err = decodeChannelState(stored, len(want)); err != nil {
		t.Fatal(err)
	}
	want[1].records = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("version 3 decoded as\n%#v\nwant\n%#v", got, want)
	}
	if !bytes.Equal(current, stored) {
		t.Errorf("the same channel state encodes to other bytes today:\n%x\nstored\n%x", current, stored)
	}
}
