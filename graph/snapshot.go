package graph

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/cairn-edge/cairn/wire"
)

// An encoded subtask snapshot starts with the header of magic
// snapshotMagic and version snapshotVersion (package wire). Version 2
// encodes timers as appendTimers does; version 1, still read, each as its
// key and time. Then come a flags byte (1 for an incremental snapshot,
// else 0), the operator's state (uvarint length, bytes), the watermark
// (varint), and the count of non-empty key groups, each as its key group
// (uvarint), its count of tables, each as its name (string), its entries
// (a count of key and value, each length-prefixed, sorted by key) and its
// tombstones (a count of keys, sorted), then its event-time and its
// processing-time timers.
const (
	snapshotMagic   = "CRNS"
	snapshotVersion = 2
)

// The fewest bytes an element of a snapshot takes, which bound how many a
// damaged count can make the decoder allocate.
const (
	minGroupBytes   = 4 // key group, tables, two counts of timers
	minTableBytes   = 3 // name, entries, tombstones
	minEntryBytes   = 2 // key, value
	minTimerBytes   = 3 // time, shared prefix, rest of the key
	minTimerBytesV1 = 2 // key, time
)

// SubtaskSnapshot is the decoded state of one subtask in a checkpoint.
type SubtaskSnapshot struct {
	// Incremental snapshots hold only the keyed state changed since the
	// previous snapshot of their chain, with tombstones; see MergeChain.
	Incremental bool
	// Operator is what the operator's SnapshotState returned.
	Operator []byte
	// Watermark is the subtask's event-time watermark (invariant I10).
	Watermark int64
	// Groups are the non-empty key groups, in increasing order.
	Groups []KeyGroupSnapshot
}

// KeyGroupSnapshot is the keyed state and timers of one key group.
type KeyGroupSnapshot struct {
	KeyGroup         int
	Tables           []TableSnapshot // in registration order
	Timers           []Timer         // event time, in firing order
	ProcessingTimers []Timer         // processing time, in firing order
}

// TableSnapshot is one named keyed state's entries in a key group, sorted by
// key, values encoded by the state's codec, and in an incremental snapshot
// the keys deleted since its base, sorted.
type TableSnapshot struct {
	Name    string
	Keys    []string
	Values  [][]byte
	Deleted []string
}

// FrozenState is the result of a snapshot's synchronous phase: a view of a
// subtask's state that later processing does not change. Encode runs in the
// asynchronous phase, on any goroutine.
type FrozenState struct {
	operator    [][]byte // the operator's state, in parts
	version     Version
	incremental bool
	watermark   int64
	groups      KeyGroupRange
	maxPar      int
	tables      []frozenTable
	timers      []Timer // in no order until groupTimers sorts them
	procTimers  []Timer
	grouped     sync.Once
	byGroup     [2]map[int][]Timer // event, processing: key group → its timers
}

// Version is the version of keyed state this snapshot closed: the base to
// name for an incremental snapshot on top of it.
func (f *FrozenState) Version() Version { return f.version }

// KeyedChanged reports whether keyed state was written or deleted after
// the base version the snapshot was frozen against: when it was not, the
// snapshot may encode to the same bytes as the base's, if its timers,
// watermark and operator state are the same too.
func (f *FrozenState) KeyedChanged() bool {
	for _, t := range f.tables {
		if t.changed() {
			return true
		}
	}
	return false
}

// Encode serializes the snapshot. Its output is deterministic: equal states
// encode to equal bytes.
func (f *FrozenState) Encode() []byte { return bytes.Join(slices.Collect(f.Parts()), nil) }

// encodePartSize bounds the parts Parts encodes keyed state into (a key
// group's encoding may overrun it), so that a store can write a large
// snapshot while it is encoded and never hold it whole.
const encodePartSize = 256 << 10

