package graph

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/cairn-edge/cairn/wire"
)

// FuzzDecodeSubtaskSnapshot feeds arbitrary bytes to the snapshot decoder.
// It must never panic; every error must wrap ErrCorruptSnapshot; and
// whatever decodes must restore into a subtask, whose next snapshot holds
// exactly the restored keyed state, timers, watermark and operator state,
// encodes to bytes that decode again, and re-encodes to the same bytes
// (encoding is canonical). Seeds: testdata/fuzz/FuzzDecodeSubtaskSnapshot.
func FuzzDecodeSubtaskSnapshot(f *testing.F) {
	s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1}, &recorder{})
	v, _ := NewValueState(s.Context(), "v", Int64Codec{})
	w, _ := NewValueState(s.Context(), "w", BytesCodec{})
	for _, k := range []string{"k", "device-7", ""} {
		s.SetKey(k)
		v.Set(7)
		w.Set([]byte(k))
		s.Context().RegisterEventTimer(9)
		s.Context().RegisterProcessingTimer(1_700_000_000_000)
	}
	f.Add(s.Freeze([][]byte{[]byte("op")}, 0, false).Encode())
	s.SetKey("k")
	w.Delete()
	f.Add(s.Freeze(nil, 1, true).Encode()) // incremental, with a tombstone
	f.Add([]byte(snapshotMagic + "\x02"))
	all := KeyGroupRange{0, DefaultMaxParallelism}
	f.Fuzz(func(t *testing.T, data []byte) {
		snap, err := DecodeSubtaskSnapshot(data, all)
		if err != nil {
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("error %v does not wrap ErrCorruptSnapshot", err)
			}
			return
		}
		// A narrower range keeps a subset of the groups, in order.
		half, err := DecodeSubtaskSnapshot(data, KeyGroupRange{0, DefaultMaxParallelism / 2})
		if err != nil {
			t.Fatalf("decodes with all groups but not with half: %v", err)
		}
		for _, g := range half.Groups {
			if g.KeyGroup >= DefaultMaxParallelism/2 {
				t.Fatalf("group %d kept outside the range", g.KeyGroup)
			}
		}
		if snap.Incremental {
			if snap, err = MergeChain([]*SubtaskSnapshot{{}, snap}); err != nil {
				t.Fatalf("merging onto an empty base: %v", err)
			}
		}
		encoded, content := restoreAndEncode(t, snap)
		if want := snapshotContent(snap); !content.equal(want) {
			t.Fatalf("restored state differs from the snapshot:\n got %+v\nwant %+v", content, want)
		}
		again, err := DecodeSubtaskSnapshot(encoded, all)
		if err != nil {
			t.Fatalf("an encoded snapshot does not decode: %v", err)
		}
		reencoded, content2 := restoreAndEncode(t, again)
		if !bytes.Equal(encoded, reencoded) {
			t.Fatalf("encoding is not canonical:\n%x\n%x", encoded, reencoded)
		}
		if !content.equal(content2) {
			t.Fatalf("a second round trip changed the state:\n got %+v\nwant %+v", content2, content)
		}
	})
}

// restoreAndEncode restores snap into a subtask holding every key group,
// registering each table it names as raw bytes, and takes a whole snapshot.
func restoreAndEncode(t *testing.T, snap *SubtaskSnapshot) ([]byte, stateContent) {
	t.Helper()
	s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1}, &recorder{})
	s.Restore([]*SubtaskSnapshot{snap})
	names := make(map[string]bool)
	for _, g := range snap.Groups {
		for _, tb := range g.Tables {
			names[tb.Name] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if _, err := NewValueState(s.Context(), name, BytesCodec{}); err != nil {
			t.Fatalf("restoring table %q: %v", name, err)
		}
	}
	encoded := s.Freeze([][]byte{snap.Operator}, 0, false).Encode()
	decoded, err := DecodeSubtaskSnapshot(encoded, KeyGroupRange{0, DefaultMaxParallelism})
	if err != nil {
		t.Fatalf("a fresh snapshot does not decode: %v", err)
	}
	return encoded, snapshotContent(decoded)
}

// stateContent is what a whole snapshot means once restored: per key group
// and table the value of each key, the set of timers, the watermark and the
// operator's own state.
type stateContent struct {
	tables     map[int]map[string]map[string]string
	timers     map[Timer]bool
	procTimers map[Timer]bool
	watermark  int64
	operator   []byte
}

// snapshotContent applies Restore's rules: a later table of the same name
// in the same group replaces an earlier one, a later value of a key wins,
// empty tables hold nothing, timers are a set.
func snapshotContent(s *SubtaskSnapshot) stateContent {
	c := stateContent{tables: map[int]map[string]map[string]string{}, timers: map[Timer]bool{},
		procTimers: map[Timer]bool{}, watermark: s.Watermark, operator: s.Operator}
	for _, g := range s.Groups {
		for _, tb := range g.Tables {
			if c.tables[g.KeyGroup] == nil {
				c.tables[g.KeyGroup] = map[string]map[string]string{}
			}
			m := map[string]string{}
			for i, k := range tb.Keys {
				m[k] = string(tb.Values[i])
			}
			c.tables[g.KeyGroup][tb.Name] = m
		}
		for _, tm := range g.Timers {
			c.timers[tm] = true
		}
		for _, tm := range g.ProcessingTimers {
			c.procTimers[tm] = true
		}
	}
	for kg, byName := range c.tables {
		for name, m := range byName {
			if len(m) == 0 {
				delete(byName, name)
			}
		}
		if len(byName) == 0 {
			delete(c.tables, kg)
		}
	}
	return c
}

func (c stateContent) equal(o stateContent) bool {
	sameTables := maps.EqualFunc(c.tables, o.tables, func(a, b map[string]map[string]string) bool {
		return maps.EqualFunc(a, b, func(x, y map[string]string) bool { return maps.Equal(x, y) })
	})
	return sameTables && maps.Equal(c.timers, o.timers) && maps.Equal(c.procTimers, o.procTimers) &&
		c.watermark == o.watermark && bytes.Equal(c.operator, o.operator)
}

// FuzzJoinedRecords: the check of a join's records restored never panics,
// and records it accepts are read whole, each payload decoding to its end,
// as the join reads them (eachJoined, joinedRecord.record).
func FuzzJoinedRecords(f *testing.F) {
	e := wire.Encoder{joinedRecordsFormat}
	for _, p := range []any{nil, []byte("raw"), map[string]any{"t": 21.5, "on": true, "l": []any{"x", nil}}, WindowRow{Names: []string{"n"}, Values: []float64{2}}} {
		if err := appendJoined(&e, &Record{Time: 1_700_000_000_000, Value: 1, Payload: p}); err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(e))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		var c joinedRecordsCodec
		if c.Check(src) != nil {
			return
		}
		n := 0
		for k := range eachJoined(src) {
			d := wire.NewDecoder(k.payload)
			DecodePayload(&d)
			if err := d.End(); err != nil {
				t.Fatalf("record %d, accepted, does not decode: %v", n, err)
			}
			n++
		}
		if n == 0 && len(src) > 1 {
			t.Fatalf("%d bytes accepted hold no record", len(src))
		}
	})
}
