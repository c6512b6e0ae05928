package graph

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/wire"
)

// TestShardMatchesAMap runs random puts and removes, of payloads whose
// length changes or not, against a map, and checks every 25 steps that
// the shard holds exactly the map's entries, that its garbage is what its
// arena holds beyond them, and that its index is within its load. Views
// frozen along the way must still read as the map read when they were
// taken.
func TestShardMatchesAMap(t *testing.T) {
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var sh stateShard
		want := map[string][]byte{}
		type frozen struct {
			view shardView
			want map[string][]byte
		}
		var views []frozen
		keys := 1 + rng.IntN(300)
		for step := range 4000 {
			k := fmt.Sprint("key-", rng.IntN(keys))
			switch r := rng.IntN(10); {
			case r < 6:
				p := bytes.Repeat([]byte{byte(step)}, 1+rng.IntN(4))
				if err := sh.put(k, keyHash(k), p, rng.IntN(len(sh.index)+2)-1); err != nil {
					t.Fatal(err)
				}
				want[k] = p
			case r < 9:
				_, had := want[k]
				if got := sh.remove(k, keyHash(k), rng.IntN(len(sh.index)+2)-1); got != had {
					t.Fatalf("seed %d step %d: remove(%q) = %v, want %v", seed, step, k, got, had)
				}
				delete(want, k)
			default:
				views = append(views, frozen{shardView{sh.arena, sh.index, sh.n}, maps.Clone(want)})
				sh.shared = sh.n > 0
			}
			if step%25 == 0 || step == 3999 {
				checkShard(t, &sh, want, fmt.Sprintf("seed %d step %d", seed, step))
			}
		}
		for i, v := range views {
			got := map[string][]byte{}
			for off, p := range v.view.all() {
				k, _ := keyAt(v.view.arena, off)
				got[string(k)] = p
			}
			if !maps.EqualFunc(got, v.want, bytes.Equal) {
				t.Fatalf("seed %d: view %d changed after it was frozen: %d entries, want %d", seed, i, len(got), len(v.want))
			}
		}
	}
}

func checkShard(t *testing.T, sh *stateShard, want map[string][]byte, at string) {
	t.Helper()
	if sh.n != len(want) {
		t.Fatalf("%s: %d entries, want %d", at, sh.n, len(want))
	}
	if len(want) == 0 {
		if sh.arena != nil || sh.index != nil {
			t.Fatalf("%s: an empty shard holds %d bytes and an index of %d", at, len(sh.arena), len(sh.index))
		}
		return
	}
	if len(sh.index)&(len(sh.index)-1) != 0 || sh.n*4 > len(sh.index)*3 {
		t.Fatalf("%s: %d entries in an index of %d", at, sh.n, len(sh.index))
	}
	live := 0
	for k, p := range want {
		got, _, ok := sh.get(k, keyHash(k))
		if !ok || !bytes.Equal(got, p) {
			t.Fatalf("%s: get(%q) = %x, %v; want %x", at, k, got, ok, p)
		}
		var entry wire.Encoder // as the arena holds it: key and payload, each length-prefixed
		entry.String(k)
		entry.Bytes(p)
		live += len(entry)
	}
	if sh.garbage != len(sh.arena)-live || sh.garbage > len(sh.arena)/2 {
		t.Fatalf("%s: garbage %d of an arena of %d with %d live", at, sh.garbage, len(sh.arena), live)
	}
	if _, _, ok := sh.get("absent", keyHash("absent")); ok {
		t.Fatalf("%s: found a key never put", at)
	}
}

// TestShardIndexSizes: indexFor gives the smallest power of two of at
// least minIndex that n fill at most three quarters of.
func TestShardIndexSizes(t *testing.T) {
	for n := range 5000 {
		size := indexFor(n)
		if size < minIndex || size&(size-1) != 0 || n*4 > size*3 || size > minIndex && n*4 <= size/2*3 {
			t.Fatalf("indexFor(%d) = %d", n, size)
		}
	}
}

// refusingCodec writes values that it then cannot read.
type refusingCodec struct{ Int64Codec }

func (refusingCodec) Decode([]byte) (int64, error) { return 0, errors.New("cannot read this") }

