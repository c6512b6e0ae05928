package graph

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestKeyGroupRangesPartitionAllGroups(t *testing.T) {
	for _, maxPar := range []int{1, 7, 128, 1000} {
		for par := 1; par <= min(maxPar, 13); par++ {
			next := 0
			for sub := range par {
				r := KeyGroupRangeFor(sub, par, maxPar)
				if r.Start != next {
					t.Fatalf("max %d par %d: subtask %d starts at %d, want %d", maxPar, par, sub, r.Start, next)
				}
				for kg := r.Start; kg < r.End; kg++ {
					if got := SubtaskForKeyGroup(kg, par, maxPar); got != sub {
						t.Fatalf("max %d par %d: group %d is in subtask %d's range but maps to %d", maxPar, par, kg, sub, got)
					}
				}
				next = r.End
			}
			if next != maxPar {
				t.Fatalf("max %d par %d: ranges end at %d", maxPar, par, next)
			}
		}
	}
}

func TestKeyGroupSpreadsKeys(t *testing.T) {
	counts := make([]int, DefaultMaxParallelism)
	for i := range 128_000 {
		counts[KeyGroup(fmt.Sprintf("device-%d", i), DefaultMaxParallelism)]++
	}
	for kg, n := range counts {
		if n < 700 || n > 1300 {
			t.Fatalf("key group %d holds %d of 128000 keys; want about 1000", kg, n)
		}
	}
	// A key's group never changes: snapshots hold keyed state by group,
	// and a parallel source logs a topic where its group falls.
	for _, c := range []struct {
		key        string
		g128, g32k int
	}{{"sensor-1", 71, 15815}, {"", 38, 10534}, {"dev-7", 26, 3610}, {"日本", 67, 20035}} {
		if g, g32k := KeyGroup(c.key, 128), KeyGroup(c.key, 1<<15); g != c.g128 || g32k != c.g32k {
			t.Errorf("key %q is in groups %d of 128 and %d of 32768; it always was in %d and %d", c.key, g, g32k, c.g128, c.g32k)
		}
	}
}

type recorder struct{ got []Record }

func (r *recorder) Emit(rec *Record) { r.got = append(r.got, *rec) }

// timerOp records the timers that fire.
type timerOp struct {
	BaseOperator
	ctx    *Context
	fired  []string
	onFire func(key string, ts int64) // if set, called after each timer is noted
}

func (o *timerOp) ProcessRecord(int, *Record) error { return nil }

func (o *timerOp) OnTimer(ts int64) error {
	o.fired = append(o.fired, fmt.Sprintf("%s@%d", o.ctx.CurrentKey(), ts))
	if o.onFire != nil {
		o.onFire(o.ctx.CurrentKey(), ts)
	}
	return nil
}

