package graph

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"github.com/cairn-edge/cairn/wire"
)

// Codec turns state values into bytes for snapshots and back. Decode must
// not keep src: it is keyed state's own memory, which later writes reuse.
// Keyed state decodes only what Append wrote or what it restored and
// checked, by decoding it, or by the codec's Check if it has one
// (checkingCodec), whose Decode may then trust its input.
type Codec[T any] interface {
	Append(dst []byte, v T) []byte
	Decode(src []byte) (T, error)
}

// checkingCodec is a Codec that checks restored bytes without decoding
// them, for its Decode trusts its input (rowsCodec).
type checkingCodec interface {
	// Check reports what makes src no value Decode can read.
	Check(src []byte) error
}

// Int64Codec encodes int64 values as varints.
type Int64Codec struct{}

func (Int64Codec) Append(dst []byte, v int64) []byte {
	e := wire.Encoder(dst)
	e.Varint(v)
	return e
}
func (Int64Codec) Decode(src []byte) (int64, error) {
	d := wire.NewDecoder(src)
	v := d.Varint()
	if err := d.End(); err != nil {
		return 0, fmt.Errorf("bad int64 state value: %w", err)
	}
	return v, nil
}

// Float64Codec encodes float64 values as 8 little-endian bytes.
type Float64Codec struct{}

func (Float64Codec) Append(dst []byte, v float64) []byte {
	e := wire.Encoder(dst)
	e.Float64(v)
	return e
}
func (Float64Codec) Decode(src []byte) (float64, error) {
	d := wire.NewDecoder(src)
	v := d.Float64()
	if err := d.End(); err != nil {
		return 0, fmt.Errorf("bad float64 state value: %w", err)
	}
	return v, nil
}

// BytesCodec stores byte slices as they are.
type BytesCodec struct{}

func (BytesCodec) Append(dst []byte, v []byte) []byte { return append(dst, v...) }
func (BytesCodec) Decode(src []byte) ([]byte, error)  { return slices.Clone(src), nil }

// ValueState is one value per key, scoped to the current key of its Context.
// It keeps values encoded by its Codec (see stateShard), so Get returns a
// value of its own: changing it changes nothing stored until Set.
// Snapshots of it are copy-on-write: taking one costs O(key groups), and the
// first write to a shard (a sixteenth of a key group) after a snapshot copies
// that shard's encoded entries.
type ValueState[T any] struct {
	ctx   *Context
	table *stateTable[T]
}

// NewValueState registers keyed state name with ctx. Call it from Open; if the
// subtask is restoring, the state comes back with the values snapshotted
// under the same name.
func NewValueState[T any](ctx *Context, name string, codec Codec[T]) (*ValueState[T], error) {
	for _, t := range ctx.tables {
		if t.tableName() == name {
			return nil, fmt.Errorf("keyed state %q registered twice", name)
		}
	}
	t := &stateTable[T]{name: name, codec: codec, shards: make([]stateShard, ctx.groups.Len()*shardsPerGroup)}
	for kg, snap := range ctx.pending[name] {
		if err := t.load(kg-ctx.groups.Start, snap); err != nil {
			return nil, fmt.Errorf("restore keyed state %q: %w", name, err)
		}
	}
	delete(ctx.pending, name)
	ctx.tables = append(ctx.tables, t)
	return &ValueState[T]{ctx: ctx, table: t}, nil
}

// Get returns the current key's value and whether it has one. A value the
// codec cannot decode (a codec whose Decode refuses what its Append wrote)
// fails the job, as misuse of keyed state does, and reads as none.
func (s *ValueState[T]) Get() (T, bool) {
	var zero T
	i := s.ctx.slot()
	if i < 0 {
		return zero, false
	}
	p, slot, ok := s.table.shards[i].get(s.ctx.key, s.ctx.keyHash)
	s.table.hint = slot
	if !ok {
		return zero, false
	}
	_, enc := splitPayload(p)
	v, err := s.table.codec.Decode(enc)
	if err != nil {
		s.ctx.fail(fmt.Errorf("keyed state %q of key %q: %w", s.table.name, s.ctx.key, err))
		return zero, false
	}
	return v, true
}