// TestUndecodableStateFailsTheSubtask: a value its codec cannot decode
// reads as none and fails the subtask with the table, the key and the
// cause, rather than panicking or passing a zero value off as stored.
func TestUndecodableStateFailsTheSubtask(t *testing.T) {
	s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1}, &recorder{})
	v, err := NewValueState[int64](s.Context(), "v", refusingCodec{})
	if err != nil {
		t.Fatal(err)
	}
	s.SetKey("k")
	v.Set(7)
	if got, ok := v.Get(); ok || got != 0 {
		t.Fatalf("Get = %d, %v; want none", got, ok)
	}
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), `keyed state "v" of key "k": cannot read this`) {
		t.Fatalf("Err() = %v", err)
	}
}

// TestFullShardFailsTheSubtask: a write past the arena's 32-bit offsets
// (here lowered to 64 bytes) fails the subtask and changes nothing; a write
// of the same length, in place, and one of the arena's last entry, which
// starts where it did, still succeed.
func TestFullShardFailsTheSubtask(t *testing.T) {
	defer func(limit uint64) { shardLimit = limit }(shardLimit)
	shardLimit = 64
	const k = "k"
	var other string // in k's shard
	for i := 0; other == ""; i++ {
		if o := fmt.Sprint("k", i); KeyGroup(o, DefaultMaxParallelism) == KeyGroup(k, DefaultMaxParallelism) && shardOf(o) == shardOf(k) {
			other = o
		}
	}
	s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1}, &recorder{})
	v, _ := NewValueState(s.Context(), "v", BytesCodec{})
	s.SetKey(k)
	v.Set(bytes.Repeat([]byte{1}, 70))
	v.Set(bytes.Repeat([]byte{2}, 70))
	if got, ok := v.Get(); !ok || got[0] != 2 || s.Err() != nil {
		t.Fatalf("in-place write: %v, %v, %v", got[:1], ok, s.Err())
	}
	v.Set(bytes.Repeat([]byte{3}, 80))
	if got, ok := v.Get(); !ok || len(got) != 80 || got[0] != 3 || s.Err() != nil {
		t.Fatalf("write of the last entry: %v, %v, %v", got[:1], ok, s.Err())
	}
	s.SetKey(other)
	v.Set([]byte{4})
	if !errors.Is(s.Err(), errShardFull) {
		t.Fatalf("Err() = %v, want errShardFull", s.Err())
	}
	if got, ok := v.Get(); ok {
		t.Fatalf("the refused write stored %v", got)
	}
	s.SetKey(k)
	if got, ok := v.Get(); !ok || got[0] != 3 {
		t.Fatalf("the refused write changed the value to %v", got[:1])
	}
}

// TestWholeSnapshotAfterRestoreIsUnchangedByWrites: restoring a key group
// leaves its shards without keys empty, so that a whole snapshot taken
// next holds no view of them that the first write to one would change
// (it did: the write reached the view's index, and encoding it panicked).
func TestWholeSnapshotAfterRestoreIsUnchangedByWrites(t *testing.T) {
	const a = "device-a"
	var b string // in a's key group, in another shard
	for i := 0; b == ""; i++ {
		if k := fmt.Sprint("device-", i); KeyGroup(k, DefaultMaxParallelism) == KeyGroup(a, DefaultMaxParallelism) && shardOf(k) != shardOf(a) {
			b = k
		}
	}
	s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1}, &recorder{})
	v, _ := NewValueState(s.Context(), "v", Int64Codec{})
	s.SetKey(a)
	v.Set(1)
	snap, err := DecodeSubtaskSnapshot(s.Freeze(nil, 0, false).Encode(), KeyGroupRange{0, DefaultMaxParallelism})
	if err != nil {
		t.Fatal(err)
	}
	restored := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1}, &recorder{})
	restored.Restore([]*SubtaskSnapshot{snap})
	v, err = NewValueState(restored.Context(), "v", Int64Codec{})
	if err != nil {
		t.Fatal(err)
	}
	frozen := restored.Freeze(nil, 0, false)
	before := frozen.Encode()
	restored.SetKey(b)
	v.Set(2)
	if !bytes.Equal(frozen.Encode(), before) {
		t.Fatal("a write after the snapshot changed it")
	}
}
