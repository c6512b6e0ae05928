package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
	"github.com/cairn-edge/cairn/localrecovery"
)

// TestProcClockNeverGoesBack: processing time follows the wall clock
// forward, jumps included; after a step back it runs on at half the
// monotonic clock's speed until the wall clock catches up, never going
// back, and a clock set to 2300 does not overflow it.
func TestProcClockNeverGoesBack(t *testing.T) {
	const sec = int64(1000)
	type step struct {
		mono time.Duration // since the first read
		wall int64         // seconds
		want int64         // seconds
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"follows the clock", []step{{0, 100, 100}, {time.Second, 101, 101}, {3 * time.Second, 103, 103}}},
		{"jumps forward with it", []step{{0, 100, 100}, {time.Second, 100 + 56*365*86400, 100 + 56*365*86400}}},
		{"a step back runs at half speed until the clock catches up", []step{
			{0, 1000, 1000}, {10 * time.Second, 10, 1005}, {20 * time.Second, 20, 1010},
			{1000 * time.Second, 1000, 1500}, {2000 * time.Second, 2000, 2000}, {2001 * time.Second, 2001, 2001}}},
		{"the year 2300", []step{{0, 10_420_000_000, 10_420_000_000}, {time.Second, 10_420_000_001, 10_420_000_001}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var clock procClock
			last := int64(-1 << 62)
			for i, s := range c.steps {
				got := clock.read(s.wall*sec, s.mono)
				if got != s.want*sec {
					t.Fatalf("step %d: wall %d s at %v: processing time %d ms, want %d", i, s.wall, s.mono, got, s.want*sec)
				}
				if got < last {
					t.Fatalf("step %d: processing time went back from %d to %d", i, last, got)
				}
				last = got
			}
		})
	}
}

// results is a sink that hands window results to the test.
type results struct {
	graph.BaseOperator
	out chan string
}

func (s *results) ProcessRecord(_ int, r *graph.Record) error {
	w := r.Payload.(graph.WindowResult)
	s.out <- fmt.Sprintf("%s[%d,%d)=%v", r.Key, w.Start, w.End, r.Value)
	return nil
}

// TestIdleSourceClosesItsLastWindows: a source that stops sending has its
// last windows emitted once it is idle (graph.Idleness) and the wall clock
// passes their end, not when a later reading comes; its event time then
// rests Horizon past its newest reading, so an idle job's state stops
// changing; a reading that comes back is on time again, and its window is
// emitted the same way.
//
// It runs in a synctest bubble: time moves only when every goroutine
// waits, so the times below are exact on any machine.
func TestIdleSourceClosesItsLastWindows(t *testing.T) {
	synctest.Test(t, idleSourceClosesItsLastWindows)
}