func TestSnapshotRoundTripWithRescaling(t *testing.T) {
	// Two subtasks of an operator with 8 key groups fill state and timers.
	var encoded [][]byte
	want := map[string]int64{}
	for sub := range 2 {
		s := NewTaskState(TaskInfo{Operator: "op", Subtask: sub, Parallelism: 2, MaxParallelism: 8}, &recorder{})
		v, err := NewValueState(s.Context(), "count", Int64Codec{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			key := fmt.Sprintf("k%d", i)
			if !s.Context().KeyGroups().Contains(KeyGroup(key, 8)) {
				continue
			}
			s.SetKey(key)
			v.Set(int64(i * 10))
			want[key] = int64(i * 10)
			s.Context().RegisterEventTimer(int64(100 + i))
		}
		if _, err := s.AdvanceWatermark(50+int64(sub), &timerOp{ctx: s.Context()}); err != nil {
			t.Fatal(err)
		}
		encoded = append(encoded, s.Freeze([][]byte{[]byte(fmt.Sprintf("op-state-%d", sub))}, 0, false).Encode())
	}
	// Restore at parallelism 3: every key lands exactly once, with its timer.
	got := map[string]int64{}
	var fired []string
	for sub := range 3 {
		s := NewTaskState(TaskInfo{Operator: "op", Subtask: sub, Parallelism: 3, MaxParallelism: 8}, &recorder{})
		var snaps []*SubtaskSnapshot
		for _, data := range encoded {
			snap, err := DecodeSubtaskSnapshot(data, s.Context().KeyGroups())
			if err != nil {
				t.Fatal(err)
			}
			snaps = append(snaps, snap)
		}
		s.Restore(snaps)
		if s.Watermark() != 50 {
			t.Fatalf("restored watermark %d, want the lowest, 50", s.Watermark())
		}
		v, err := NewValueState(s.Context(), "count", Int64Codec{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			key := fmt.Sprintf("k%d", i)
			if !s.Context().KeyGroups().Contains(KeyGroup(key, 8)) {
				continue
			}
			s.SetKey(key)
			if x, ok := v.Get(); ok {
				got[key] = x
			}
		}
		op := &timerOp{ctx: s.Context()}
		if _, err := s.AdvanceWatermark(MaxWatermark, op); err != nil {
			t.Fatal(err)
		}
		fired = append(fired, op.fired...)
	}
	if len(got) != len(want) {
		t.Fatalf("restored %d keys, want %d", len(got), len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Fatalf("key %s restored as %d, want %d", k, got[k], w)
		}
	}
	if len(fired) != 40 {
		t.Fatalf("%d timers fired after restore, want 40: %v", len(fired), fired)
	}
}

func TestFreezeIsCopyOnWrite(t *testing.T) {
	s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1}, &recorder{})
	v, _ := NewValueState(s.Context(), "v", Int64Codec{})
	s.SetKey("a")
	v.Set(1)
	frozen := s.Freeze(nil, 0, false)
	before := frozen.Encode()
	v.Set(2)
	s.SetKey("b")
	v.Set(3)
	s.SetKey("a")
	v.Delete()
	if after := frozen.Encode(); !bytes.Equal(before, after) {
		t.Fatal("writes after Freeze changed the frozen snapshot")
	}
	snap, err := DecodeSubtaskSnapshot(s.Freeze(nil, 0, false).Encode(), KeyGroupRange{0, DefaultMaxParallelism})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, g := range snap.Groups {
		for _, tb := range g.Tables {
			keys = append(keys, tb.Keys...)
		}
	}
	if strings.Join(keys, ",") != "b" {
		t.Fatalf("live state holds keys %v, want [b]", keys)
	}
}

// A large snapshot is encoded in parts of about encodePartSize, which a
// store writes as they come, and decodes whole.
func TestEncodeInBoundedParts(t *testing.T) {
	s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1}, &recorder{})
	v, _ := NewValueState(s.Context(), "v", BytesCodec{})
	const keys = 25_000
	for i := range keys {
		s.SetKey(fmt.Sprintf("device-%06d", i))
		v.Set(bytes.Repeat([]byte{byte(i)}, 100))
		s.Context().RegisterEventTimer(int64(i))
	}
	frozen := s.Freeze([][]byte{[]byte("op")}, 0, false)
	parts := slices.Collect(frozen.Parts())
	total := 0
	for i, p := range parts {
		total += len(p)
		// A part closes after the key group that took it past the bound.
		if len(p) > encodePartSize+encodePartSize/2 {
			t.Errorf("part %d of %d is %d bytes, over %d", i, len(parts), len(p), encodePartSize)
		}
	}
	if total < 10*encodePartSize || len(parts) < 10 {
		t.Fatalf("%d bytes in %d parts: want a snapshot of many parts", total, len(parts))
	}
	// Ranged again, on two goroutines at once (as under -race), it yields
	// the same bytes: the first range sorts the frozen timers, once.
	again := make(chan []byte, 2)
	for range 2 {
		go func() { again <- bytes.Join(slices.Collect(frozen.Parts()), nil) }()
	}
	for range 2 {
		if !bytes.Equal(<-again, bytes.Join(parts, nil)) {
			t.Fatal("ranging the parts again yields other bytes")
		}
	}
	snap, err := DecodeSubtaskSnapshot(bytes.Join(parts, nil), KeyGroupRange{0, DefaultMaxParallelism})
	if err != nil {
		t.Fatal(err)
	}
	n, timers := 0, 0
	for _, g := range snap.Groups {
		n += len(g.Tables[0].Keys)
		timers += len(g.Timers)
	}
	if n != keys || timers != keys || string(snap.Operator) != "op" {
		t.Fatalf("decoded %d keys, %d timers, operator %q; want %d, %d, \"op\"", n, timers, snap.Operator, keys, keys)
	}
}

