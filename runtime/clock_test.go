package runtime

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
	"github.com/cairn-edge/cairn/localrecovery"
)

// jumpyClock is a wall clock that runs with real time but can be set
// forwards or backwards, as NTP sets a gateway's clock.
// It can also be stopped for a while.
type jumpyClock struct {
	mu     sync.Mutex
	offset time.Duration
	frozen bool
	at     time.Time // what now returns while frozen
}

func (c *jumpyClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frozen {
		return c.at
	}
	return time.Now().Add(c.offset)
}

func (c *jumpyClock) jump(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
	c.at = c.at.Add(d)
}

// freeze stops the clock until thaw, so that the steps a test takes
// meanwhile take no time on it, however slowly a loaded machine runs them.
func (c *jumpyClock) freeze() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at, c.frozen = time.Now().Add(c.offset), true
}

// thaw starts the clock again from where it stood.
func (c *jumpyClock) thaw() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset, c.frozen = time.Until(c.at), false
}

// feed is a source fed by the test, one subtask.
type feed struct {
	mu    sync.Mutex
	queue []graph.Record
	ended bool
	ready chan struct{}
	read  uint64
}

func newFeed() *feed { return &feed{ready: make(chan struct{}, 1)} }

func (f *feed) push(rs ...graph.Record) {
	f.mu.Lock()
	f.queue = append(f.queue, rs...)
	f.mu.Unlock()
	f.signal()
}

func (f *feed) end() {
	f.mu.Lock()
	f.ended = true
	f.mu.Unlock()
	f.signal()
}

func (f *feed) signal() {
	select {
	case f.ready <- struct{}{}:
	default:
	}
}

func (f *feed) source() func(int) graph.Source { return func(int) graph.Source { return f } }

func (f *feed) Open(_ *graph.Context, offset uint64) error { f.read = offset; return nil }
func (f *feed) Offset() uint64                             { return f.read }
func (f *feed) Ready() <-chan struct{}                     { return f.ready }
func (f *feed) Close() error                               { return nil }

func (f *feed) Read(buf []graph.Record) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := copy(buf, f.queue)
	f.queue = f.queue[n:]
	f.read += uint64(n)
	if n == 0 && f.ended {
		return 0, io.EOF
	}
	return n, nil
}

// timerEvent is what procTimerOp saw: a record (seen, with the processing
// time then) or a timer that fired (its time, and the processing time when
// it fired).
type timerEvent struct {
	key       string
	fired     bool
	at, clock int64
}

// procTimerOp registers, for each record with a Value of d ≥ 0, a
// processing-time timer d milliseconds after the processing time; records
// with a negative Value are markers that register nothing.
type procTimerOp struct {
	graph.BaseOperator
	ctx    *graph.Context
	events chan<- timerEvent
}

func (o *procTimerOp) Open(ctx *graph.Context) error { o.ctx = ctx; return nil }

func (o *procTimerOp) ProcessRecord(_ int, r *graph.Record) error {
	now := o.ctx.ProcessingTime()
	if r.Value >= 0 {
		o.ctx.RegisterProcessingTimer(now + int64(r.Value))
	}
	o.events <- timerEvent{key: r.Key, at: now + int64(r.Value), clock: now}
	return nil
}

func (o *procTimerOp) OnProcessingTimer(ts int64) error {
	o.events <- timerEvent{key: o.ctx.CurrentKey(), fired: true, at: ts, clock: o.ctx.ProcessingTime()}
	return nil
}