func idleSourceClosesItsLastWindows(t *testing.T) {
	const timeout, horizon, size = 5 * time.Second, 2 * time.Second, 2 * time.Second
	in := newFeed()
	sink := &results{out: make(chan string, 64)}
	var b graph.Builder
	src := b.Source("src", 1, in.source(), graph.WithWatermarks(time.Second), graph.WithIdleness(graph.Idleness{Timeout: timeout, Horizon: horizon}))
	w := b.Operator("window", 1, graph.Window(graph.WindowSpec{Kind: graph.Tumbling, Size: size, Aggregate: graph.AggCount}),
		[]graph.Input{graph.In(src, graph.Hash(nil))})
	b.Operator("sink", 1, func(int) graph.Operator { return sink }, []graph.Input{graph.In(w, graph.Forward())})
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	job, _ := runJob(t, topo, Options{Checkpoints: checkpoint.DefaultConfig()})

	// burst sends a reading every 100 ms of the last 3 s, at the clock's
	// time, and returns the windows they make, with their counts.
	burst := func() []string {
		now := time.Now().UnixMilli()
		count := map[int64]int{}
		for i := range int64(30) {
			at := now - 3000 + i*100
			in.push(graph.Record{Key: "d", Time: at, Value: 1})
			count[at-at%size.Milliseconds()]++
		}
		var want []string
		for start, n := range count {
			want = append(want, fmt.Sprintf("d[%d,%d)=%d", start, start+size.Milliseconds(), n))
		}
		slices.Sort(want)
		return want
	}
	await := func(want []string) time.Duration {
		t.Helper()
		start := time.Now()
		var got []string
		for len(got) < len(want) {
			got = append(got, testwait.Recv(t, sink.out, time.Minute, "the windows of the burst"))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("windows:\n got %v\nwant %v", got, want)
		}
		return time.Since(start)
	}
	watermark := func() int64 {
		for _, st := range job.Status().Tasks {
			if st.ID.Operator == "src" {
				return st.Watermark
			}
		}
		t.Fatal("no source in the status")
		return 0
	}

	for round := range 2 {
		want := burst()
		newest := time.Now().UnixMilli() - 100
		took := await(want)
		if took < timeout || took > timeout+idleFollow {
			t.Fatalf("round %d: the last window came %v after the burst; want it once the source is idle, %v", round, took, timeout)
		}
		time.Sleep(horizon + idleFollow)
		synctest.Wait()
		if wm := watermark(); wm != newest+horizon.Milliseconds() {
			t.Fatalf("round %d: the idle source's watermark rests at %d, want %d (its newest reading %d + the horizon)", round, wm, newest+horizon.Milliseconds(), newest)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if wm := watermark(); wm != newest+horizon.Milliseconds() {
			t.Fatalf("round %d: the idle source's watermark moved on to %d past its horizon", round, wm)
		}
	}
}

// TestIdleInputDoesNotHoldBackTheOthers: an operator takes its event time
// from the inputs that are not idle: the windows of one source go on
// while the other sends nothing at all.
func TestIdleInputDoesNotHoldBackTheOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		busy, _, sink := idleSources(t, true)
		time.Sleep(2 * time.Second) // both idle: nothing read yet
		for i := range int64(50) {  // a reading every 100 ms, at the clock's time
			busy.push(graph.Record{Key: "d", Time: time.Now().UnixMilli(), Value: 1})
			time.Sleep(100 * time.Millisecond)
			if i == 30 {
				// The windows of the first two seconds closed by the
				// busy source's time alone, while it sends.
				synctest.Wait()
				if n := len(sink.out); n < 2 {
					t.Fatalf("%d windows emitted after 3 s of readings; the quiet input holds event time back", n)
				}
			}
		}
	})
}