// Parts encodes the snapshot as Encode does, yielding it in parts while it
// goes: the operator's state parts as they are, not copied, and keyed state
// in parts of about encodePartSize. A part is not changed once yielded.
// Parts may be ranged over more than once, from any goroutine.
func (f *FrozenState) Parts() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		timersByGroup, procByGroup := f.groupTimers()
		var header wire.Encoder
		header.Header(snapshotMagic, snapshotVersion)
		header.Bool(f.incremental) // the flags
		size := 0
		for _, p := range f.operator {
			size += len(p)
		}
		header.Uvarint(uint64(size))
		if !yield(header) {
			return
		}
		for _, p := range f.operator {
			if !yield(p) {
				return
			}
		}

		// A small snapshot's buffer grows as it needs; after the first
		// full part, each one starts at its size.
		var e wire.Encoder
		e.Varint(f.watermark)
		nonEmpty := 0
		for i := 0; i < f.groups.Len(); i++ {
			if f.groupHasData(i, timersByGroup) {
				nonEmpty++
			}
		}
		e.Uvarint(uint64(nonEmpty))
		for i := 0; i < f.groups.Len(); i++ {
			if !f.groupHasData(i, timersByGroup) {
				continue
			}
			kg := f.groups.Start + i
			e.Uvarint(uint64(kg))
			n := 0
			for _, t := range f.tables {
				if t.hasData(i) {
					n++
				}
			}
			e.Uvarint(uint64(n))
			for _, t := range f.tables {
				if t.hasData(i) {
					e.String(t.tableName())
					t.appendGroup(&e, i)
				}
			}
			for _, timers := range [][]Timer{timersByGroup[kg], procByGroup[kg]} {
				appendTimers(&e, timers)
			}
			if len(e) >= encodePartSize {
				if !yield(e) {
					return
				}
				e = make(wire.Encoder, 0, encodePartSize+encodePartSize/4)
			}
		}
		yield(e)
	}
}

// groupTimers returns each key group's timers, event and processing, in
// firing order. The first call sorts the frozen timers in place by key
// group and then firing order, here rather than when frozen, which would
// hold up the stream; each group's are a part of them, not a copy.
func (f *FrozenState) groupTimers() (event, processing map[int][]Timer) {
	f.grouped.Do(func() {
		for i, timers := range [][]Timer{f.timers, f.procTimers} {
			byGroup := timersOfGroups{timers: timers, groups: make([]int32, len(timers))}
			for j, t := range timers {
				byGroup.groups[j] = int32(KeyGroup(t.Key, f.maxPar))
			}
			sort.Sort(byGroup)
			f.byGroup[i] = make(map[int][]Timer)
			for j := 0; j < len(timers); {
				kg, end := byGroup.groups[j], j+1
				for end < len(timers) && byGroup.groups[end] == kg {
					end++
				}
				f.byGroup[i][int(kg)] = timers[j:end:end]
				j = end
			}
		}
		for kg := range f.byGroup[1] {
			if _, ok := f.byGroup[0][kg]; !ok {
				f.byGroup[0][kg] = nil // the group has data
			}
		}
	})
	return f.byGroup[0], f.byGroup[1]
}

// timersOfGroups sorts timers by their key groups, then in firing order.
type timersOfGroups struct {
	timers []Timer
	groups []int32 // each timer's key group
}

func (s timersOfGroups) Len() int { return len(s.timers) }
func (s timersOfGroups) Less(i, j int) bool {
	if s.groups[i] != s.groups[j] {
		return s.groups[i] < s.groups[j]
	}
	return compareTimers(s.timers[i], s.timers[j]) < 0
}
func (s timersOfGroups) Swap(i, j int) {
	s.timers[i], s.timers[j] = s.timers[j], s.timers[i]
	s.groups[i], s.groups[j] = s.groups[j], s.groups[i]
}

func (f *FrozenState) groupHasData(i int, timers map[int][]Timer) bool {
	if _, ok := timers[f.groups.Start+i]; ok {
		return true
	}
	for _, t := range f.tables {
		if t.hasData(i) {
			return true
		}
	}
	return false
}