// Keyed state emptied by deletes, as a window's after it fires, gives its
// maps back once the tombstones are in a snapshot that the next one builds
// on: a Go map never shrinks.
func TestEmptiedStateGivesMemoryBack(t *testing.T) {
	s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1}, &recorder{})
	v, _ := NewValueState(s.Context(), "v", Int64Codec{})
	for i := range 1000 {
		s.SetKey(fmt.Sprint(i))
		v.Set(int64(i))
	}
	full := s.Freeze(nil, 0, false)
	for i := range 1000 {
		s.SetKey(fmt.Sprint(i))
		v.Delete()
	}
	withTombstones := s.Freeze(nil, full.Version(), true)
	snap, err := DecodeSubtaskSnapshot(withTombstones.Encode(), KeyGroupRange{0, DefaultMaxParallelism})
	if err != nil {
		t.Fatal(err)
	}
	deleted := 0
	for _, g := range snap.Groups {
		deleted += len(g.Tables[0].Deleted)
	}
	if deleted != 1000 {
		t.Fatalf("incremental snapshot after the deletes has %d tombstones, want 1000", deleted)
	}
	s.Freeze(nil, withTombstones.Version(), true)
	for i, sh := range v.table.shards {
		if sh.arena != nil || sh.index != nil || sh.deleted != nil {
			t.Fatalf("shard %d still holds %d bytes of entries, an index of %d and %d tombstones", i, len(sh.arena), len(sh.index), len(sh.deleted))
		}
	}
}

// TestEqualStatesEncodeEqually: two subtasks that reached the same state
// by different paths (keys and timers set in other orders) encode equal
// snapshots, whose timers are in firing order.
func TestEqualStatesEncodeEqually(t *testing.T) {
	var encoded [2][]byte
	for i := range encoded {
		s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1, MaxParallelism: 4}, &recorder{})
		v, _ := NewValueState(s.Context(), "v", Int64Codec{})
		for n := range 1000 {
			k := n
			if i == 1 {
				k = 999 - n
			}
			s.SetKey(fmt.Sprint(k))
			v.Set(int64(k))
			for _, ts := range []int64{30, 10, 20} {
				s.Context().RegisterEventTimer(ts + int64(k%7))
				s.Context().RegisterProcessingTimer(ts * int64(k%3))
			}
		}
		encoded[i] = s.Freeze(nil, 0, false).Encode()
	}
	if !bytes.Equal(encoded[0], encoded[1]) {
		t.Fatal("equal states encoded differently")
	}
	snap, err := DecodeSubtaskSnapshot(encoded[0], KeyGroupRange{0, 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range snap.Groups {
		for _, ts := range [][]Timer{g.Timers, g.ProcessingTimers} {
			if !slices.IsSortedFunc(ts, compareTimers) {
				t.Fatalf("key group %d's timers are not in firing order", g.KeyGroup)
			}
		}
	}
}

func TestDecodeRejectsDamage(t *testing.T) {
	s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1}, &recorder{})
	v, _ := NewValueState(s.Context(), "v", Int64Codec{})
	for i := range 20 {
		s.SetKey(fmt.Sprint(i))
		v.Set(int64(i))
		s.Context().RegisterEventTimer(int64(i))
	}
	data := s.Freeze([][]byte{[]byte("x")}, 0, false).Encode()
	all := KeyGroupRange{0, DefaultMaxParallelism}
	for n := range len(data) {
		if _, err := DecodeSubtaskSnapshot(data[:n], all); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("truncated to %d bytes: err = %v, want ErrCorruptSnapshot", n, err)
		}
	}
	if _, err := DecodeSubtaskSnapshot(append(data, 0), all); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("trailing byte: err = %v", err)
	}
}

func TestTimersFireInOrderOnce(t *testing.T) {
	s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1}, &recorder{})
	op := &timerOp{ctx: s.Context()}
	for _, k := range []string{"b", "a", "c"} {
		s.SetKey(k)
		s.Context().RegisterEventTimer(20)
		s.Context().RegisterEventTimer(10)
		s.Context().RegisterEventTimer(10)
	}
	s.SetKey("c")
	s.Context().DeleteEventTimer(20)
	if _, err := s.AdvanceWatermark(15, op); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AdvanceWatermark(15, op); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AdvanceWatermark(30, op); err != nil {
		t.Fatal(err)
	}
	want := "a@10 b@10 c@10 a@20 b@20"
	if got := strings.Join(op.fired, " "); got != want {
		t.Fatalf("fired %q, want %q", got, want)
	}
}