// TestRestoreBringsBackEventTimeAheadOfTheClock: a checkpoint whose
// watermarks a reading from the year 9999 put at the end of time (taken
// before event times were bounded) restores with them brought back to the
// clock (Options.MaxFuture): the windows of readings at the clock's time
// are emitted after the restore, not counted late.
func TestRestoreBringsBackEventTimeAheadOfTheClock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	in := newFeed()
	sink := &results{out: make(chan string, 64)}
	var late sync.Map
	var b graph.Builder
	src := b.Source("src", 1, in.source(), graph.WithWatermarks(0))
	w := b.Operator("window", 1, graph.Window(graph.WindowSpec{Kind: graph.Tumbling, Size: time.Second, Aggregate: graph.AggCount,
		OnLate: func(r *graph.Record) { late.Store(r.Time, true) }}), []graph.Input{graph.In(src, graph.Hash(nil))})
	b.Operator("sink", 1, func(int) graph.Operator { return sink }, []graph.Input{graph.In(w, graph.Forward())})
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	endOfTime := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).UnixMilli()
	var restore []*checkpoint.Manifest
	for life := range 2 {
		store, err := localrecovery.Open(path, localrecovery.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if restore, err = store.Completed(); err != nil {
			t.Fatal(err)
		}
		completed := make(chan uint64, 16)
		job, stop := runJob(t, topo, Options{Checkpoints: checkpoint.DefaultConfig(), Store: store,
			Restore: localrecovery.Candidates(store, restore), MaxFuture: 5 * time.Minute,
			OnComplete: func(m *checkpoint.Manifest) { completed <- m.ID }})
		if life == 0 {
			in.push(graph.Record{Key: "poison", Time: endOfTime, Value: 1})
			awaitWatermark(t, job, "window", "the reading of 9999 to be read", func(wm int64) bool { return wm == endOfTime-1 })
			checkpointNow(t, job, completed, "the checkpoint holding the watermark of 9999")
		} else {
			// The reading is at the clock's time once the job read the
			// clock to bring its event time back: Run does, after runJob
			// returned, and a reading of before could be late by then.
			awaitWatermark(t, job, "window", "the restored event time brought back to the clock", func(wm int64) bool {
				return wm > graph.MinWatermark && wm < endOfTime-1
			})
			now := time.Now().UnixMilli()
			in.push(graph.Record{Key: "d", Time: now, Value: 1}, graph.Record{Key: "d", Time: now + 2000, Value: 1})
			got := testwait.Recv(t, sink.out, 10*time.Second, "the window of the reading at the clock's time")
			if start := now - now%1000; got != fmt.Sprintf("d[%d,%d)=1", start, start+1000) {
				t.Fatalf("emitted %s, want the window of %d", got, now)
			}
			if _, ok := late.Load(now); ok {
				t.Fatal("the reading at the clock's time was late")
			}
		}
		stop()
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRestoredEventTimeReachesEveryInput: after a restore, a subtask of
// two inputs knows at once the event time each input had reached: a
// window closes when one input's readings pass its end, although the
// other, whose event time was past it before the restore, has sent
// nothing since.
func TestRestoredEventTimeReachesEveryInput(t *testing.T) {
	quick, slow := newFeed(), newFeed()
	sink := &results{out: make(chan string, 64)}
	var b graph.Builder
	q := b.Source("quick", 1, quick.source(), graph.WithWatermarks(0))
	s := b.Source("slow", 1, slow.source(), graph.WithWatermarks(0))
	w := b.Operator("window", 1, graph.Window(graph.WindowSpec{Kind: graph.Tumbling, Size: time.Second, Aggregate: graph.AggCount}),
		[]graph.Input{graph.In(q, graph.Hash(nil)), graph.In(s, graph.Hash(nil))})
	b.Operator("sink", 1, func(int) graph.Operator { return sink }, []graph.Input{graph.In(w, graph.Forward())})
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	store := checkpoint.NewMemStore(2)
	completed := make(chan uint64, 16)
	opts := Options{Checkpoints: checkpoint.DefaultConfig(), Store: store, OnComplete: func(m *checkpoint.Manifest) { completed <- m.ID }}
	job, stop := runJob(t, topo, opts)
	quick.push(graph.Record{Key: "d", Time: 1500, Value: 1})
	slow.push(graph.Record{Key: "d", Time: 3500, Value: 1})
	awaitWatermark(t, job, "window", "the window's event time to reach the quick input's", func(wm int64) bool { return wm == 1499 })
	checkpointNow(t, job, completed, "the checkpoint")
	stop()
	if n := len(sink.out); n != 0 {
		t.Fatalf("%d windows emitted before the restore, want none", n)
	}

	ms, err := store.Completed()
	if err != nil {
		t.Fatal(err)
	}
	opts.Restore = localrecovery.Candidates(store, ms)
	_, stop = runJob(t, topo, opts)
	defer stop()
	quick.push(graph.Record{Key: "d", Time: 2500, Value: 1})
	if got := testwait.Recv(t, sink.out, 10*time.Second, "the window the quick input's reading closes"); got != "d[1000,2000)=1" {
		t.Fatalf("emitted %s, want d[1000,2000)=1", got)
	}
}

// awaitWatermark waits until a subtask of operator has an event time ok
// takes; what says what that means.
func awaitWatermark(t *testing.T, job *Job, operator, what string, ok func(int64) bool) {
	t.Helper()
	testwait.For(t, 10*time.Second, what, func() bool {
		for _, st := range job.Status().Tasks {
			if st.ID.Operator == operator && ok(st.Watermark) {
				return true
			}
		}
		return false
	})
}

// checkpointNow triggers a checkpoint of job and waits until completed,
// Options.OnComplete's channel, says it completed.
func checkpointNow(t *testing.T, job *Job, completed <-chan uint64, what string) {
	t.Helper()
	id, err := job.TriggerCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for done := uint64(0); done < id; {
		done = testwait.Recv(t, completed, time.Minute, what)
	}
}

// TestProcessingTimeWindowsAcrossClockSteps: processing-time windows are
// made by records, so a wall clock stepped 56 years forward (NTP setting a
// board that booted in 1970) closes the window open then and makes none
// for the years skipped; one stepped back an hour closes the window open
// then within twice its length (procClock), not an hour later.
func TestProcessingTimeWindowsAcrossClockSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := new(jumpyClock)
		in := newFeed()
		sink := &results{out: make(chan string, 64)}
		var b graph.Builder
		src := b.Source("src", 1, in.source())
		w := b.Operator("window", 1, graph.Window(graph.WindowSpec{Kind: graph.Tumbling, Size: time.Second, Aggregate: graph.AggCount, ProcessingTime: true}),
			[]graph.Input{graph.In(src, graph.Hash(nil))})
		b.Operator("sink", 1, func(int) graph.Operator { return sink }, []graph.Input{graph.In(w, graph.Forward())})
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		runJob(t, topo, Options{Checkpoints: checkpoint.DefaultConfig(), WallClock: clock.now})
		for _, step := range []time.Duration{56 * 365 * 24 * time.Hour, -time.Hour} {
			time.Sleep(time.Second - time.Duration(time.Now().UnixNano())%time.Second + 100*time.Millisecond) // early in a window
			in.push(graph.Record{Key: "d", Value: 1}, graph.Record{Key: "d", Value: 1})
			synctest.Wait()
			stepped := time.Now()
			clock.jump(step)
			got := testwait.Recv(t, sink.out, time.Minute, "the window open when the clock was stepped")
			if !strings.HasSuffix(got, "=2") {
				t.Fatalf("after a step of %v: %s, want the window of the two records", step, got)
			}
			if took := time.Since(stepped); took > 2*time.Second+wallClockRecheck {
				t.Fatalf("after a step of %v the open window closed %v later", step, took)
			}
			time.Sleep(10 * time.Second)
			synctest.Wait()
			if n := len(sink.out); n != 0 {
				t.Fatalf("after a step of %v, %d more windows without records: %s", step, n, <-sink.out)
			}
		}
	})
}

