package graph

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"sort"
	"sync"
)

// snapshotMagic starts every encoded subtask snapshot; the last byte is the
// format version: 2 encodes timers as appendTimers does, 1 (still read)
// each as its key and time.
const (
	snapshotMagic   = "CRNS\x02"
	snapshotMagicV1 = "CRNS\x01"
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
		header := []byte(snapshotMagic)
		if f.incremental {
			header = append(header, 1)
		} else {
			header = append(header, 0)
		}
		size := 0
		for _, p := range f.operator {
			size += len(p)
		}
		if !yield(binary.AppendUvarint(header, uint64(size))) {
			return
		}
		for _, p := range f.operator {
			if !yield(p) {
				return
			}
		}

		// A small snapshot's buffer grows as it needs; after the first
		// full part, each one starts at its size.
		dst := binary.AppendVarint(nil, f.watermark)
		nonEmpty := 0
		for i := 0; i < f.groups.Len(); i++ {
			if f.groupHasData(i, timersByGroup) {
				nonEmpty++
			}
		}
		dst = binary.AppendUvarint(dst, uint64(nonEmpty))
		for i := 0; i < f.groups.Len(); i++ {
			if !f.groupHasData(i, timersByGroup) {
				continue
			}
			kg := f.groups.Start + i
			dst = binary.AppendUvarint(dst, uint64(kg))
			n := 0
			for _, t := range f.tables {
				if t.hasData(i) {
					n++
				}
			}
			dst = binary.AppendUvarint(dst, uint64(n))
			for _, t := range f.tables {
				if t.hasData(i) {
					dst = appendString(dst, t.tableName())
					dst = t.appendGroup(dst, i)
				}
			}
			for _, timers := range [][]Timer{timersByGroup[kg], procByGroup[kg]} {
				dst = appendTimers(dst, timers)
			}
			if len(dst) >= encodePartSize {
				if !yield(dst) {
					return
				}
				dst = make([]byte, 0, encodePartSize+encodePartSize/4)
			}
		}
		yield(dst)
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
	d := decoder{buf: data}
	timers := d.timers
	switch string(d.take(len(snapshotMagic))) {
	case snapshotMagic:
	case snapshotMagicV1:
		timers = d.timersV1
	default:
		return nil, fmt.Errorf("%w: bad header", ErrCorruptSnapshot)
	}
	s := &SubtaskSnapshot{}
	switch flags := d.take(1); {
	case d.err != nil:
	case flags[0] > 1:
		d.err = fmt.Errorf("unknown flags %#x", flags[0])
	default:
		s.Incremental = flags[0] == 1
	}
	s.Operator = slices.Clone(d.bytes())
	s.Watermark = d.varint()
	// Every loop stops at the first error: a count read before it is
	// bounded by the bytes left, but nested loops over bad counts would not
	// be.
	groups := d.count()
	for i := 0; i < groups && d.err == nil; i++ {
		g := KeyGroupSnapshot{KeyGroup: int(d.uvarint())}
		tables := d.count()
		for j := 0; j < tables && d.err == nil; j++ {
			t := TableSnapshot{Name: d.string()}
			n := d.count()
			t.Keys, t.Values = make([]string, 0, n), make([][]byte, 0, n)
			for k := 0; k < n && d.err == nil; k++ {
				t.Keys = append(t.Keys, d.string())
				t.Values = append(t.Values, d.bytes())
			}
			deleted := d.count()
			for k := 0; k < deleted && d.err == nil; k++ {
				t.Deleted = append(t.Deleted, d.string())
			}
			g.Tables = append(g.Tables, t)
		}
		g.Timers = timers()
		g.ProcessingTimers = timers()
		if d.err == nil && keep.Contains(g.KeyGroup) {
			s.Groups = append(s.Groups, g)
		}
	}
	if err := d.end(); err != nil {
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

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// decoder reads the snapshot encoding; after the first error every read
// returns a zero value and err keeps the cause.
type decoder struct {
	buf []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.buf) {
		d.err = errors.New("truncated")
		return nil
	}
	b := d.buf[:n]
	d.buf = d.buf[n:]
	return b
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.err = errors.New("bad varint")
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) float() float64 {
	if b := d.take(8); b != nil {
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	}
	return 0
}

// end returns the first error, or one for bytes left after the last read.
func (d *decoder) end() error {
	if d.err == nil && len(d.buf) > 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.buf))
	}
	return d.err
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.buf)
	if n <= 0 {
		d.err = errors.New("bad varint")
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

// count reads an element count, refusing counts that the remaining bytes
// cannot hold (every element takes at least one byte), so that a corrupt
// count cannot make the decoder allocate or loop without bound.
func (d *decoder) count() int { return d.countOf(1) }

// countOf reads a count of elements that take at least size bytes each,
// refusing counts that the remaining bytes cannot hold.
func (d *decoder) countOf(size int) int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.buf)/size) {
		d.err = fmt.Errorf("count %d exceeds remaining %d bytes", n, len(d.buf))
		return 0
	}
	return int(n)
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.buf)) {
		d.err = errors.New("truncated")
		return nil
	}
	return d.take(int(n))
}

func (d *decoder) string() string { return string(d.bytes()) }

// appendTimers encodes timers, sorted by time and key, as their count and,
// for each, its time less the time before it (a varint) and its key as the
// length of the prefix it shares with the key before it, at most
// maxSharedPrefix, and the rest. A window's timers share their time and
// most of their keys, so each takes 3 to 5 bytes instead of 13 to 16
// (format 1): timers are written whole into every snapshot, incremental
// ones too.
func appendTimers(dst []byte, timers []Timer) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(timers)))
	var prev Timer
	for _, t := range timers {
		shared := 0
		for shared < min(len(prev.Key), len(t.Key), maxSharedPrefix) && prev.Key[shared] == t.Key[shared] {
			shared++
		}
		dst = binary.AppendVarint(dst, t.Time-prev.Time) // wraps both ways alike
		dst = binary.AppendUvarint(dst, uint64(shared))
		dst = appendString(dst, t.Key[shared:])
		prev = t
	}
	return dst
}

// maxSharedPrefix bounds the bytes a timer's key takes from the key before
// it, so that the keys a snapshot decodes to take at most about 43 times
// its size (a timer takes at least 3 bytes): without a bound, damaged bytes
// whose every key took all of the one before and added a byte would decode
// to keys whose total length grows with the square of their number.
const maxSharedPrefix = 127

// timers reads a list of timers written by appendTimers.
func (d *decoder) timers() []Timer {
	n := d.count()
	var out []Timer
	var prev Timer
	for k := 0; k < n && d.err == nil; k++ {
		t := Timer{Time: prev.Time + d.varint()}
		shared := d.uvarint()
		rest := d.bytes()
		if d.err == nil && (shared > uint64(len(prev.Key)) || shared > maxSharedPrefix) {
			d.err = fmt.Errorf("timer key shares %d bytes of a %d-byte key", shared, len(prev.Key))
		}
		if d.err != nil {
			return nil
		}
		t.Key = prev.Key[:shared] + string(rest)
		out = append(out, t)
		prev = t
	}
	return out
}

// timersV1 reads a list of timers of format 1: each its key and time.
func (d *decoder) timersV1() []Timer {
	n := d.count()
	var out []Timer
	for k := 0; k < n && d.err == nil; k++ {
		out = append(out, Timer{Key: d.string(), Time: d.varint()})
	}
	return out
}
