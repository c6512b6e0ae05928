package graph

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// TestWindowsEncodeSmall: a key's window of one record, the commonest
// state of a window operator, takes at most 25 bytes; windows of many
// records, of a join's two sides, fired, with -0 and NaN among their
// values, decode to exactly what was encoded, also by the operator's
// codec, which decodes one list after another into the same array.
func TestWindowsEncodeSmall(t *testing.T) {
	one := []windowAcc{{start: 1_764_460_800_000, end: 1_764_460_860_000}}
	one[0].add(&Record{Time: 1_764_460_812_345, Value: 21.5})
	enc := windowsCodec{}.Append(nil, one)
	if len(enc) > 25 {
		t.Errorf("one window of one record takes %d bytes, want at most 25", len(enc))
	}
	reusing := &reusingWindowsCodec{}
	roundTrip(t, reusing, one)

	rng := rand.New(rand.NewPCG(1, 2))
	values := []float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(1), -3.25, 7, 1e300}
	for range 2000 {
		ws := make([]windowAcc, rng.IntN(4))
		for i := range ws {
			start := rng.Int64N(1<<42) - 1<<41
			w := windowAcc{side: rng.Int64N(2), start: start, end: start + 1 + rng.Int64N(1<<20), fired: rng.IntN(2) == 0}
			for range 1 + rng.IntN(4) {
				w.add(&Record{Time: w.start + rng.Int64N(w.end-w.start), Value: values[rng.IntN(len(values))]})
			}
			ws[i] = w
		}
		roundTrip(t, reusing, ws)
	}
}

func roundTrip(t *testing.T, reusing *reusingWindowsCodec, ws []windowAcc) {
	t.Helper()
	enc := windowsCodec{}.Append(nil, ws)
	for _, c := range []Codec[[]windowAcc]{windowsCodec{}, reusing} {
		got, err := c.Decode(enc)
		if err != nil {
			t.Fatalf("%T: %+v: %v", c, ws, err)
		}
		if len(ws) == 0 && len(got) == 0 {
			continue
		}
		if !sameWindows(got, ws) {
			t.Fatalf("%T decoded\n%+v\nwant\n%+v", c, got, ws)
		}
	}
}

// sameWindows compares floats bit for bit, so that NaN equals NaN and -0
// does not equal 0.
func sameWindows(a, b []windowAcc) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		for _, f := range [][2]*float64{{&x.sum, &y.sum}, {&x.min, &y.min}, {&x.max, &y.max}, {&x.first, &y.first}, {&x.last, &y.last}} {
			if !sameFloat(*f[0], *f[1]) {
				return false
			}
			*f[0], *f[1] = 0, 0
		}
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// appendWindowsV1 is format 1 as cairn wrote it before format 2.
func appendWindowsV1(dst []byte, ws []windowAcc) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ws)))
	for _, w := range ws {
		for _, v := range []int64{w.side, w.start, w.end, w.count, w.firstTime, w.lastTime} {
			dst = binary.AppendVarint(dst, v)
		}
		for _, v := range []float64{w.sum, w.min, w.max, w.first, w.last} {
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
		}
		fired := byte(0)
		if w.fired {
			fired = 1
		}
		dst = append(dst, fired)
	}
	return dst
}

// TestWindowsOfFormat1: values written in format 1, before this release,
// still decode, and damaged ones of either format are refused.
func TestWindowsOfFormat1(t *testing.T) {
	ws := []windowAcc{{side: 1, start: 0, end: 60_000, fired: true}, {start: 60_000, end: 120_000}}
	ws[0].add(&Record{Time: 5, Value: 2})
	ws[0].add(&Record{Time: 9, Value: -1})
	ws[1].add(&Record{Time: 60_001, Value: 4})
	v1 := appendWindowsV1(nil, ws)
	got, err := windowsCodec{}.Decode(v1)
	if err != nil || !sameWindows(got, ws) {
		t.Fatalf("format 1 decodes to %+v, %v; want %+v", got, err, ws)
	}
	for name, enc := range map[string][]byte{"format 1": v1, "format 2": windowsCodec{}.Append(nil, ws)} {
		for n := range len(enc) {
			if _, err := (windowsCodec{}).Decode(enc[:n]); err == nil {
				t.Errorf("%s cut to %d of %d bytes decodes", name, n, len(enc))
			}
		}
		if _, err := (windowsCodec{}).Decode(append(bytes.Clone(enc), 0)); err == nil {
			t.Errorf("%s with a trailing byte decodes", name)
		}
	}
	bad := append(bytes.Clone(windowsFormat2), 1, 0xff, 0x7f) // flags with a min source of 3
	if _, err := (windowsCodec{}).Decode(bad); err == nil {
		t.Error("unknown window flags decode")
	}
	// A count of more windows than the bytes can hold is refused before
	// the decoder allocates for them.
	for _, enc := range [][]byte{append(append(bytes.Clone(windowsFormat2), 2), make([]byte, 2*minWindowBytes-1)...),
		append([]byte{2}, make([]byte, 2*minWindowBytesV1-1)...)} {
		if _, err := (windowsCodec{}).Decode(enc); err == nil || !strings.Contains(err.Error(), "count 2 exceeds") {
			t.Errorf("%d bytes for 2 windows: err = %v", len(enc)-1, err)
		}
	}
}

// FuzzWindowsCodec feeds arbitrary bytes to the window state decoder: it
// must not panic, and what decodes must encode (in format 2) to bytes that
// decode to the same windows.
func FuzzWindowsCodec(f *testing.F) {
	ws := []windowAcc{{start: 60_000, end: 120_000}}
	ws[0].add(&Record{Time: 60_500, Value: 3})
	f.Add(windowsCodec{}.Append(nil, ws))
	f.Add(appendWindowsV1(nil, ws))
	ws[0].add(&Record{Time: 60_100, Value: -2})
	ws[0].fired = true
	f.Add(windowsCodec{}.Append(nil, ws))
	f.Fuzz(func(t *testing.T, data []byte) {
		ws, err := windowsCodec{}.Decode(data)
		if err != nil {
			return
		}
		again, err := windowsCodec{}.Decode(windowsCodec{}.Append(nil, ws))
		if err != nil || !sameWindows(again, ws) {
			t.Fatalf("%+v re-encodes to %+v, %v", ws, again, err)
		}
	})
}