// runJob runs topo in the background; the returned function stops it and
// fails the test if it failed.
func runJob(t *testing.T, topo *graph.Topology, opts Options) (*Job, func()) {
	t.Helper()
	job, err := New(topo, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- job.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-ran; err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return job, stop
}

// TestProcessingTimersAcrossWallClockJumps: processing time never goes
// back (procClock). When the wall clock jumps back an hour after a timer
// was set 300 ms ahead, the timer fires after at most twice that, not an
// hour later, and never before its time; when the clock is set right
// again, nothing fires twice. When the clock jumps forward past a timer
// set an hour ahead, the timer fires within the recheck period, not an
// hour later.
//
// It runs in a synctest bubble: time there moves only when every goroutine
// of the job waits, so the waits below are exact, however loaded the
// machine, and take no real time.
func TestProcessingTimersAcrossWallClockJumps(t *testing.T) {
	synctest.Test(t, processingTimersAcrossWallClockJumps)
}

func processingTimersAcrossWallClockJumps(t *testing.T) {
	clock := new(jumpyClock)
	in := newFeed()
	events := make(chan timerEvent, 64)
	var b graph.Builder
	src := b.Source("src", 1, in.source())
	b.Operator("timers", 1, func(int) graph.Operator { return &procTimerOp{events: events} },
		[]graph.Input{graph.In(src, graph.Hash(nil))})
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	_, stop := runJob(t, topo, Options{Checkpoints: checkpoint.DefaultConfig(), WallClock: clock.now})
	defer stop()
	noFiring := func(why string) {
		t.Helper()
		for {
			select {
			case e := <-events:
				if e.fired {
					t.Fatalf("%s: timer %d of %s fired at processing time %d (%+d ms)", why, e.at, e.key, e.clock, e.clock-e.at)
				}
			default:
				return
			}
		}
	}
	// marker passes a record through and waits for it: the subtask has
	// read the clock and looked at its timers since.
	marker := func(name string) timerEvent {
		in.push(graph.Record{Key: name, Value: -1})
		for {
			e := testwait.Recv(t, events, 10*time.Second, "marker "+name)
			if e.fired {
				t.Fatalf("timer %d of %s fired at %d while waiting for a marker", e.at, e.key, e.clock)
			}
			if e.key == name {
				return e
			}
		}
	}

	// Backwards. The clock stands still until it has jumped, so that the
	// timer cannot come due first.
	clock.freeze()
	in.push(graph.Record{Key: "a", Value: 300})
	set := testwait.Recv(t, events, 10*time.Second, "the timer of a to be set")
	clock.jump(-time.Hour)
	clock.thaw()
	jumped := time.Now()
	if m := marker("m1"); m.clock < set.clock {
		t.Fatalf("processing time went back from %d to %d with the wall clock", set.clock, m.clock)
	}
	e := testwait.Recv(t, events, 5*time.Second, "the timer of a, the clock an hour back")
	if !e.fired || e.key != "a" || e.at != set.at || e.clock < e.at {
		t.Fatalf("got %+v, want the timer %d of a firing at or after its time", e, set.at)
	}
	if waited := time.Since(jumped); waited < 300*time.Millisecond || waited > 600*time.Millisecond+wallClockRecheck {
		t.Fatalf("the timer 300 ms ahead fired %v after the clock went back an hour", waited)
	}
	clock.jump(time.Hour)
	marker("m2")
	noFiring("the clock set right again")

	// Forwards.
	in.push(graph.Record{Key: "b", Value: float64(time.Hour.Milliseconds())})
	set = testwait.Recv(t, events, 10*time.Second, "the timer of b to be set")
	clock.jump(2 * time.Hour)
	start := time.Now()
	e = testwait.Recv(t, events, 5*time.Second, "the timer of b after the clock jumped two hours forward")
	if !e.fired || e.key != "b" || e.at != set.at || e.clock < e.at {
		t.Fatalf("got %+v, want the timer %d of b firing at or after its time", e, set.at)
	}
	if waited := time.Since(start); waited > wallClockRecheck {
		t.Fatalf("the jump forward was noticed after %v", waited)
	}
	noFiring("after the jumps")
}

// windowSink collects window results.
type windowSink struct {
	graph.BaseOperator
	mu  sync.Mutex
	got []string
}

func (s *windowSink) ProcessRecord(_ int, r *graph.Record) error {
	w := r.Payload.(graph.WindowResult)
	s.mu.Lock()
	s.got = append(s.got, fmt.Sprintf("%s[%d,%d)=%v", r.Key, w.Start, w.End, r.Value))
	s.mu.Unlock()
	return nil
}

// TestEventTimeWindowsIgnoreWallClock runs event-time windows while the
// wall clock jumps back and forth between the records: every window holds
// exactly the records whose timestamps fall in it, once.
func TestEventTimeWindowsIgnoreWallClock(t *testing.T) {
	clock := new(jumpyClock)
	in := newFeed()
	sink := new(windowSink)
	var b graph.Builder
	src := b.Source("src", 1, in.source(), graph.WithWatermarks(0))
	w := b.Operator("window", 2, graph.Window(graph.WindowSpec{Kind: graph.Tumbling, Size: 10 * time.Millisecond, Aggregate: graph.AggCount}),
		[]graph.Input{graph.In(src, graph.Hash(nil))})
	b.Operator("sink", 1, func(int) graph.Operator { return sink }, []graph.Input{graph.In(w, graph.Rebalance())})
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	job, err := New(topo, Options{Checkpoints: checkpoint.DefaultConfig(), WallClock: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- job.Run(context.Background()) }()
	want := map[string]int{}
	jumps := []time.Duration{-time.Hour, 3 * time.Hour, -24 * time.Hour, 365 * 24 * time.Hour, -time.Minute}
	for i := range 500 {
		r := graph.Record{Key: fmt.Sprintf("k%d", i%7), Time: int64(i / 3), Value: 1}
		want[fmt.Sprintf("%s[%d,%d)=", r.Key, r.Time/10*10, r.Time/10*10+10)]++
		in.push(r)
		if i%50 == 49 {
			clock.jump(jumps[i/50%len(jumps)])
		}
	}
	in.end()
	if err := testwait.Recv(t, ran, 30*time.Second, "the job to end"); err != nil {
		t.Fatal(err)
	}
	var wantList []string
	for w, n := range want {
		wantList = append(wantList, fmt.Sprintf("%s%d", w, n))
	}
	slices.Sort(wantList)
	slices.Sort(sink.got)
	if !slices.Equal(sink.got, wantList) {
		t.Fatalf("windows:\n got %v\nwant %v", sink.got, wantList)
	}
}

// TestCheckpointIDsAcrossRestartsAndClockJumps restarts a job three times
// on one checkpoint file, with the wall clock set a year back, then ten
// years forward, and jumping back while it runs: checkpoint ids increase
// within a run and each run's follow the checkpoint it restored, the
// newest written (they come from a persisted counter, invariant I6; one
// that changed nothing completes without a record of its own, so its id
// may be issued again), and periodic checkpoints go on through a jump.
func TestCheckpointIDsAcrossRestartsAndClockJumps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	in := newFeed()
	var b graph.Builder
	src := b.Source("src", 1, in.source())
	b.Operator("count", 2, graph.Count(), []graph.Input{graph.In(src, graph.Hash(nil))})
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	var lastWritten uint64
	for run, offset := range []time.Duration{0, -365 * 24 * time.Hour, 10 * 365 * 24 * time.Hour} {
		store, err := localrecovery.Open(path, localrecovery.Options{})
		if err != nil {
			t.Fatal(err)
		}
		restore, err := store.Completed()
		if err != nil {
			t.Fatal(err)
		}
		if run > 0 && (len(restore) == 0 || restore[0].ID < lastWritten) {
			t.Fatalf("run %d: the store's newest checkpoint is not the last one written (%d)", run, lastWritten)
		}
		clock := new(jumpyClock)
		clock.jump(offset)
		var mu sync.Mutex
		var completed []uint64
		cfg := checkpoint.DefaultConfig()
		cfg.Interval = 10 * time.Millisecond
		job, stop := runJob(t, topo, Options{Checkpoints: cfg, Store: store, Restore: localrecovery.Candidates(store, restore), WallClock: clock.now,
			OnComplete: func(m *checkpoint.Manifest) {
				mu.Lock()
				completed = append(completed, m.ID)
				if m.SameAs == 0 {
					lastWritten = m.ID
				}
				mu.Unlock()
			}})
		count := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(completed)
		}
		waitUntil := func(n int) {
			t.Helper()
			testwait.For(t, 20*time.Second, fmt.Sprintf("run %d: %d checkpoints completed", run, n), func() bool {
				if count() >= n {
					return true
				}
				in.push(graph.Record{Key: fmt.Sprintf("k%d", count()), Value: 1})
				return false
			})
		}
		waitUntil(3)
		clock.jump(-6 * time.Hour) // while running
		waitUntil(6)
		stop()
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
		if run > 0 {
			// The newest by id; it may be newer than the last one
			// notified, if the stop overtook the notice (I7).
			if m := job.RestoredFrom(); m == nil || m.ID != restore[0].ID {
				t.Fatalf("run %d restored %v, want checkpoint %d", run, m, restore[0].ID)
			}
			if completed[0] <= restore[0].ID {
				t.Fatalf("run %d restored checkpoint %d, then completed %d", run, restore[0].ID, completed[0])
			}
		}
		mu.Lock()
		for i := 1; i < len(completed); i++ {
			if completed[i] <= completed[i-1] {
				t.Fatalf("run %d: checkpoint ids %v do not increase", run, completed)
			}
		}
		mu.Unlock()
	}
}
