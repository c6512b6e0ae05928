package runtime

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/internal/testing/sample"
)

// The payload types cairn registered with encoding/gob when channel state
// was gob's (version 1); gob is the reference its reader is tested against.
func init() {
	gob.Register(map[string]any{})
	gob.Register([]any{})
	gob.Register(graph.WindowResult{})
	gob.Register(graph.JoinResult{})
	gob.Register(graph.Alert{})
}

// gobChannelState encodes channels as cairn did in version 1.
func gobChannelState(t testing.TB, channels [][]graph.Record) []byte {
	buf := bytes.NewBufferString(channelStateMagic + "\x01")
	if err := gob.NewEncoder(buf).Encode(channels); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func randomString(rng *rand.Rand) string {
	b := make([]byte, rng.IntN(3)*rng.IntN(70))
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return string(b)
}

func randomFloat(rng *rand.Rand) float64 {
	return []float64{0, math.Copysign(0, -1), 1.5, -2, 1e300, math.Inf(-1), rng.NormFloat64()}[rng.IntN(7)]
}

// randomPayload is a payload of a type that flows between the built-in
// operators, nested up to depth.
func randomPayload(rng *rand.Rand, depth int) any {
	switch rng.IntN(10 - 2*min(depth, 1)) {
	case 0:
		return nil
	case 1:
		return randomFloat(rng)
	case 2:
		return randomString(rng)
	case 3:
		return rng.IntN(2) == 0
	case 4:
		return []byte(randomString(rng))
	case 5:
		return graph.WindowResult{Start: rng.Int64() >> rng.IntN(64), End: -rng.Int64N(100), Count: rng.Int64N(3)}
	case 6:
		return graph.JoinResult{Start: rng.Int64N(9), End: rng.Int64(), Left: randomFloat(rng), Right: randomFloat(rng),
			LeftCount: rng.Int64N(2), RightCount: -rng.Int64()}
	case 7:
		return graph.Alert{Raised: rng.IntN(2) == 0, Value: randomFloat(rng)}
	case 8:
		if depth > 0 {
			m := map[string]any{}
			for range rng.IntN(5) {
				m[randomString(rng)] = randomPayload(rng, depth-1)
			}
			return m
		}
	case 9:
		if depth > 0 {
			var l []any
			for range rng.IntN(5) {
				l = append(l, randomPayload(rng, depth-1))
			}
			return l
		}
	}
	return nil
}

// randomRow is a window's row of one to four aggregates. Channel state of
// version 1 held none: it is not among randomPayload's.
func randomRow(rng *rand.Rand) graph.WindowRow {
	row := graph.WindowRow{Start: rng.Int64() >> rng.IntN(64), End: rng.Int64N(100), Count: rng.Int64N(1000)}
	for range 1 + rng.IntN(4) {
		row.Names = append(row.Names, randomString(rng))
		row.Values = append(row.Values, randomFloat(rng))
	}
	return row
}

func randomChannels(rng *rand.Rand) [][]graph.Record {
	channels := make([][]graph.Record, 1+rng.IntN(3))
	for ch := range channels {
		for range rng.IntN(6) {
			channels[ch] = append(channels[ch], graph.Record{Key: randomString(rng), Time: rng.Int64() >> rng.IntN(64),
				Value: randomFloat(rng), Origin: rng.Uint64() >> rng.IntN(64), Payload: randomPayload(rng, 4)})
		}
	}
	return channels
}

// randomChannelState is the records of randomChannels with watermarks
// among them: any number at any place, several in one place too.
func randomChannelState(rng *rand.Rand) []channelState {
	state := recordsOnly(randomChannels(rng))
	for ch := range state {
		cs := &state[ch]
		after := 0
		for range rng.IntN(4) {
			after += rng.IntN(len(cs.records) - after + 1)
			cs.watermarks = append(cs.watermarks, watermarkInFlight{after: after,
				control: graph.Control{Kind: graph.WatermarkControl, Watermark: rng.Int64() >> rng.IntN(64), Idle: rng.IntN(2) == 0}})
		}
	}
	return state
}

// recordsOnly is channel state of channels' records and no watermark, as
// versions 1 and 2 held.
func recordsOnly(channels [][]graph.Record) []channelState {
	state := make([]channelState, len(channels))
	for ch, recs := range channels {
		state[ch].records = recs
	}
	return state
}

// TestGobChannelStateReadsAsGob: channel state of version 1, as gob
// encoded it, reads as gob decoded it, whatever the records and their
// payloads, and wherever in them a type is first seen.
func TestGobChannelStateReadsAsGob(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		channels := randomChannels(rng)
		data := gobChannelState(t, channels)
		var records [][]graph.Record
		if err := gob.NewDecoder(bytes.NewReader(data[len(channelStateMagic)+1:])).Decode(&records); err != nil {
			t.Fatal(err)
		}
		want := recordsOnly(records)
		got, err := decodeChannelState(data, len(channels))
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d decoded as\n%#v\nwant, as gob decodes it,\n%#v", i, got, want)
		}
	}
}