// TestEndedInputBesideAnIdleOne: an input that ended is not an active one:
// beside an idle input that has read nothing yet, it does not move the
// operator's event time to its end, and the idle input's readings, when
// they come, are windowed, not late.
func TestEndedInputBesideAnIdleOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ending, quiet, sink := idleSources(t, false)
		time.Sleep(2 * time.Second) // both idle
		ending.push(graph.Record{Key: "e", Time: time.Now().UnixMilli(), Value: 1})
		ending.end() // active when it ends
		time.Sleep(time.Second)
		synctest.Wait()
		at := time.Now().UnixMilli()
		quiet.push(graph.Record{Key: "q", Time: at, Value: 1})
		quiet.end()
		start := at - at%1000
		want := fmt.Sprintf("q[%d,%d)=1", start, start+1000)
		for {
			got := testwait.Recv(t, sink.out, time.Minute, "the quiet source's window")
			if got == want {
				break
			}
			if !strings.HasPrefix(got, "e[") {
				t.Fatalf("got %s, want the window of the quiet source's reading", got)
			}
		}
	})
}

// idleSources runs a job of two sources, each idle after a second without
// input, into tumbling windows of a second, read through a union if union
// or else straight from both; it returns the sources' feeds and the
// windows' results.
func idleSources(t *testing.T, union bool) (first, second *feed, sink *results) {
	idle := graph.WithIdleness(graph.Idleness{Timeout: time.Second, Horizon: time.Second})
	first, second, sink = newFeed(), newFeed(), &results{out: make(chan string, 64)}
	var b graph.Builder
	in := []graph.Input{
		graph.In(b.Source("first", 1, first.source(), graph.WithWatermarks(0), idle), graph.Hash(nil)),
		graph.In(b.Source("second", 1, second.source(), graph.WithWatermarks(0), idle), graph.Hash(nil)),
	}
	if union {
		in[0].Partitioner, in[1].Partitioner = graph.Forward(), graph.Forward()
		in = []graph.Input{graph.In(b.Operator("union", 1, graph.Union(), in), graph.Hash(nil))}
	}
	w := b.Operator("window", 1, graph.Window(graph.WindowSpec{Kind: graph.Tumbling, Size: time.Second, Aggregate: graph.AggCount}), in)
	b.Operator("sink", 1, func(int) graph.Operator { return sink }, []graph.Input{graph.In(w, graph.Forward())})
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	runJob(t, topo, Options{Checkpoints: checkpoint.DefaultConfig()})
	return first, second, sink
}
