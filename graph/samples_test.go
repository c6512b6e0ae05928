package graph

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/internal/testing/sample"
)

// sampleState fills a subtask's state with every kind of value the
// snapshot format holds and freezes it whole, then changes some of it and
// freezes that incrementally.
func sampleState(t *testing.T) (whole, incremental []byte) {
	t.Helper()
	s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1, MaxParallelism: 8}, &recorder{})
	count, err := NewValueState(s.Context(), "count", Int64Codec{})
	if err != nil {
		t.Fatal(err)
	}
	mean, _ := NewValueState(s.Context(), "mean", Float64Codec{})
	raw, _ := NewValueState(s.Context(), "raw", BytesCodec{})
	windows, _ := NewValueState(s.Context(), "windows", windowsCodec{})
	for i, key := range []string{"a", "b", "device-7", "device-8", "x", strings.Repeat("k", 200)} {
		s.SetKey(key)
		count.Set(int64(i*1000) - 2500)
		if i%2 == 0 {
			mean.Set(float64(i) / 3)
			raw.Set([]byte(fmt.Sprint("raw ", key)))
		}
		if i%3 == 0 {
			windows.Set(sampleWindows(int64(i)))
		}
		if i < 4 {
			s.Context().RegisterEventTimer(1_700_000_060_000 + int64(i%2))
		} else {
			s.Context().RegisterProcessingTimer(1_700_000_000_000 - int64(i))
		}
	}
	s.SetKey("device-8")
	s.Context().RegisterEventTimer(1_700_000_120_000)
	if _, err := s.AdvanceWatermark(1_700_000_000_000, &timerOp{ctx: s.Context()}); err != nil {
		t.Fatal(err)
	}
	f := s.Freeze([][]byte{[]byte("operator "), []byte("state")}, 0, false)
	whole = f.Encode()

	s.SetKey("a")
	count.Set(math.MaxInt64)
	s.SetKey("b")
	count.Delete()
	s.SetKey("device-7")
	mean.Set(math.Copysign(0, -1))
	if _, err := s.AdvanceWatermark(1_700_000_060_000, &timerOp{ctx: s.Context()}); err != nil {
		t.Fatal(err)
	}
	incremental = s.Freeze(nil, f.Version(), true).Encode()
	return whole, incremental
}

func sampleWindows(i int64) []windowAcc {
	w := windowAcc{start: 1_700_000_000_000 + i, end: 1_700_000_060_000 + i}
	w.add(&Record{Time: w.start + 5, Value: 21.5})
	w.add(&Record{Time: w.start + 900, Value: -3.25})
	right := windowAcc{side: 1, start: w.start, end: w.end, fired: true}
	right.add(&Record{Time: w.end - 1, Value: 7})
	return []windowAcc{w, right}
}

// describeSnapshot renders a decoded snapshot with its values decoded by
// the sample's codecs.
func describeSnapshot(t *testing.T, s *SubtaskSnapshot) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "incremental %v, operator %q, watermark %d\n", s.Incremental, s.Operator, s.Watermark)
	for _, g := range s.Groups {
		fmt.Fprintf(&b, "group %d\n", g.KeyGroup)
		for _, tb := range g.Tables {
			for i, k := range tb.Keys {
				var v any
				var err error
				switch tb.Name {
				case "count":
					v, err = Int64Codec{}.Decode(tb.Values[i])
				case "mean":
					v, err = Float64Codec{}.Decode(tb.Values[i])
				case "raw":
					var r []byte
					r, err = BytesCodec{}.Decode(tb.Values[i])
					v = string(r)
				case "windows":
					var ws []windowAcc
					ws, err = windowsCodec{}.Decode(tb.Values[i])
					v = describeWindows(ws)
				}
				if err != nil {
					t.Fatalf("table %s key %q: %v", tb.Name, k, err)
				}
				fmt.Fprintf(&b, "  %s %q = %+v\n", tb.Name, k, v)
			}
			for _, k := range tb.Deleted {
				fmt.Fprintf(&b, "  %s %q deleted\n", tb.Name, k)
			}
		}
		for _, tm := range g.Timers {
			fmt.Fprintf(&b, "  event timer %q@%d\n", tm.Key, tm.Time)
		}
		for _, tm := range g.ProcessingTimers {
			fmt.Fprintf(&b, "  processing timer %q@%d\n", tm.Key, tm.Time)
		}
	}
	return b.String()
}

func describeWindows(ws []windowAcc) string {
	var parts []string
	for _, w := range ws {
		parts = append(parts, fmt.Sprintf("side %d [%d,%d) count %d sum %v min %v max %v first %v@%d last %v@%d fired %v",
			w.side, w.start, w.end, w.count, w.sum, w.min, w.max, w.first, w.firstTime, w.last, w.lastTime, w.fired))
	}
	return strings.Join(parts, "; ")
}