// TestChannelStateRoundTrip: records of every payload type, windows'
// rows too, and the watermarks among them encode and decode to
// themselves; a payload of another type, or nested deeper than a JSON
// decoder makes, is refused.
func TestChannelStateRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		channels := randomChannelState(rng)
		channels[0].records = append(channels[0].records, graph.Record{Key: "row", Time: 9, Payload: randomRow(rng)})
		data, err := encodeChannelState(channels)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeChannelState(data, len(channels))
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		again, _ := encodeChannelState(got)
		if fmt.Sprint(got) != fmt.Sprint(channels) || !bytes.Equal(again, data) {
			t.Fatalf("case %d decoded as\n%v\nwant\n%v", i, got, channels)
		}
	}
	if _, err := encodeChannelState(recordsOnly([][]graph.Record{{{Payload: 7}}})); err == nil {
		t.Error("a payload of type int encoded")
	}
	var deep any
	for range graph.MaxPayloadDepth + 2 {
		deep = []any{deep}
	}
	if _, err := encodeChannelState(recordsOnly([][]graph.Record{{{Payload: deep}}})); err == nil {
		t.Error("a payload nested too deep encoded")
	}
}

// TestDamagedChannelStateIsRefused: every cut of the stored samples of
// every version, and every byte of them changed, fails to decode or
// decodes, and never panics.
func TestDamagedChannelStateIsRefused(t *testing.T) {
	for _, name := range []string{"channelstate-v1.bin", "channelstate-v2.bin", "channelstate-v3.bin"} {
		data := sample.Bytes(t, filepath.Join("testdata", name), nil)
		for n := range len(data) {
			if _, err := decodeChannelState(data[:n], 3); err == nil {
				t.Errorf("%s cut to %d of %d bytes decodes", name, n, len(data))
			}
		}
		for i := range data {
			for _, b := range []byte{0, 0x7f, 0x80, 0xff, data[i] ^ 1} {
				damaged := bytes.Clone(data)
				damaged[i] = b
				decodeChannelState(damaged, 3)
			}
		}
	}
}

// TestDamagedRowsInFlightAreRefused: channel state holding windows' rows
// cut anywhere, or counting more aggregates than its bytes hold, is
// refused, the latter before the decoder allocates for them; and a row
// of more names than values is not encoded.
func TestDamagedRowsInFlightAreRefused(t *testing.T) {
	row := graph.WindowRow{Start: 1_700_000_000_000, End: 1_700_000_010_000, Count: 10,
		Names: []string{"hum_max", "n", "temp_avg"}, Values: []float64{61, 10, 21.5}}
	channels := recordsOnly([][]graph.Record{{{Key: "dev-1", Time: 1_700_000_009_999, Payload: row}}, nil})
	data, err := encodeChannelState(channels)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeChannelState(data, 2)
	if err != nil || !reflect.DeepEqual(got[0], channels[0]) {
		t.Fatalf("decoded as %#v, %v", got, err)
	}
	for n := range len(data) {
		if _, err := decodeChannelState(data[:n], 2); err == nil {
			t.Errorf("cut to %d of %d bytes, it decodes", n, len(data))
		}
	}
	// The row's count of aggregates, before its first name, made 2^32 with
	// 100 bytes after it.
	at := bytes.Index(data, []byte("\x03\x07hum_max"))
	if at < 0 {
		t.Fatalf("no count of 3 aggregates before the first name in %x", data)
	}
	huge := append(append(bytes.Clone(data[:at]), 0xff, 0xff, 0xff, 0xff, 0x0f), make([]byte, 100)...)
	if _, err := decodeChannelState(huge, 2); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Errorf("a count of 2^32 aggregates in 100 bytes: err = %v", err)
	}
	row.Names = append(row.Names, "p95")
	if _, err := encodeChannelState(recordsOnly([][]graph.Record{{{Payload: row}}})); err == nil {
		t.Error("a row of four names and three values encoded")
	}
}

// FuzzDecodeChannelState feeds arbitrary bytes to the channel state
// decoder, seeded with every version. It must never panic, and what
// decodes must encode (in the version of today) to bytes that decode to
// channel state that encodes to the same bytes.
func FuzzDecodeChannelState(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 5 {
		channels := randomChannels(rng)
		f.Add(gobChannelState(f, channels), len(channels))
		state := randomChannelState(rng)
		data, _ := encodeChannelState(state)
		f.Add(data, len(state))
		state[0].records = append(state[0].records, graph.Record{Payload: randomRow(rng)})
		data, _ = encodeChannelState(state)
		f.Add(data, len(state))
	}
	f.Fuzz(func(t *testing.T, data []byte, channels int) {
		got, err := decodeChannelState(data, channels)
		if err != nil {
			return
		}
		once, err := encodeChannelState(got)
		if err != nil {
			t.Fatalf("decoded records do not encode: %v", err)
		}
		back, err := decodeChannelState(once, channels)
		if err != nil {
			t.Fatalf("re-encoded records do not decode: %v", err)
		}
		if twice, _ := encodeChannelState(back); !bytes.Equal(once, twice) {
			t.Fatalf("encoding is not canonical:\n%x\n%x", once, twice)
		}
	})
}