// Set stores v for the current key. A shard that cannot hold it (see
// stateShard) fails the job, as misuse of keyed state does.
func (s *ValueState[T]) Set(v T) {
	i := s.ctx.slot()
	if i < 0 {
		return
	}
	t := s.table
	t.scratch = t.codec.Append(appendVersion(t.scratch[:0], s.ctx.version), v)
	sh := &t.shards[i]
	if err := sh.put(s.ctx.key, s.ctx.keyHash, t.scratch, t.hint); err != nil {
		s.ctx.fail(fmt.Errorf("keyed state %q of key %q: %w", t.name, s.ctx.key, err))
		return
	}
	sh.ver = s.ctx.version
	if sh.deleted != nil {
		delete(sh.deleted, s.ctx.key)
	}
}

// Delete removes the current key's value.
func (s *ValueState[T]) Delete() {
	i := s.ctx.slot()
	if i < 0 {
		return
	}
	sh := &s.table.shards[i]
	if !sh.remove(s.ctx.key, s.ctx.keyHash, s.table.hint) {
		return
	}
	sh.ver = s.ctx.version
	if sh.deleted == nil {
		sh.deleted = make(map[string]Version)
	}
	sh.deleted[s.ctx.key] = s.ctx.version
}

// Version numbers the states of a subtask's keyed state: every snapshot
// closes one version, and writes after it belong to the next. An
// incremental snapshot holds what changed after a base version.
type Version uint64

// shardsPerGroup splits each key group's entries, so that copy-on-write
// after a snapshot copies a sixteenth of a group at a time.
const shardsPerGroup = 16

// keyedTable is a ValueState's storage with its value type erased.
type keyedTable interface {
	tableName() string
	// freeze is the synchronous phase of a snapshot: it returns a view that
	// later writes do not change. With incremental set, the view holds only
	// entries written after version base, plus tombstones.
	freeze(base Version, incremental bool) frozenTable
}

// frozenTable is a point-in-time view of a keyedTable, safe to read from
// another goroutine.
type frozenTable interface {
	tableName() string
	// hasData reports whether group i has entries or tombstones to write.
	hasData(i int) bool
	// changed reports whether anything was written or deleted after the
	// base version.
	changed() bool
	appendGroup(e *wire.Encoder, i int)
}

type stateTable[T any] struct {
	name    string
	codec   Codec[T]
	shards  []stateShard // group index * shardsPerGroup + shard
	scratch []byte       // the payload being written
	hint    int          // the slot of the last Get's key, for a Set or Delete of it
}

func (t *stateTable[T]) tableName() string { return t.name }

func (t *stateTable[T]) freeze(base Version, incremental bool) frozenTable {
	n := 0
	for i := range t.shards {
		if sh := &t.shards[i]; sh.index != nil && (!incremental || sh.ver > base) {
			n++
		}
	}
	f := &frozenStateTable{name: t.name, base: base, incremental: incremental,
		views: make([]shardView, 0, n), groupViews: make([]int32, len(t.shards)/shardsPerGroup+1)}
	for i := range t.shards {
		if i%shardsPerGroup == 0 {
			f.groupViews[i/shardsPerGroup] = int32(len(f.views))
		}
		sh := &t.shards[i]
		f.written = f.written || sh.ver > base
		if sh.deleted != nil {
			for k, v := range sh.deleted {
				if v <= base {
					delete(sh.deleted, k)
				}
			}
			if len(sh.deleted) == 0 {
				sh.deleted = nil
			}
		}
		if incremental && sh.ver <= base {
			continue // unchanged since the base
		}
		if sh.index != nil { // entries: held, so that the shard's next write copies it
			sh.shared = true
			f.views = append(f.views, shardView{arena: sh.arena, index: sh.index, n: sh.n})
		}
		if incremental && len(sh.deleted) > 0 {
			if f.deleted == nil {
				f.deleted = make([][]string, len(t.shards))
			}
			f.deleted[i] = slices.Collect(maps.Keys(sh.deleted))
		}
	}
	f.groupViews[len(f.groupViews)-1] = int32(len(f.views))
	return f
}

