package graph

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
)

// Codec turns state values into bytes for snapshots and back.
type Codec[T any] interface {
	Append(dst []byte, v T) []byte
	Decode(src []byte) (T, error)
}

// Int64Codec encodes int64 values as varints.
type Int64Codec struct{}

func (Int64Codec) Append(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }
func (Int64Codec) Decode(src []byte) (int64, error) {
	v, n := binary.Varint(src)
	if n <= 0 || n != len(src) {
		return 0, errors.New("bad int64 state value")
	}
	return v, nil
}

// Float64Codec encodes float64 values as 8 little-endian bytes.
type Float64Codec struct{}

func (Float64Codec) Append(dst []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}
func (Float64Codec) Decode(src []byte) (float64, error) {
	if len(src) != 8 {
		return 0, errors.New("bad float64 state value")
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(src)), nil
}

// BytesCodec stores byte slices as they are.
type BytesCodec struct{}

func (BytesCodec) Append(dst []byte, v []byte) []byte { return append(dst, v...) }
func (BytesCodec) Decode(src []byte) ([]byte, error)  { return slices.Clone(src), nil }

// ValueState is one value per key, scoped to the current key of its Context.
// Snapshots of it are copy-on-write: taking one costs O(key groups), and the
// first write to a shard (a sixteenth of a key group) after a snapshot copies
// that shard. The copy is shallow: a value that refers to memory (a slice, a
// map, a pointer) must not be changed after Set, since a snapshot being
// written may hold it; Set a changed copy instead.
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
	t := &stateTable[T]{name: name, codec: codec, shards: make([]stateShard[T], ctx.groups.Len()*shardsPerGroup)}
	for kg, snap := range ctx.pending[name] {
		if err := t.load(kg-ctx.groups.Start, snap); err != nil {
			return nil, fmt.Errorf("restore keyed state %q: %w", name, err)
		}
	}
	delete(ctx.pending, name)
	ctx.tables = append(ctx.tables, t)
	return &ValueState[T]{ctx: ctx, table: t}, nil
}

// Get returns the current key's value and whether it has one.
func (s *ValueState[T]) Get() (T, bool) {
	i := s.ctx.slot()
	if i < 0 {
		var zero T
		return zero, false
	}
	e, ok := s.table.shards[i].m[s.ctx.key]
	return e.v, ok
}

// Set stores v for the current key.
func (s *ValueState[T]) Set(v T) {
	i := s.ctx.slot()
	if i < 0 {
		return
	}
	sh := &s.table.shards[i]
	sh.writable()[s.ctx.key] = entry[T]{v: v, ver: s.ctx.version}
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
	if _, ok := sh.m[s.ctx.key]; !ok {
		return
	}
	delete(sh.writable(), s.ctx.key)
	if len(sh.m) == 0 {
		sh.m = nil // a Go map keeps its largest size: an emptied shard gives it back
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

// entry is a value and the version that wrote it.
type entry[T any] struct {
	v   T
	ver Version
}

type stateShard[T any] struct {
	m      map[string]entry[T]
	shared bool    // m is referenced by a snapshot: copy before writing
	ver    Version // newest version that changed m
	// deleted holds tombstones, key → version of the deletion, for
	// incremental snapshots; entries the base already covers are pruned.
	deleted map[string]Version
}

func (sh *stateShard[T]) writable() map[string]entry[T] {
	switch {
	case sh.m == nil:
		sh.m = make(map[string]entry[T])
	case sh.shared:
		sh.m = maps.Clone(sh.m)
		sh.shared = false
	}
	return sh.m
}

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
	appendGroup(dst []byte, i int) []byte
}

type stateTable[T any] struct {
	name   string
	codec  Codec[T]
	shards []stateShard[T] // group index * shardsPerGroup + shard
}

func (t *stateTable[T]) tableName() string { return t.name }

func (t *stateTable[T]) freeze(base Version, incremental bool) frozenTable {
	f := &frozenStateTable[T]{name: t.name, codec: t.codec, base: base, incremental: incremental,
		maps: make([]map[string]entry[T], len(t.shards))}
	for i := range t.shards {
		sh := &t.shards[i]
		for k, v := range sh.deleted {
			if v <= base {
				delete(sh.deleted, k)
			}
		}
		if len(sh.deleted) == 0 {
			sh.deleted = nil
		}
		if incremental && sh.ver <= base {
			continue // unchanged since the base
		}
		sh.shared = sh.m != nil
		f.maps[i] = sh.m
		if incremental && len(sh.deleted) > 0 {
			if f.deleted == nil {
				f.deleted = make([][]string, len(t.shards))
			}
			f.deleted[i] = slices.Collect(maps.Keys(sh.deleted))
		}
	}
	return f
}

func (t *stateTable[T]) load(i int, snap *TableSnapshot) error {
	for j, k := range snap.Keys {
		v, err := t.codec.Decode(snap.Values[j])
		if err != nil {
			return fmt.Errorf("key %q: %w", k, err)
		}
		t.shards[i*shardsPerGroup+shardOf(k)].writable()[k] = entry[T]{v: v}
	}
	return nil
}

type frozenStateTable[T any] struct {
	name        string
	codec       Codec[T]
	base        Version
	incremental bool
	maps        []map[string]entry[T] // per shard; nil when empty or unchanged
	deleted     [][]string            // per shard, incremental only
}

func (f *frozenStateTable[T]) tableName() string { return f.name }

func (f *frozenStateTable[T]) hasData(i int) bool {
	for s := i * shardsPerGroup; s < (i+1)*shardsPerGroup; s++ {
		if f.deleted != nil && len(f.deleted[s]) > 0 {
			return true
		}
		for _, e := range f.maps[s] {
			if !f.incremental || e.ver > f.base {
				return true
			}
		}
	}
	return false
}

// appendGroup writes group i's entries and then its tombstones, each sorted
// by key, so that snapshots are deterministic and stores can insert them in
// order.
func (f *frozenStateTable[T]) appendGroup(dst []byte, i int) []byte {
	var keys, deleted []string
	for s := i * shardsPerGroup; s < (i+1)*shardsPerGroup; s++ {
		for k, e := range f.maps[s] {
			if !f.incremental || e.ver > f.base {
				keys = append(keys, k)
			}
		}
		if f.deleted != nil {
			deleted = append(deleted, f.deleted[s]...)
		}
	}
	slices.Sort(keys)
	slices.Sort(deleted)
	dst = binary.AppendUvarint(dst, uint64(len(keys)))
	var val []byte
	for _, k := range keys {
		dst = appendString(dst, k)
		val = f.codec.Append(val[:0], f.maps[i*shardsPerGroup+shardOf(k)][k].v)
		dst = appendBytes(dst, val)
	}
	dst = binary.AppendUvarint(dst, uint64(len(deleted)))
	for _, k := range deleted {
		dst = appendString(dst, k)
	}
	return dst
}
