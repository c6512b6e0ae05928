package graph

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestValueStateMatchesAMap runs random Gets, Sets (some after a Get, whose
// slot Set reuses) and Deletes against a map, with snapshots, whole and
// incremental, along the way: each snapshot's chain, merged, must hold
// exactly the map; now and then the subtask restarts from it; and every
// snapshot must encode at the end as it did when taken.
func TestValueStateMatchesAMap(t *testing.T) {
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 7))
		maxPar := 1 + rng.IntN(8)
		s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1, MaxParallelism: maxPar}, &recorder{})
		v, _ := NewValueState(s.Context(), "v", BytesCodec{})
		model := map[string][]byte{}
		type fz struct {
			f   *FrozenState
			enc []byte
		}
		var frozen []fz
		var chain []*SubtaskSnapshot
		var base Version
		keys := 1 + rng.IntN(400)
		for step := range 6000 {
			k := fmt.Sprint("key", rng.IntN(keys))
			s.SetKey(k)
			switch r := rng.IntN(20); {
			case r < 4:
				got, ok := v.Get()
				want, had := model[k]
				if ok != had || !bytes.Equal(got, want) {
					t.Fatalf("seed %d step %d: Get(%s) = %x %v want %x %v", seed, step, k, got, ok, want, had)
				}
			case r < 12:
				if rng.IntN(2) == 0 {
					v.Get() // set a hint
				}
				val := bytes.Repeat([]byte{byte(step)}, rng.IntN(5))
				v.Set(val)
				model[k] = val
			case r < 18:
				v.Delete()
				delete(model, k)
			default:
				incr := len(chain) > 0 && rng.IntN(3) > 0
				f := s.Freeze(nil, base, incr)
				enc := f.Encode()
				frozen = append(frozen, fz{f, enc})
				snap, err := DecodeSubtaskSnapshot(enc, KeyGroupRange{0, maxPar})
				if err != nil {
					t.Fatal(err)
				}
				if !incr {
					chain = nil
				}
				chain = append(chain, snap)
				base = f.Version()
				merged, err := MergeChain(chain)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string][]byte{}
				for _, g := range merged.Groups {
					for _, tb := range g.Tables {
						for j, kk := range tb.Keys {
							got[kk] = tb.Values[j]
						}
					}
				}
				if len(got) != len(model) {
					t.Fatalf("seed %d step %d: merged chain has %d keys, model %d", seed, step, len(got), len(model))
				}
				for kk, vv := range model {
					if !bytes.Equal(got[kk], vv) {
						t.Fatalf("seed %d step %d: merged %s = %x want %x", seed, step, kk, got[kk], vv)
					}
				}
				if rng.IntN(4) == 0 { // restart from the merged chain
					s = NewTaskState(TaskInfo{Operator: "op", Parallelism: 1, MaxParallelism: maxPar}, &recorder{})
					s.Restore([]*SubtaskSnapshot{merged})
					v, err = NewValueState(s.Context(), "v", BytesCodec{})
					if err != nil {
						t.Fatal(err)
					}
					chain, base = nil, 0
				}
			}
			if s.Err() != nil {
				t.Fatal(s.Err())
			}
		}
		for i, f := range frozen {
			if !bytes.Equal(f.f.Encode(), f.enc) {
				t.Fatalf("seed %d: snapshot %d changed after freezing", seed, i)
			}
		}
	}
}

// TestKeyedChanged: a snapshot frozen against the version of the one
// before says whether keyed state was written or deleted in between, whole
// or incremental.
func TestKeyedChanged(t *testing.T) {
	for _, incremental := range []bool{false, true} {
		s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1}, nil)
		v, err := NewValueState(s.Context(), "v", Int64Codec{})
		if err != nil {
			t.Fatal(err)
		}
		base := s.Freeze(nil, 0, false).Version()
		freeze := func() bool {
			f := s.Freeze(nil, base, incremental)
			base = f.Version()
			return f.KeyedChanged()
		}
		if freeze() {
			t.Fatalf("incremental %v: nothing written, yet changed", incremental)
		}
		s.SetKey("a")
		v.Set(1)
		if !freeze() {
			t.Fatalf("incremental %v: a key written, yet unchanged", incremental)
		}
		if freeze() {
			t.Fatalf("incremental %v: nothing written since, yet changed", incremental)
		}
		v.Delete()
		if !freeze() {
			t.Fatalf("incremental %v: a key deleted, yet unchanged", incremental)
		}
	}
}
