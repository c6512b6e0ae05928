package graph

import (
	"encoding/binary"
	"errors"
	"iter"
	"math"
	"slices"
)

// stateShard holds one state table's entries for a sixteenth of a key
// group, encoded in memory (a layout of its own, never stored: snapshots
// copy keys and values out of it into their format): keyed state costs the Go heap its bytes and about eight
// more a key, rather than a map slot, a key string and a value each, and
// the collector has no pointers to follow in it.
//
// Each entry is appended to arena as
//
//	uvarint key length, key, uvarint payload length, payload
//
// where the payload is the uvarint version that wrote the entry followed by
// the codec's encoding of the value. index is a hash table with linear
// probing: a slot holds 1 + an entry's offset in arena, or 0 when empty.
// Offsets are 32 bits: put refuses an entry that would start past them.
//
// A write whose payload has the length of the one it replaces overwrites it
// in place, as does a write of the arena's last entry; any other write
// appends, and the bytes it leaves behind count as garbage until the shard
// is compacted, when they pass half the arena.
// A shard that a snapshot holds is shared: its first write copies it,
// compacted, so that the snapshot's view never changes.
type stateShard struct {
	arena   []byte
	index   []uint32 // nil when the shard is empty, else a power of two long and at most 3/4 full
	n       int      // entries
	garbage int      // bytes of arena no entry uses
	shared  bool     // arena and index are referenced by a snapshot
	ver     Version  // newest version that changed the shard
	// deleted holds tombstones, key → version of the deletion, for
	// incremental snapshots; entries the base already covers are pruned.
	deleted map[string]Version
}

// minIndex is the smallest index of a shard with entries.
const minIndex = 8

// indexFor is the index length for n entries: the smallest power of two,
// at least minIndex, that n fill at most three quarters of.
func indexFor(n int) int {
	size := minIndex
	for size/4*3 < n {
		size *= 2
	}
	return size
}

// slotOf is where a key of hash h starts probing in an index of mask+1
// slots. Keys of one shard share their hash's top bits and its remainder
// by the key groups, so the slot comes from the product's high bits,
// which mix all of h's.
func slotOf(h uint64, mask int) int {
	return int((h*0x9E3779B97F4A7C15)>>32) & mask
}

// entryAt reads the entry at off in arena, which the shard wrote, so it is
// well formed; end is the offset just past it.
func entryAt(arena []byte, off int) (key, payload []byte, end int) {
	key, p := keyAt(arena, off)
	plen, n := uvarintAt(arena, p)
	end = p + n + plen
	return key, arena[p+n : end : end], end
}

// keyAt reads the key of the entry at off; p is the offset of the
// payload's length.
func keyAt(arena []byte, off int) (key []byte, p int) {
	klen, n := uvarintAt(arena, off)
	p = off + n + klen
	return arena[off+n : p : p], p
}

// uvarintAt reads the uvarint at b[i:], one byte long for lengths below
// 128, which is most of them.
func uvarintAt(b []byte, i int) (v, n int) {
	if b[i] < 0x80 {
		return int(b[i]), 1
	}
	u, n := binary.Uvarint(b[i:])
	return int(u), n
}

// find returns the slot holding key, or else the empty slot where it
// would go. The index must not be nil.
func (sh *stateShard) find(key string, h uint64) (slot int, found bool) {
	mask := len(sh.index) - 1
	for i := slotOf(h, mask); ; i = (i + 1) & mask {
		e := sh.index[i]
		if e == 0 {
			return i, false
		}
		if k, _ := keyAt(sh.arena, int(e-1)); string(k) == key {
			return i, true
		}
	}
}

// locate is find, trying hint first: a slot that may hold key (a get's),
// or -1.
func (sh *stateShard) locate(key string, h uint64, hint int) (slot int, found bool) {
	if hint >= 0 && hint < len(sh.index) && sh.index[hint] != 0 {
		if k, _ := keyAt(sh.arena, int(sh.index[hint]-1)); string(k) == key {
			return hint, true
		}
	}
	return sh.find(key, h)
}

// get returns key's payload, which aliases the arena: it is valid until
// the next write to the shard. slot is where put or remove may find key
// again.
func (sh *stateShard) get(key string, h uint64) (payload []byte, slot int, ok bool) {
	if sh.n == 0 {
		return nil, -1, false
	}
	i, ok := sh.find(key, h)
	if !ok {
		return nil, -1, false
	}
	_, p, _ := entryAt(sh.arena, int(sh.index[i]-1))
	return p, i, true
}

// errShardFull is put's error for an entry past the 32-bit offsets.
var errShardFull = errors.New("a sixteenth of a key group holds 4 GiB of keyed state: no more fits")

// shardLimit is where an arena's offsets end; a variable for the test of
// what happens there.
var shardLimit uint64 = math.MaxUint32