// ErrCorruptSnapshot is wrapped by every error from DecodeSubtaskSnapshot.
var ErrCorruptSnapshot = errors.New("corrupt subtask snapshot")

// DecodeSubtaskSnapshot decodes what FrozenState.Encode wrote, keeping only
// the key groups in keep (a restore at another parallelism reads each old
// subtask's snapshot and keeps its own groups). Values alias data, which
// must not change while the snapshot is in use. It never panics on bad
// input.
func DecodeSubtaskSnapshot(data []byte, keep KeyGroupRange) (*SubtaskSnapshot, error) {
	d := wire.NewDecoder(data)
	timers := decodeTimers
	switch v := d.Header(snapshotMagic); {
	case d.Err() != nil:
	case v == 1:
		timers = decodeTimersV1
	case v != snapshotVersion:
		d.Fail(fmt.Errorf("unknown version %d", v))
	}
	s := &SubtaskSnapshot{}
	switch flags := d.Byte(); {
	case flags > 1:
		d.Fail(fmt.Errorf("unknown flags %#x", flags))
	default:
		s.Incremental = flags == 1
	}
	s.Operator = slices.Clone(d.Bytes())
	s.Watermark = d.Varint()
	// Every loop stops at the first error: a count read before it is
	// bounded by the bytes left, but nested loops over bad counts would not
	// be.
	groups := d.Count(minGroupBytes)
	for i := 0; i < groups && d.Err() == nil; i++ {
		g := KeyGroupSnapshot{KeyGroup: int(d.Uvarint())}
		tables := d.Count(minTableBytes)
		for j := 0; j < tables && d.Err() == nil; j++ {
			t := TableSnapshot{Name: string(d.Bytes())}
			n := d.Count(minEntryBytes)
			t.Keys, t.Values = make([]string, 0, n), make([][]byte, 0, n)
			for k := 0; k < n && d.Err() == nil; k++ {
				t.Keys = append(t.Keys, string(d.Bytes()))
				t.Values = append(t.Values, d.Bytes())
			}
			deleted := d.Count(1)
			for k := 0; k < deleted && d.Err() == nil; k++ {
				t.Deleted = append(t.Deleted, string(d.Bytes()))
			}
			g.Tables = append(g.Tables, t)
		}
		g.Timers = timers(&d)
		g.ProcessingTimers = timers(&d)
		if d.Err() == nil && keep.Contains(g.KeyGroup) {
			s.Groups = append(s.Groups, g)
		}
	}
	if err := d.End(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptSnapshot, err)
	}
	return s, nil
}