// load adds group i's entries from a snapshot, each checked by its
// codec's Check, or by decoding it, with version 0.
func (t *stateTable[T]) load(i int, snap *TableSnapshot) error {
	shards := t.shards[i*shardsPerGroup : (i+1)*shardsPerGroup]
	var n, size [shardsPerGroup]int
	for j, k := range snap.Keys {
		s := shardOf(k)
		n[s]++
		size[s] += entrySize(k, 1+len(snap.Values[j]))
	}
	for s := range shards {
		shards[s].reserve(n[s], size[s])
	}
	check := func(v []byte) error { _, err := t.codec.Decode(v); return err }
	if c, ok := t.codec.(checkingCodec); ok {
		check = c.Check
	}
	for j, k := range snap.Keys {
		if err := check(snap.Values[j]); err != nil {
			return fmt.Errorf("key %q: %w", k, err)
		}
		h := keyHash(k)
		t.scratch = append(append(t.scratch[:0], 0), snap.Values[j]...) // version 0
		if err := shards[h>>60].put(k, h, t.scratch, -1); err != nil {
			return fmt.Errorf("key %q: %w", k, err)
		}
	}
	return nil
}

// frozenStateTable is a stateTable's shards as Freeze left them; their
// values stay encoded, as the snapshot stores them.
type frozenStateTable struct {
	name        string
	base        Version
	incremental bool
	written     bool // a shard changed after the base
	// views are the shards to write, in order, with entries and changed
	// since the base if incremental; group i's are
	// views[groupViews[i]:groupViews[i+1]].
	views      []shardView
	groupViews []int32
	deleted    [][]string // per shard, incremental only
}

// groupViewsOf returns group i's views.
func (f *frozenStateTable) groupViewsOf(i int) []shardView {
	return f.views[f.groupViews[i]:f.groupViews[i+1]]
}

func (f *frozenStateTable) tableName() string { return f.name }

func (f *frozenStateTable) changed() bool { return f.written }

func (f *frozenStateTable) hasData(i int) bool {
	if f.deleted != nil {
		for _, d := range f.deleted[i*shardsPerGroup : (i+1)*shardsPerGroup] {
			if len(d) > 0 {
				return true
			}
		}
	}
	views := f.groupViewsOf(i)
	if !f.incremental {
		return len(views) > 0
	}
	for _, v := range views {
		for _, p := range v.all() {
			if ver, _ := splitPayload(p); ver > f.base {
				return true
			}
		}
	}
	return false
}

// appendGroup writes group i's entries and then its tombstones, each sorted
// by key, so that snapshots are deterministic and stores can insert them in
// order.
func (f *frozenStateTable) appendGroup(e *wire.Encoder, i int) {
	views := f.groupViewsOf(i)
	n := 0
	for _, v := range views {
		n += v.n
	}
	entries := make([][]byte, 0, n) // each entry's bytes in its arena
	for _, v := range views {
		for off, p := range v.all() {
			if ver, _ := splitPayload(p); !f.incremental || ver > f.base {
				_, _, end := entryAt(v.arena, off)
				entries = append(entries, v.arena[off:end])
			}
		}
	}
	var deleted []string
	if f.deleted != nil {
		for _, d := range f.deleted[i*shardsPerGroup : (i+1)*shardsPerGroup] {
			deleted = append(deleted, d...)
		}
	}
	slices.SortFunc(entries, func(a, b []byte) int {
		ka, _ := keyAt(a, 0)
		kb, _ := keyAt(b, 0)
		return bytes.Compare(ka, kb)
	})
	slices.Sort(deleted)
	e.Uvarint(uint64(len(entries)))
	for _, en := range entries {
		k, p, _ := entryAt(en, 0)
		_, v := splitPayload(p)
		e.Bytes(k)
		e.Bytes(v)
	}
	e.Uvarint(uint64(len(deleted)))
	for _, k := range deleted {
		e.String(k)
	}
}