// TestFiredTimersGiveMemoryBack: after a burst of timers fires (a window
// operator's, for every key at the window's end), the timers keep no
// memory sized for the burst, and those left still fire in order.
func TestFiredTimersGiveMemoryBack(t *testing.T) {
	s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1}, &recorder{})
	op := &timerOp{ctx: s.Context()}
	const keys = 10_000
	for i := range keys {
		s.SetKey(fmt.Sprintf("k%05d", i))
		s.Context().RegisterEventTimer(100) // the burst
		if i%100 == 0 {
			s.Context().RegisterEventTimer(200 + int64(i)) // a hundred later ones
		}
	}
	if _, err := s.AdvanceWatermark(150, op); err != nil {
		t.Fatal(err)
	}
	timers := &s.Context().timers
	if len(op.fired) != keys || timers.n != 100 || len(timers.groups) != 100 || timers.groups[100] != nil {
		t.Fatalf("%d fired and %d left in %d groups, want %d and 100 in 100, the burst's gone", len(op.fired), timers.n, len(timers.groups), keys)
	}
	if c := cap(timers.times); c > max(4*len(timers.groups), shrinkFrom) {
		t.Fatalf("the heap keeps room for %d times after the burst fired, with %d left", c, len(timers.groups))
	}
	op.fired = nil
	if _, err := s.AdvanceWatermark(math.MaxInt64, op); err != nil {
		t.Fatal(err)
	}
	for i, f := range op.fired {
		if want := fmt.Sprintf("k%05d@%d", i*100, 200+i*100); f != want {
			t.Fatalf("after the burst, timer %d fired as %s, want %s", i, f, want)
		}
	}
	if len(op.fired) != 100 || timers.groups != nil || timers.times != nil || timers.n != 0 {
		t.Fatalf("%d fired; all fired, the groups (%d) and heap (cap %d) are still held", len(op.fired), len(timers.groups), cap(timers.times))
	}
}

// TestTimersOfManyTimesGiveMemoryBack: timers at as many times as keys (a
// dedupe's, a session window's) make a group each; once most have fired,
// the map of groups is made again at its size, and the rest fire in order.
func TestTimersOfManyTimesGiveMemoryBack(t *testing.T) {
	s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1}, &recorder{})
	op := &timerOp{ctx: s.Context()}
	const keys = 8 * shrinkFrom
	for i := range keys {
		s.SetKey(fmt.Sprintf("k%05d", i))
		s.Context().RegisterEventTimer(int64(i))
	}
	timers := &s.Context().timers
	if timers.peak != keys {
		t.Fatalf("%d groups at most, want one a time: %d", timers.peak, keys)
	}
	if _, err := s.AdvanceWatermark(keys-shrinkFrom-1, op); err != nil {
		t.Fatal(err)
	}
	if len(timers.groups) != shrinkFrom || timers.peak > 4*shrinkFrom || cap(timers.times) > 4*shrinkFrom {
		t.Fatalf("%d groups left, made again at %d at most, heap room %d: the map keeps the size of the %d", len(timers.groups), timers.peak, cap(timers.times), keys)
	}
	op.fired = nil
	if _, err := s.AdvanceWatermark(math.MaxInt64, op); err != nil {
		t.Fatal(err)
	}
	for i, f := range op.fired {
		if want := fmt.Sprintf("k%05d@%d", keys-shrinkFrom+i, keys-shrinkFrom+i); f != want {
			t.Fatalf("timer %d of the rest fired as %s, want %s", i, f, want)
		}
	}
	if len(op.fired) != shrinkFrom {
		t.Fatalf("%d of the rest fired, want %d", len(op.fired), shrinkFrom)
	}
}

