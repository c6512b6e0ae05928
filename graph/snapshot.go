package graph

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// snapshotMagic starts every encoded subtask snapshot; the last byte is the
// format version.
const snapshotMagic = "CRNS\x01"

// SubtaskSnapshot is the decoded state of one subtask in a checkpoint.
type SubtaskSnapshot struct {
	// Operator is what the operator's SnapshotState returned.
	Operator []byte
	// Watermark is the subtask's event-time watermark (invariant I10).
	Watermark int64
	// Groups are the non-empty key groups, in increasing order.
	Groups []KeyGroupSnapshot
}

// KeyGroupSnapshot is the keyed state and timers of one key group.
type KeyGroupSnapshot struct {
	KeyGroup int
	Tables   []TableSnapshot // in registration order
	Timers   []Timer         // in firing order
}

// TableSnapshot is one named keyed state's entries in a key group, sorted by
// key, values encoded by the state's codec.
type TableSnapshot struct {
	Name   string
	Keys   []string
	Values [][]byte
}

// FrozenState is the result of a snapshot's synchronous phase: a view of a
// subtask's state that later processing does not change. Encode runs in the
// asynchronous phase, on any goroutine.
type FrozenState struct {
	operator  []byte
	watermark int64
	groups    KeyGroupRange
	maxPar    int
	tables    []frozenTable
	timers    []Timer
}

// Encode serializes the snapshot. Its output is deterministic: equal states
// encode to equal bytes.
func (f *FrozenState) Encode() []byte {
	timersByGroup := make(map[int][]Timer)
	for _, t := range f.timers {
		kg := KeyGroup(t.Key, f.maxPar)
		timersByGroup[kg] = append(timersByGroup[kg], t)
	}
	dst := []byte(snapshotMagic)
	dst = appendBytes(dst, f.operator)
	dst = binary.AppendVarint(dst, f.watermark)

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
			if t.groupLen(i) > 0 {
				n++
			}
		}
		dst = binary.AppendUvarint(dst, uint64(n))
		for _, t := range f.tables {
			if t.groupLen(i) > 0 {
				dst = appendString(dst, t.tableName())
				dst = t.appendGroup(dst, i)
			}
		}
		timers := timersByGroup[kg]
		dst = binary.AppendUvarint(dst, uint64(len(timers)))
		for _, t := range timers {
			dst = appendString(dst, t.Key)
			dst = binary.AppendVarint(dst, t.Time)
		}
	}
	return dst
}

func (f *FrozenState) groupHasData(i int, timers map[int][]Timer) bool {
	if len(timers[f.groups.Start+i]) > 0 {
		return true
	}
	for _, t := range f.tables {
		if t.groupLen(i) > 0 {
			return true
		}
	}
	return false
}

// ErrCorruptSnapshot is wrapped by every error from DecodeSubtaskSnapshot.
var ErrCorruptSnapshot = errors.New("corrupt subtask snapshot")

// DecodeSubtaskSnapshot decodes what FrozenState.Encode wrote, keeping only
// the key groups in keep (a restore at another parallelism reads each old
// subtask's snapshot and keeps its own groups). It never panics on bad input.
func DecodeSubtaskSnapshot(data []byte, keep KeyGroupRange) (*SubtaskSnapshot, error) {
	d := decoder{buf: data}
	if string(d.take(len(snapshotMagic))) != snapshotMagic {
		return nil, fmt.Errorf("%w: bad header", ErrCorruptSnapshot)
	}
	s := &SubtaskSnapshot{Operator: slices.Clone(d.bytes())}
	s.Watermark = d.varint()
	groups := d.count()
	for range groups {
		g := KeyGroupSnapshot{KeyGroup: int(d.uvarint())}
		tables := d.count()
		for range tables {
			t := TableSnapshot{Name: d.string()}
			n := d.count()
			for range n {
				t.Keys = append(t.Keys, d.string())
				t.Values = append(t.Values, slices.Clone(d.bytes()))
			}
			g.Tables = append(g.Tables, t)
		}
		timers := d.count()
		for range timers {
			g.Timers = append(g.Timers, Timer{Key: d.string(), Time: d.varint()})
		}
		if d.err == nil && keep.Contains(g.KeyGroup) {
			s.Groups = append(s.Groups, g)
		}
	}
	if d.err == nil && len(d.buf) > 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.buf))
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptSnapshot, d.err)
	}
	return s, nil
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
func (d *decoder) count() int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.buf)) {
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
