package graph

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/axiomhq/hyperloglog"

	"github.com/cairn-edge/cairn/wire"
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

// fourFigures is the window of the four figures, of three arguments:
// avg, max, p95 and count.
var fourFigures = []NamedAggregate{{Name: "temp_avg", Func: AggAvg, Arg: 0}, {Name: "hum_max", Func: AggMax, Arg: 1},
	{Name: "vib_p95", Func: AggQuantile, Quantile: 0.95, Arg: 2}, {Name: "n", Func: AggCount}}

// everyFunction is a layout of every function, over two arguments, with
// two sketches, and a distinct count of a hashed one.
var everyFunction = []NamedAggregate{{Name: "n", Func: AggCount}, {Name: "sum", Func: AggSum}, {Name: "min", Func: AggMin, Arg: 1},
	{Name: "max", Func: AggMax}, {Name: "avg", Func: AggAvg, Arg: 1}, {Name: "first", Func: AggFirst}, {Name: "last", Func: AggLast, Arg: 1},
	{Name: "sd", Func: AggStddev}, {Name: "p50", Func: AggQuantile, Quantile: 0.5}, {Name: "p99", Func: AggQuantile, Quantile: 0.99, Arg: 1},
	{Name: "distinct", Func: AggDistinct}}

// testHash is the hash of the i-th of a test's distinct values: uniformly
// distributed, as WindowSpec.Args must give them (splitmix64's mix).
func testHash(i uint64) uint64 {
	z := i*0x9e3779b97f4a7c15 + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// randomRows are up to three windows of layout l, of records of random
// arguments: some of values far apart, whose sketches span their bins,
// and one hash, of one of eight values.
func randomRows(rng *rand.Rand, l *rowLayout, nargs int) []windowAcc {
	ws := make([]windowAcc, rng.IntN(4))
	args, hashes := make([]float64, nargs), make([]uint64, 1)
	for i := range ws {
		start := rng.Int64N(1<<42) - 1<<41
		ws[i] = l.newWindow([2]int64{start, start + 1 + rng.Int64N(1<<20)})
		ws[i].fired = rng.IntN(2) == 0
		for range 1 + rng.IntN(6) {
			for j := range args {
				args[j] = []float64{0, math.Copysign(0, -1), -3.25, 7, 1e-300, -1e300, rng.NormFloat64()}[rng.IntN(7)]
			}
			hashes[0] = testHash(rng.Uint64N(8))
			l.add(&ws[i], ws[i].start+rng.Int64N(ws[i].end-ws[i].start), args, hashes)
		}
	}
	return ws
}

// sameRows compares windows of many aggregates, floats bit for bit,
// sketches by their counts, packed or not, and distinct sketches by their
// bytes.
func sameRows(a, b []windowAcc) bool {
	sameDistinct := func(s, t *hyperloglog.Sketch) bool {
		return bytes.Equal(appendDistinct(nil, s), appendDistinct(nil, t))
	}
	sameCounts := func(s, t sketch) bool { // of copies, which unpack leaves a and b alone by
		s.unpack()
		t.unpack()
		return s.zero == t.zero && slices.Equal(s.pos, t.pos) && slices.Equal(s.neg, t.neg)
	}
	return slices.EqualFunc(a, b, func(x, y windowAcc) bool {
		return x.start == y.start && x.end == y.end && x.count == y.count && x.fired == y.fired &&
			x.firstTime == y.firstTime && x.lastTime == y.lastTime && slices.EqualFunc(x.partials, y.partials, sameFloat) &&
			slices.EqualFunc(x.sketches, y.sketches, sameCounts) && slices.EqualFunc(x.distincts, y.distincts, sameDistinct)
	})
}

// TestRowsEncodeSmall: a key's window of one record of the four figures
// takes 36 bytes; windows of every function, of values far apart and -0,
// check, and decode to exactly what was encoded, also by the operator's
// codec, which decodes one list after another into the same array, and
// encode again to the same bytes, their sketches read or not.
func TestRowsEncodeSmall(t *testing.T) {
	l := newRowLayout(fourFigures, 3)
	w := l.newWindow([2]int64{1_764_460_800_000, 1_764_460_810_000})
	l.add(&w, 1_764_460_801_234, []float64{21.5, 61, 0.31}, nil)
	if enc := (rowsCodec{l}).Append(nil, []windowAcc{w}); len(enc) != 36 {
		t.Errorf("one window of one record of the four figures takes %d bytes, want 36", len(enc))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, aggs := range [][]NamedAggregate{fourFigures, everyFunction} {
		l := newRowLayout(aggs, 3)
		reusing := &reusingRowsCodec{rowsCodec: rowsCodec{l}}
		for range 1000 {
			ws := randomRows(rng, l, 3)
			enc := rowsCodec{l}.Append(nil, ws)
			if err := (rowsCodec{l}).Check(enc); err != nil {
				t.Fatalf("%+v: %v", ws, err)
			}
			for _, c := range []Codec[[]windowAcc]{rowsCodec{l}, reusing} {
				got, err := c.Decode(enc)
				if err != nil || !sameRows(got, ws) {
					t.Fatalf("%T decoded\n%+v, %v\nwant\n%+v", c, got, err, ws)
				}
				if len(got) > 0 && rng.IntN(2) == 0 {
					got[0].sketches[0].unpack()
				}
				if again := c.Append(nil, got); !bytes.Equal(again, enc) {
					t.Fatalf("%T encodes what it decoded as\n%x\nnot\n%x", c, again, enc)
				}
			}
		}
	}
}

// TestDamagedRowsAreRefused: windows of many aggregates cut short, with a
// byte more, or holding what no window of them holds, are refused by
// Check (and Decode, which trusts its input, reads them without a panic);
// and a count of more windows than the bytes can hold is refused before
// the decoder allocates for them.
func TestDamagedRowsAreRefused(t *testing.T) {
	l := newRowLayout(everyFunction, 2)
	c := rowsCodec{l}
	ws := randomRows(rand.New(rand.NewPCG(5, 6)), l, 2)
	for len(ws) == 0 {
		ws = randomRows(rand.New(rand.NewPCG(5, 7)), l, 2)
	}
	enc := c.Append(nil, ws)
	for n := range len(enc) {
		if err := c.Check(enc[:n]); err == nil {
			t.Errorf("cut to %d of %d bytes, it checks", n, len(enc))
		}
		c.Decode(enc[:n])
	}
	if err := c.Check(append(bytes.Clone(enc), 0)); err == nil {
		t.Error("a trailing byte checks")
	}
	// window encodes one window of count records, its sketches as given.
	window := func(flags, count uint64, sketches ...[]byte) []byte {
		e := wire.Encoder(bytes.Clone(windowsFormat3))
		e.Uvarint(1)
		e.Uvarint(flags)
		e.Varint(0)
		e.Varint(10)
		e.Varint(int64(count))
		e.Varint(1) // firstTime - start
		for range l.partials {
			e.Float64(1)
		}
		for _, s := range sketches {
			e.Bytes(s)
		}
		return e
	}
	// bins is a sketch of no zeros, of positive bins and no negative ones.
	bins := func(pos ...sketchBin) []byte {
		e := wire.Encoder{0}
		appendBins(&e, pos)
		appendBins(&e, nil)
		return e
	}
	good := bins(sketchBin{3, 1}, sketchBin{9, 1})
	two := newDistinct()
	two.InsertHash(testHash(1))
	two.InsertHash(testHash(2))
	counted := appendDistinct(nil, two)
	if err := c.Check(window(rowLastTimeIsFirst, 2, good, good, counted)); err != nil {
		t.Fatalf("the undamaged window: %v", err)
	}
	dense := newDistinct()
	for i := range uint64(5000) {
		dense.InsertHash(testHash(i))
	}
	precision16 := hyperloglog.New16()
	precision16.InsertHash(testHash(1))
	for name, enc := range map[string][]byte{
		"another format":                    append([]byte{0x80, 0x00}, window(rowLastTimeIsFirst, 2, good, good, counted)[2:]...),
		"unknown flags":                     window(rowFlagsEnd|rowLastTimeIsFirst, 2, good, good, counted),
		"no records":                        window(rowLastTimeIsFirst, 0, bins(), bins(), counted),
		"a sketch of other records":         window(rowLastTimeIsFirst, 3, good, good, counted),
		"a bin of no count":                 window(rowLastTimeIsFirst, 2, good, bins(sketchBin{3, 0}, sketchBin{9, 2}), counted),
		"a bin out of the mapping":          window(rowLastTimeIsFirst, 2, good, bins(sketchBin{maxSketchIndex + 1, 2}), counted),
		"bins spanning too far":             window(rowLastTimeIsFirst, 2, good, bins(sketchBin{0, 1}, sketchBin{sketchBins, 1}), counted),
		"a gap past every index":            window(rowLastTimeIsFirst, 2, good, []byte{0, 2, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0}, counted),
		"a count past every count":          window(rowLastTimeIsFirst, 2, good, []byte{0, 2, 0, 1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0}, counted),
		"a sketch past its length":          window(rowLastTimeIsFirst, 2, good, append(bytes.Clone(good), 0), counted),
		"no distinct sketch":                window(rowLastTimeIsFirst, 2, good, good),
		"a distinct sketch cut short":       window(rowLastTimeIsFirst, 2, good, good, counted[:len(counted)-1]),
		"a distinct sketch with a byte on":  window(rowLastTimeIsFirst, 2, good, good, append(bytes.Clone(counted), 0)),
		"a dense sketch cut short":          window(rowLastTimeIsFirst, 2, good, good, appendDistinct(nil, dense)[:maxDistinctBytes/2]),
		"a distinct sketch of precision 16": window(rowLastTimeIsFirst, 2, good, good, appendDistinct(nil, precision16)),
		"a distinct sketch too long":        window(rowLastTimeIsFirst, 2, good, good, append(bytes.Clone(counted), make([]byte, maxDistinctBytes)...)),
		"a distinct sketch of garbage":      window(rowLastTimeIsFirst, 2, good, good, bytes.Repeat([]byte{0xff}, 40)),
		"a register past 64-14+1": window(rowLastTimeIsFirst, 2, good, good, func() []byte {
			b := appendDistinct(nil, dense)
			b[len(b)-1] = 64
			return b
		}()),
	} {
		if err := c.Check(enc); err == nil {
			t.Errorf("%s checks", name)
		}
		if _, err := c.Decode(enc); err == nil && strings.Contains(name, "distinct") {
			t.Errorf("%s decodes", name)
		}
	}
	huge := append(bytes.Clone(windowsFormat3), 0xff, 0xff, 0xff, 0xff, 0x0f)
	for _, read := range []func([]byte) error{c.Check, func(b []byte) error { _, err := c.Decode(b); return err }} {
		if err := read(append(huge, make([]byte, 100)...)); err == nil || !strings.Contains(err.Error(), "exceeds") {
			t.Errorf("a count of 2^32 windows in 100 bytes: err = %v", err)
		}
	}
	if err := (rowsCodec{newRowLayout(fourFigures, 3)}).Check(window(0, 2, good)); err == nil {
		t.Error("windows of the layout of no times, with the flag of them, check")
	}
}

// FuzzRowsCodec feeds arbitrary bytes to the check and the decoder of
// windows of every function: neither may panic; what checks must decode,
// every sketch read, and encode to bytes that check and decode to the
// same windows. Seeds: testdata/fuzz/FuzzRowsCodec and windows of random
// records.
func FuzzRowsCodec(f *testing.F) {
	l := newRowLayout(everyFunction, 2)
	rng := rand.New(rand.NewPCG(7, 8))
	for range 5 {
		f.Add(rowsCodec{l}.Append(nil, randomRows(rng, l, 2)))
	}
	c := rowsCodec{l}
	f.Fuzz(func(t *testing.T, data []byte) {
		c.Decode(data)
		if c.Check(data) != nil {
			return
		}
		ws, err := c.Decode(data)
		if err != nil {
			t.Fatalf("checks, but does not decode: %v", err)
		}
		for i := range ws {
			for j := range ws[i].sketches {
				ws[i].sketches[j].unpack()
			}
		}
		enc := c.Append(nil, ws)
		if err := c.Check(enc); err != nil {
			t.Fatalf("%+v encodes to bytes that do not check: %v", ws, err)
		}
		if again, err := c.Decode(enc); err != nil || !sameRows(again, ws) {
			t.Fatalf("%+v re-encodes to %+v, %v", ws, again, err)
		}
	})
}

// TestPackedAddIsAppendBins: adding values to a decoded sketch's bytes
// writes what encoding its bins with them does, whether the value's bin
// is counted already, new below, between or above the others, of either
// sign or zero, its count one byte or more; only a value whose bin would
// stretch its sign's bins beyond sketchBins reads the bins instead, and
// folds them, as a sketch not decoded does.
func TestPackedAddIsAppendBins(t *testing.T) {
	folded := 0
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 11))
		var want sketch
		got := sketch{packed: appendSketch(nil, &want), slabs: new(rowSlabs)}
		for step := range 5000 {
			v := []float64{0, 1 + float64(rng.IntN(10))/100, -1 - float64(rng.IntN(40))/10,
				rng.NormFloat64() * 100, math.Pow(10, rng.Float64()*600-300)}[rng.IntN(5)]
			bins := want.pos
			if v < 0 {
				bins = want.neg
			}
			x := quantileMapping.Index(math.Abs(v))
			folds := v != 0 && len(bins) > 0 && max(bins[len(bins)-1].index, x)-min(bins[0].index, x) >= sketchBins
			want.add(v)
			got.add(v)
			if (got.packed == nil) != folds {
				t.Fatalf("seed %d step %d: adding %v read the bins: %v; folds them: %v", seed, step, v, got.packed == nil, folds)
			}
			if got.packed == nil {
				folded++
				got = sketch{packed: appendSketch(nil, &got), slabs: new(rowSlabs)}
			}
			if w := appendSketch(nil, &want); !bytes.Equal(got.packed, w) {
				t.Fatalf("seed %d step %d: adding %v wrote %x, want %x", seed, step, v, got.packed, w)
			}
		}
	}
	if folded == 0 {
		t.Error("no value stretched a sketch's bins beyond sketchBins")
	}
}