// TestStoredSnapshots: the snapshots a cairn wrote in format 2
// (testdata/snapshot-v2-*.bin) decode to what they held, and the state
// they hold encodes to the same bytes today.
func TestStoredSnapshots(t *testing.T) {
	whole, incremental := sampleState(t)
	for _, c := range []struct {
		name    string
		current []byte
		want    string
	}{
		{"snapshot-v2-whole.bin", whole, wantWholeSnapshot},
		{"snapshot-v2-incremental.bin", incremental, wantIncrementalSnapshot},
	} {
		stored := sample.Bytes(t, filepath.Join("testdata", c.name), func() []byte { return c.current })
		snap, err := DecodeSubtaskSnapshot(stored, KeyGroupRange{0, 8})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := describeSnapshot(t, snap); got != c.want {
			t.Errorf("%s holds\n%s\nwant\n%s", c.name, got, c.want)
		}
		if !bytes.Equal(c.current, stored) {
			t.Errorf("%s: the same state encodes to other bytes today:\n%x\nstored\n%x", c.name, c.current, stored)
		}
	}
}

// TestStoredWindows: a key's windows as a cairn wrote them in format 2
// (testdata/windows-v2.bin) decode to what they were, and encode to the
// same bytes today.
func TestStoredWindows(t *testing.T) {
	ws := slices.Concat(sampleWindows(0), sampleWindows(3))
	current := windowsCodec{}.Append(nil, ws)
	stored := sample.Bytes(t, filepath.Join("testdata", "windows-v2.bin"), func() []byte { return current })
	got, err := windowsCodec{}.Decode(stored)
	if err != nil {
		t.Fatal(err)
	}
	if !sameWindows(got, ws) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, ws)
	}
	if !bytes.Equal(current, stored) {
		t.Errorf("the same windows encode to other bytes today:\n%x\nstored\n%x", current, stored)
	}
}

// sampleRows are windows of every function, of values of every sign and
// magnitude, one of them fired.
func sampleRows() (*rowLayout, []windowAcc) {
	l := newRowLayout(everyFunction, 2)
	one := l.newWindow([2]int64{1_764_460_800_000, 1_764_460_810_000})
	for i, args := range [][]float64{{21.5, -3}, {0, 1e-300}, {-2.25, 1e300}, {0.31, 0}} {
		l.add(&one, one.start+int64(500*i), args, []uint64{testHash(uint64(i % 3))})
	}
	two := l.newWindow([2]int64{1_764_460_810_000, 1_764_460_820_000})
	two.fired = true
	l.add(&two, two.start+7, []float64{math.Copysign(0, -1), 2}, []uint64{testHash(7)})
	return l, []windowAcc{one, two}
}

// TestStoredRows: a key's windows of many aggregates as a cairn wrote
// them in format 3 (testdata/windows-v3.bin) decode to what they were,
// and encode to the same bytes today.
func TestStoredRows(t *testing.T) {
	l, ws := sampleRows()
	current := rowsCodec{l}.Append(nil, ws)
	stored := sample.Bytes(t, filepath.Join("testdata", "windows-v3.bin"), func() []byte { return current })
	if err := (rowsCodec{l}).Check(stored); err != nil {
		t.Fatal(err)
	}
	got, err := rowsCodec{l}.Decode(stored)
	if err != nil {
		t.Fatal(err)
	}
	if !sameRows(got, ws) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, ws)
	}
	if !bytes.Equal(current, stored) {
		t.Errorf("the same windows encode to other bytes today:\n%x\nstored\n%x", current, stored)
	}
}

const wantWholeSnapshot = `incremental false, operator "operator state", watermark 1700000000000
group 0
  count "b" = -1500
  event timer "b"@1700000060001
group 3
  count "a" = -2500
  mean "a" = 0
  raw "a" = raw a
  windows "a" = side 0 [1700000000000,1700000060000) count 2 sum 18.25 min -3.25 max 21.5 first 21.5@1700000000005 last -3.25@1700000000900 fired false; side 1 [1700000000000,1700000060000) count 1 sum 7 min 7 max 7 first 7@1700000059999 last 7@1700000059999 fired true
  event timer "a"@1700000060000
group 4
  count "device-7" = -500
  count "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk" = 2500
  mean "device-7" = 0.6666666666666666
  raw "device-7" = raw device-7
  event timer "device-7"@1700000060000
  processing timer "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"@1699999999995
group 5
  count "x" = 1500
  mean "x" = 1.3333333333333333
  raw "x" = raw x
  processing timer "x"@1699999999996
group 7
  count "device-8" = 500
  windows "device-8" = side 0 [1700000000003,1700000060003) count 2 sum 18.25 min -3.25 max 21.5 first 21.5@1700000000008 last -3.25@1700000000903 fired false; side 1 [1700000000003,1700000060003) count 1 sum 7 min 7 max 7 first 7@1700000060002 last 7@1700000060002 fired true
  event timer "device-8"@1700000060001
  event timer "device-8"@1700000120000
`

const wantIncrementalSnapshot = `incremental true, operator "", watermark 1700000060000
group 0
  count "b" deleted
  event timer "b"@1700000060001
group 3
  count "a" = 9223372036854775807
group 4
  mean "device-7" = -0
  processing timer "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"@1699999999995
group 5
  processing timer "x"@1699999999996
group 7
  event timer "device-8"@1700000060001
  event timer "device-8"@1700000120000
`