// TestFiredTimerGroupsGiveHeapBack measures what TestTimersOfManyTimesGiveMemoryBack
// checks by sizes: once most groups of many have fired, the heap holds
// about what the rest need, not the map the burst grew.
func TestFiredTimerGroupsGiveHeapBack(t *testing.T) {
	const groups = 64 * shrinkFrom
	keys := make([]string, groups)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%06d", i)
	}
	s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1}, &recorder{})
	op := &countingTimerOp{}
	before := int64(heapInUse())
	for i, k := range keys {
		s.SetKey(k)
		s.Context().RegisterEventTimer(int64(i))
	}
	full := int64(heapInUse()) - before
	if _, err := s.AdvanceWatermark(groups-shrinkFrom-1, op); err != nil {
		t.Fatal(err)
	}
	left := int64(heapInUse()) - before
	if op.fired != groups-shrinkFrom || left > full/8 {
		t.Fatalf("%d fired; %d groups held %d bytes, the %d left hold %d", op.fired, groups, full, shrinkFrom, left)
	}
	runtime.KeepAlive(keys)
	runtime.KeepAlive(s) // the timers measured
}

// TestTimersAddedWhileFiring: timers registered and deleted by a timer
// that fires take their place in (time, key) order, as if they had been
// there from the start: one at the firing time after the current key
// fires in turn, one before it fires next, one at an earlier time fires
// at once, and one deleted never fires.
func TestTimersAddedWhileFiring(t *testing.T) {
	s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1}, &recorder{})
	op := &timerOp{ctx: s.Context()}
	for _, k := range []string{"k1", "k3", "k5"} {
		s.SetKey(k)
		s.Context().RegisterEventTimer(10)
	}
	op.onFire = func(key string, ts int64) {
		if key != "k1" {
			return
		}
		for _, k := range []string{"k2", "k0"} {
			s.SetKey(k)
			s.Context().RegisterEventTimer(10)
		}
		s.SetKey("k7")
		s.Context().RegisterEventTimer(7)
		s.SetKey("k5")
		s.Context().DeleteEventTimer(10)
	}
	if _, err := s.AdvanceWatermark(10, op); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(op.fired, " "), "k1@10 k7@7 k0@10 k2@10 k3@10"; got != want {
		t.Fatalf("fired %q, want %q", got, want)
	}
	if _, ok := s.Context().timers.next(); ok {
		t.Fatal("timers are left after all fired")
	}
}

func TestKeyedStateMisuseIsReported(t *testing.T) {
	s := NewTaskState(TaskInfo{Operator: "op", Subtask: 0, Parallelism: 2, MaxParallelism: 8}, &recorder{})
	v, _ := NewValueState(s.Context(), "v", Int64Codec{})
	v.Set(1)
	if !errors.Is(s.Err(), ErrNoKey) {
		t.Fatalf("Err = %v, want ErrNoKey", s.Err())
	}
	s = NewTaskState(TaskInfo{Operator: "op", Subtask: 0, Parallelism: 2, MaxParallelism: 8}, &recorder{})
	v, _ = NewValueState(s.Context(), "v", Int64Codec{})
	for i := 0; ; i++ {
		key := fmt.Sprint(i)
		if !s.Context().KeyGroups().Contains(KeyGroup(key, 8)) {
			s.SetKey(key)
			v.Set(1)
			break
		}
	}
	if !errors.Is(s.Err(), ErrForeignKey) {
		t.Fatalf("Err = %v, want ErrForeignKey", s.Err())
	}
	if _, err := NewValueState(s.Context(), "v", Int64Codec{}); err == nil {
		t.Fatal("registering a state name twice succeeded")
	}
}

func TestBuilderReportsEveryProblem(t *testing.T) {
	var b Builder
	src := b.Source("in", 2, SliceSource(nil))
	b.Operator("in", 3, Map(func(*Record) {}), []Input{In(src, Forward())})
	b.Operator("bad id!", 0, Union(), nil)
	var other Builder
	foreign := other.Source("x", 1, SliceSource(nil))
	b.Operator("f", 1, Union(), []Input{In(foreign, Rebalance())})
	_, err := b.Build()
	if err == nil {
		t.Fatal("Build accepted a broken graph")
	}
	for _, want := range []string{
		`node "in": id used twice`,
		`a forward edge needs equal parallelism, but "in" has 2 and "in" has 3`,
		`may hold only letters`,
		`parallelism 0 is outside`,
		`an operator needs at least one input`,
		`node "f": input 0 is not a node of this builder`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Build error lacks %q:\n%v", want, err)
		}
	}
}

