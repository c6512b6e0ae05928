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
// Snapshots of it are copy-on-write per key group: taking one costs
// O(key groups), and the first write to a key group after a snapshot copies
// that group.
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
	t := &stateTable[T]{name: name, codec: codec, groups: make([]stateGroup[T], ctx.groups.Len())}
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
	i := s.ctx.groupIndex()
	if i < 0 {
		var zero T
		return zero, false
	}
	v, ok := s.table.groups[i].m[s.ctx.key]
	return v, ok
}

// Set stores v for the current key.
func (s *ValueState[T]) Set(v T) {
	if i := s.ctx.groupIndex(); i >= 0 {
		s.table.writable(i)[s.ctx.key] = v
	}
}

// Delete removes the current key's value.
func (s *ValueState[T]) Delete() {
	if i := s.ctx.groupIndex(); i >= 0 {
		if _, ok := s.table.groups[i].m[s.ctx.key]; ok {
			delete(s.table.writable(i), s.ctx.key)
		}
	}
}

// keyedTable is a ValueState's storage with its value type erased.
type keyedTable interface {
	tableName() string
	// freeze is the synchronous phase of a snapshot: it returns a view that
	// later writes do not change.
	freeze() frozenTable
}

// frozenTable is a point-in-time view of a keyedTable, safe to read from
// another goroutine.
type frozenTable interface {
	tableName() string
	groupLen(i int) int
	appendGroup(dst []byte, i int) []byte
}

type stateGroup[T any] struct {
	m      map[string]T
	shared bool // m is referenced by a snapshot: copy before writing
}

type stateTable[T any] struct {
	name   string
	codec  Codec[T]
	groups []stateGroup[T]
}

func (t *stateTable[T]) tableName() string { return t.name }

func (t *stateTable[T]) writable(i int) map[string]T {
	g := &t.groups[i]
	switch {
	case g.m == nil:
		g.m = make(map[string]T)
	case g.shared:
		g.m = maps.Clone(g.m)
		g.shared = false
	}
	return g.m
}

func (t *stateTable[T]) freeze() frozenTable {
	f := &frozenStateTable[T]{name: t.name, codec: t.codec, groups: make([]map[string]T, len(t.groups))}
	for i := range t.groups {
		t.groups[i].shared = t.groups[i].m != nil
		f.groups[i] = t.groups[i].m
	}
	return f
}

func (t *stateTable[T]) load(i int, snap *TableSnapshot) error {
	m := t.writable(i)
	for j, k := range snap.Keys {
		v, err := t.codec.Decode(snap.Values[j])
		if err != nil {
			return fmt.Errorf("key %q: %w", k, err)
		}
		m[k] = v
	}
	return nil
}

type frozenStateTable[T any] struct {
	name   string
	codec  Codec[T]
	groups []map[string]T
}

func (f *frozenStateTable[T]) tableName() string  { return f.name }
func (f *frozenStateTable[T]) groupLen(i int) int { return len(f.groups[i]) }

// appendGroup writes group i's entries sorted by key, so that snapshots are
// deterministic and stores can insert them in order.
func (f *frozenStateTable[T]) appendGroup(dst []byte, i int) []byte {
	m := f.groups[i]
	keys := slices.Sorted(maps.Keys(m))
	dst = binary.AppendUvarint(dst, uint64(len(keys)))
	var val []byte
	for _, k := range keys {
		dst = appendString(dst, k)
		val = f.codec.Append(val[:0], m[k])
		dst = appendBytes(dst, val)
	}
	return dst
}