// put stores payload for key, whose hash is h. hint is a slot that may
// hold key (a get's), or -1.
func (sh *stateShard) put(key string, h uint64, payload []byte, hint int) error {
	size := len(sh.index)
	if (sh.n+1)*4 > size*3 {
		size = indexFor(sh.n + 1)
	}
	if sh.shared || size != len(sh.index) {
		sh.compact(size)
		hint = -1
	}
	i, found := sh.locate(key, h, hint)
	if found {
		off := int(sh.index[i] - 1)
		_, old, end := entryAt(sh.arena, off)
		switch {
		case len(old) == len(payload):
			copy(old, payload)
			return nil
		case end == len(sh.arena):
			// The arena's last entry: rewrite it where it starts, into the
			// arena's room, so that a key written over and over alone in
			// its shard (a few busy keys) costs neither garbage nor copies.
			sh.arena = sh.arena[:off]
		case uint64(len(sh.arena)) >= shardLimit:
			return errShardFull
		default:
			sh.garbage += end - off
		}
	} else {
		if uint64(len(sh.arena)) >= shardLimit {
			return errShardFull
		}
		sh.n++
	}
	sh.index[i] = uint32(len(sh.arena)) + 1
	sh.arena = binary.AppendUvarint(sh.arena, uint64(len(key)))
	sh.arena = append(sh.arena, key...)
	sh.arena = binary.AppendUvarint(sh.arena, uint64(len(payload)))
	sh.arena = append(sh.arena, payload...)
	if sh.garbage > len(sh.arena)/2 {
		sh.compact(len(sh.index))
	}
	return nil
}

// remove deletes key's entry, whose hash is h, and reports whether there
// was one; hint is as put's. A shard left empty lets go of its arena and
// index.
func (sh *stateShard) remove(key string, h uint64, hint int) bool {
	if sh.n == 0 {
		return false
	}
	i, found := sh.locate(key, h, hint)
	if !found {
		return false
	}
	if sh.n == 1 {
		sh.arena, sh.index, sh.n, sh.garbage, sh.shared = nil, nil, 0, 0, false
		return true
	}
	if sh.shared {
		sh.compact(len(sh.index))
		i, _ = sh.find(key, h)
	}
	off := int(sh.index[i] - 1)
	_, _, end := entryAt(sh.arena, off)
	sh.garbage += end - off
	sh.n--
	// Shift the entries after the hole back over it where their probe
	// sequence allows, so that no search stops early at it.
	mask := len(sh.index) - 1
	sh.index[i] = 0
	for j := (i + 1) & mask; sh.index[j] != 0; j = (j + 1) & mask {
		k, _ := keyAt(sh.arena, int(sh.index[j]-1))
		home := slotOf(keyHash(k), mask)
		if (j-home)&mask >= (j-i)&mask { // home is not in (i, j]
			sh.index[i], sh.index[j] = sh.index[j], 0
			i = j
		}
	}
	if sh.garbage > len(sh.arena)/2 {
		sh.compact(indexFor(sh.n))
	}
	return true
}

// reserve makes room for n more entries of size bytes in all, so that
// adding them neither regrows the index nor copies the arena.
func (sh *stateShard) reserve(n, size int) {
	if n == 0 {
		return
	}
	if want := indexFor(sh.n + n); sh.shared || want > len(sh.index) {
		sh.compact(max(want, len(sh.index)))
	}
	sh.arena = slices.Grow(sh.arena, size)
}

// compact leaves the shard's entries in an arena without garbage and an
// index of size slots; the shard is no longer shared. A shard of its own
// whose index keeps its size is compacted where it is (squeeze), so that
// a few keys written over and over cost no new arenas; any other is
// copied into new ones.
func (sh *stateShard) compact(size int) {
	if !sh.shared && size == len(sh.index) {
		sh.squeeze()
		return
	}
	arena := make([]byte, 0, len(sh.arena)-sh.garbage)
	index := make([]uint32, size)
	mask := size - 1
	for _, e := range sh.index {
		if e == 0 {
			continue
		}
		k, _, end := entryAt(sh.arena, int(e-1))
		i := slotOf(keyHash(k), mask)
		for index[i] != 0 {
			i = (i + 1) & mask
		}
		index[i] = uint32(len(arena)) + 1
		arena = append(arena, sh.arena[e-1:end]...)
	}
	sh.arena, sh.index, sh.garbage, sh.shared = arena, index, 0, false
}

// squeeze moves the live entries of the arena, which is the shard's own,
// down over its garbage, in the order they are in, and points the index
// at where they go. An entry is live if the index points at it: a slot it
// already moved points below every entry left to move, so none is taken
// for another.
func (sh *stateShard) squeeze() {
	mask := len(sh.index) - 1
	to := 0
	for off := 0; off < len(sh.arena); {
		k, _, end := entryAt(sh.arena, off)
		for i := slotOf(keyHash(k), mask); sh.index[i] != 0; i = (i + 1) & mask {
			if int(sh.index[i]-1) == off {
				sh.index[i] = uint32(to) + 1
				to += copy(sh.arena[to:], sh.arena[off:end])
				break
			}
		}
		off = end
	}
	sh.arena, sh.garbage = sh.arena[:to], 0
}

// entrySize is the bytes an entry of key and a payload of payload bytes
// takes in an arena.
func entrySize(key string, payload int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(len(key))) + len(key) + binary.PutUvarint(b[:], uint64(payload)) + payload
}

// shardView is a shard's entries as a snapshot froze them.
type shardView struct {
	arena []byte
	index []uint32
	n     int // entries
}

// all yields each entry's offset in the arena and its payload, in no
// order.
func (v shardView) all() iter.Seq2[int, []byte] {
	return func(yield func(off int, payload []byte) bool) {
		for _, e := range v.index {
			if e == 0 {
				continue
			}
			if _, p, _ := entryAt(v.arena, int(e-1)); !yield(int(e-1), p) {
				return
			}
		}
	}
}

// appendVersion appends v, as a payload starts with it.
func appendVersion(dst []byte, v Version) []byte { return binary.AppendUvarint(dst, uint64(v)) }

// splitPayload returns the version and the encoded value of a payload.
func splitPayload(p []byte) (Version, []byte) {
	ver, n := binary.Uvarint(p)
	return Version(ver), p[n:]
}