// MergeChain folds an incremental chain, oldest first and starting with a
// whole snapshot, into one whole snapshot: entries are upserted and
// tombstones applied in order; timers, watermark and operator state come
// from the newest.
func MergeChain(chain []*SubtaskSnapshot) (*SubtaskSnapshot, error) {
	if len(chain) == 0 || chain[0].Incremental {
		return nil, errors.New("an incremental chain must start with a whole snapshot")
	}
	if len(chain) == 1 {
		return chain[0], nil
	}
	type tableKey struct {
		group int
		name  string
	}
	state := make(map[tableKey]map[string][]byte)
	order := make(map[int][]string)    // per group, table names in first-seen order
	timers := make(map[int][2][]Timer) // event, processing
	for i, snap := range chain {
		if i > 0 && !snap.Incremental {
			return nil, fmt.Errorf("snapshot %d of the chain is whole", i)
		}
		clear(timers)
		for _, g := range snap.Groups {
			for _, t := range g.Tables {
				k := tableKey{g.KeyGroup, t.Name}
				m := state[k]
				if m == nil {
					m = make(map[string][]byte, len(t.Keys))
					state[k] = m
					order[g.KeyGroup] = append(order[g.KeyGroup], t.Name)
				}
				for j, key := range t.Keys {
					m[key] = t.Values[j]
				}
				for _, key := range t.Deleted {
					delete(m, key)
				}
			}
			timers[g.KeyGroup] = [2][]Timer{g.Timers, g.ProcessingTimers}
		}
	}
	last := chain[len(chain)-1]
	out := &SubtaskSnapshot{Operator: last.Operator, Watermark: last.Watermark}
	for _, kg := range slices.Sorted(maps.Keys(order)) {
		g := KeyGroupSnapshot{KeyGroup: kg, Timers: timers[kg][0], ProcessingTimers: timers[kg][1]}
		for _, name := range order[kg] {
			m := state[tableKey{kg, name}]
			if len(m) == 0 {
				continue
			}
			t := TableSnapshot{Name: name, Keys: slices.Sorted(maps.Keys(m))}
			for _, key := range t.Keys {
				t.Values = append(t.Values, m[key])
			}
			g.Tables = append(g.Tables, t)
		}
		out.Groups = append(out.Groups, g)
	}
	for kg, ts := range timers {
		if _, ok := order[kg]; !ok && len(ts[0])+len(ts[1]) > 0 {
			out.Groups = append(out.Groups, KeyGroupSnapshot{KeyGroup: kg, Timers: ts[0], ProcessingTimers: ts[1]})
		}
	}
	slices.SortFunc(out.Groups, func(a, b KeyGroupSnapshot) int { return a.KeyGroup - b.KeyGroup })
	return out, nil
}

// appendTimers encodes timers, sorted by time and key, as their count and,
// for each, its time less the time before it (a varint) and its key as the
// length of the prefix it shares with the key before it, at most
// maxSharedPrefix, and the rest. A window's timers share their time and
// most of their keys, so each takes 3 to 5 bytes instead of 13 to 16
// (version 1): timers are written whole into every snapshot, incremental
// ones too.
func appendTimers(e *wire.Encoder, timers []Timer) {
	e.Uvarint(uint64(len(timers)))
	var prev Timer
	for _, t := range timers {
		shared := 0
		for shared < min(len(prev.Key), len(t.Key), maxSharedPrefix) && prev.Key[shared] == t.Key[shared] {
			shared++
		}
		e.Varint(t.Time - prev.Time) // wraps both ways alike
		e.Uvarint(uint64(shared))
		e.String(t.Key[shared:])
		prev = t
	}
}

// maxSharedPrefix bounds the bytes a timer's key takes from the key before
// it, so that the keys a snapshot decodes to take at most about 43 times
// its size (a timer takes at least 3 bytes): without a bound, damaged bytes
// whose every key took all of the one before and added a byte would decode
// to keys whose total length grows with the square of their number.
const maxSharedPrefix = 127

// decodeTimers reads a list of timers written by appendTimers.
func decodeTimers(d *wire.Decoder) []Timer {
	n := d.Count(minTimerBytes)
	var out []Timer
	var prev Timer
	for k := 0; k < n && d.Err() == nil; k++ {
		t := Timer{Time: prev.Time + d.Varint()}
		shared := d.Uvarint()
		rest := d.Bytes()
		if d.Err() == nil && (shared > uint64(len(prev.Key)) || shared > maxSharedPrefix) {
			d.Fail(fmt.Errorf("timer key shares %d bytes of a %d-byte key", shared, len(prev.Key)))
		}
		if d.Err() != nil {
			return nil
		}
		t.Key = prev.Key[:shared] + string(rest)
		out = append(out, t)
		prev = t
	}
	return out
}

// decodeTimersV1 reads a list of timers of version 1: each its key and
// time.
func decodeTimersV1(d *wire.Decoder) []Timer {
	n := d.Count(minTimerBytesV1)
	var out []Timer
	for k := 0; k < n && d.Err() == nil; k++ {
		out = append(out, Timer{Key: string(d.Bytes()), Time: d.Varint()})
	}
	return out
}