func TestJoinLatestCombinesBothSides(t *testing.T) {
	out := &recorder{}
	s := NewTaskState(TaskInfo{Operator: "j", Parallelism: 1}, out)
	op := JoinLatest(func(l, r *Record) Record { return Record{Value: l.Value - r.Value} })(0)
	if err := op.Open(s.Context()); err != nil {
		t.Fatal(err)
	}
	feed := func(input int, key string, v float64) {
		s.SetKey(key)
		if err := op.ProcessRecord(input, &Record{Key: key, Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	feed(0, "a", 10) // no right side yet
	feed(1, "a", 3)  // 10 - 3
	feed(1, "b", 1)  // no left side for b
	feed(0, "a", 20) // 20 - 3
	var got []string
	for _, r := range out.got {
		got = append(got, fmt.Sprintf("%s=%v", r.Key, r.Value))
	}
	if strings.Join(got, " ") != "a=7 a=17" {
		t.Fatalf("emitted %v, want [a=7 a=17]", got)
	}
}

// TestTimersEncodeSmall: a window's timers, at one time with keys that
// share most of their bytes, take a few bytes each in a snapshot (format
// 2); a snapshot of format 1, each timer its key and time, still decodes.
func TestTimersEncodeSmall(t *testing.T) {
	s := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1, MaxParallelism: 1}, &recorder{})
	const keys = 1000
	for i := range keys {
		s.SetKey(fmt.Sprintf("device-%06d", i))
		s.Context().RegisterEventTimer(1_700_000_059_999)
	}
	empty := len(NewTaskState(TaskInfo{Operator: "op", Parallelism: 1, MaxParallelism: 1}, &recorder{}).Freeze(nil, 0, false).Encode())
	if n := len(s.Freeze(nil, 0, false).Encode()) - empty; n > 5*keys {
		t.Fatalf("%d timers take %d bytes, over 5 each", keys, n)
	}

	// Keys longer than the prefix a key may share come back whole.
	long := NewTaskState(TaskInfo{Operator: "op", Parallelism: 1, MaxParallelism: 1}, &recorder{})
	for i := range 3 {
		long.SetKey(strings.Repeat("k", 300) + fmt.Sprint(i))
		long.Context().RegisterEventTimer(7)
	}
	snap, err := DecodeSubtaskSnapshot(long.Freeze(nil, 0, false).Encode(), KeyGroupRange{0, 1})
	if err != nil || len(snap.Groups[0].Timers) != 3 || snap.Groups[0].Timers[2].Key != strings.Repeat("k", 300)+"2" {
		t.Fatalf("timers of long keys decoded as %v, %v", snap, err)
	}

	// Damage whose every key took all of the one before and a byte more
	// would decode to keys growing with the square of their number: a key
	// may take at most maxSharedPrefix bytes.
	growing := []byte(snapshotMagic + "\x02")
	growing = append(growing, 0, 0, 0, 1, 0, 0, 200) // whole, no operator state, watermark 0, one group without tables, 200 timers
	for i := range 200 {
		growing = binary.AppendVarint(growing, 0)
		growing = binary.AppendUvarint(growing, uint64(i))
		growing = append(growing, 1, 'x')
	}
	growing = append(growing, 0) // no processing-time timers
	if _, err := DecodeSubtaskSnapshot(growing, KeyGroupRange{0, 1}); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("keys sharing more than %d bytes decoded: %v", maxSharedPrefix, err)
	}

	v1 := []byte(snapshotMagic + "\x01")
	v1 = append(v1, 0, 0)                       // whole; no operator state
	v1 = binary.AppendVarint(v1, 5)             // watermark
	v1 = append(v1, 1, 0, 0)                    // one group, 0, without tables
	v1 = append(v1, 2, 2, 'k', '1', 20, 2, 'k') // two timers: k1@10, k2@10
	v1 = append(v1, '2', 20, 1, 1, 'p', 2)      // one processing-time timer: p@1
	snap, err = DecodeSubtaskSnapshot(v1, KeyGroupRange{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	g := snap.Groups[0]
	if snap.Watermark != 5 || !slices.Equal(g.Timers, []Timer{{"k1", 10}, {"k2", 10}}) || !slices.Equal(g.ProcessingTimers, []Timer{{"p", 1}}) {
		t.Fatalf("format 1 decoded as watermark %d, timers %v and %v", snap.Watermark, g.Timers, g.ProcessingTimers)
	}
}
