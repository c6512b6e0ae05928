package runtime

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// turnstile is an operator that lets each record of input 1 through only
// when the test turns it: it says when a record waits (at), then blocks
// until the test sends on turn. Records of input 0 pass at once. Its
// snapshots wait for hold, when set, to be closed.
type turnstile struct {
	graph.BaseOperator
	at   chan<- struct{}
	turn <-chan struct{}
	hold <-chan struct{}
}

func (o *turnstile) ProcessRecord(input int, _ *graph.Record) error {
	if input == 1 {
		o.at <- struct{}{}
		<-o.turn
	}
	return nil
}

func (o *turnstile) SnapshotState(uint64) ([]byte, error) {
	if o.hold != nil {
		<-o.hold
	}
	return nil, nil
}

// stalling is a feed whose next Read, after stall, blocks until resume:
// a source busy reading, which handles no trigger meanwhile.
type stalling struct {
	*feed
	mu      sync.Mutex
	wait    chan struct{}
	reading chan struct{} // receives when a Read blocks
}

func (s *stalling) stall() {
	s.mu.Lock()
	s.wait = make(chan struct{})
	s.mu.Unlock()
	s.signal()
}

func (s *stalling) resume() {
	s.mu.Lock()
	if s.wait != nil {
		close(s.wait)
		s.wait = nil
	}
	s.mu.Unlock()
}

func (s *stalling) Read(buf []graph.Record) (int, error) {
	s.mu.Lock()
	wait := s.wait
	s.mu.Unlock()
	if wait != nil {
		s.reading <- struct{}{}
		<-wait
	}
	return s.feed.Read(buf)
}

// gateJob runs quick, late -> gate (two inputs, parallelism 1), both
// sources with watermarks, with opts' callbacks. The caller feeds the
// sources, turns the gate and, if the gate holds its snapshots, releases
// them.
type gateJob struct {
	job     *Job
	quick   *feed
	late    *stalling
	at      chan struct{}
	turn    chan struct{}
	release func()
	ran     chan error
}

func startGateJob(t *testing.T, holdSnapshots bool, opts Options) *gateJob {
	t.Helper()
	g := &gateJob{quick: newFeed(), late: &stalling{feed: newFeed(), reading: make(chan struct{}, 1)},
		at: make(chan struct{}, 16), turn: make(chan struct{}), ran: make(chan error, 1)}
	var hold chan struct{}
	if holdSnapshots {
		hold = make(chan struct{})
	}
	g.release = sync.OnceFunc(func() {
		if hold != nil {
			close(hold)
		}
	})
	var b graph.Builder
	q := b.Source("quick", 1, g.quick.source(), graph.WithWatermarks(0))
	l := b.Source("late", 1, func(int) graph.Source { return g.late }, graph.WithWatermarks(0))
	b.Operator("gate", 1, func(int) graph.Operator { return &turnstile{at: g.at, turn: g.turn, hold: hold} },
		[]graph.Input{graph.In(q, graph.Forward()), graph.In(l, graph.Forward())})
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if opts.Checkpoints == (checkpoint.Config{}) {
		opts.Checkpoints = checkpoint.Config{Mode: checkpoint.ExactlyOnce, Timeout: time.Minute, MaxConcurrent: 1}
	}
	if g.job, err = New(topo, opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { g.ran <- g.job.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		g.release()
		g.late.resume()
		close(g.turn) // every record still to pass passes
		<-g.ran
	})
	return g
}

// acked names the subtasks that acknowledged checkpoint id, in flight,
// per Status.
func (g *gateJob) acked(id uint64) []string {
	for _, p := range g.job.Status().Pending {
		if p.ID == id {
			var out []string
			for _, t := range p.Acked {
				out = append(out, t.String())
			}
			return out
		}
	}
	return nil
}

// gate is the gate's status.
func (g *gateJob) gate() TaskStatus { return g.job.Status().Tasks[2] }

// TestAcknowledgementsShowAsTheyCome: while one subtask's snapshot is
// held, Status lists the acknowledgements of the others, each with its
// time, rather than none until all are in.
func TestAcknowledgementsShowAsTheyCome(t *testing.T) {
	g := startGateJob(t, true, Options{})
	id, err := g.job.TriggerCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "both sources' acknowledgements in the status", func() bool {
		return slices.Equal(g.acked(id), []string{"late/0", "quick/0"}) // in the coordinator's order
	})
	st := g.job.Status()
	p := st.Pending[0]
	for i, at := range p.AckedAt {
		if at < p.Triggered || at > st.Uptime {
			t.Fatalf("%s acknowledged at %v, outside trigger %v and now %v", p.Acked[i], at, p.Triggered, st.Uptime)
		}
	}
	g.release()
	testwait.For(t, 10*time.Second, "the checkpoint to complete", func() bool { return g.job.Status().Completed == 1 })
	if n := len(g.job.Status().Pending); n != 0 {
		t.Fatalf("%d checkpoints still in flight after the completion", n)
	}
}

// alignOnQuick starts a checkpoint while late is busy reading: quick's
// barrier reaches the gate, which aligns, waiting for late's. It returns
// the checkpoint's id once the gate is aligning.
func (g *gateJob) alignOnQuick(t *testing.T) uint64 {
	t.Helper()
	g.late.stall()
	testwait.Recv(t, g.late.reading, 10*time.Second, "late to be busy reading")
	id, err := g.job.TriggerCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the gate to align", func() bool {
		a := g.gate().Alignment
		return a.ID == id && a.Blocking
	})
	return id
}

// TestOnAlignedNamesTheInputWaitedFor: the gate aligns a checkpoint with
// quick's barrier in and late's behind four records it passes one by
// one; when the alignment ends, OnAligned says it waited for late, with
// those records as its backlog.
func TestOnAlignedNamesTheInputWaitedFor(t *testing.T) {
	aligned := make(chan Aligned, 4)
	g := startGateJob(t, false, Options{OnAligned: func(a Aligned) { aligned <- a }})
	id := g.alignOnQuick(t)
	g.late.push(graph.Record{Key: "a", Time: 1}, graph.Record{Key: "b", Time: 2}, graph.Record{Key: "c", Time: 3}, graph.Record{Key: "d", Time: 4})
	g.late.resume() // one batch of the four, then the barrier
	for range 4 {
		testwait.Recv(t, g.at, 10*time.Second, "the gate to hold a record of late's")
		if len(aligned) != 0 {
			t.Fatalf("an alignment reported before it ended: %+v", <-aligned)
		}
		g.turn <- struct{}{}
	}
	a := testwait.Recv(t, aligned, 10*time.Second, "the alignment's end")
	if a.ID != id || a.Task.String() != "gate/0" || a.WaitedFor.String() != "late/0" || a.Abandoned || a.TimedOut {
		t.Fatalf("aligned %+v: want checkpoint %d of gate/0 waiting for late/0", a, id)
	}
	if a.Backlog != 4 || a.Duration <= 0 || a.Buffered != 0 {
		t.Fatalf("aligned %+v: want a backlog of the 4 records before late's barrier, a duration, nothing buffered", a)
	}
	testwait.For(t, 10*time.Second, "the checkpoint to complete", func() bool { return g.job.Status().Completed == 1 })
	if len(aligned) != 0 {
		t.Fatalf("one alignment reported twice: %+v", <-aligned)
	}
}

// TestOnAlignedAbandoned: an alignment whose checkpoint expires is
// reported, as abandoned, when the subtask hears of the abort.
func TestOnAlignedAbandoned(t *testing.T) {
	aligned := make(chan Aligned, 4)
	g := startGateJob(t, false, Options{OnAligned: func(a Aligned) { aligned <- a },
		Checkpoints: checkpoint.Config{Mode: checkpoint.ExactlyOnce, Timeout: 300 * time.Millisecond, MaxConcurrent: 1, TolerableFailures: -1}})
	id := g.alignOnQuick(t)
	a := testwait.Recv(t, aligned, 10*time.Second, "the abandoned alignment")
	// The status, published after the coordinator told the subtasks of
	// the abort, may come after the report (under qemu it did).
	var st Status
	if !testwait.Poll(10*time.Second, func() bool {
		st = g.job.Status()
		return st.Failed == 1 && len(st.History) == 1 && g.gate().Alignment.ID == 0
	}) {
		t.Fatalf("after the abort: %d failed, history %+v, gate aligning %d", st.Failed, st.History, g.gate().Alignment.ID)
	}
	expired := st.History[0].Triggered + 300*time.Millisecond
	if a.ID != id || !a.Abandoned || a.WaitedFor.String() != "late/0" || a.Started+a.Duration < expired {
		t.Fatalf("aligned %+v: want checkpoint %d abandoned after its expiry at %v, waiting for late/0", a, id, expired)
	}
}

// TestWatermarksInStatus: a source's watermark trails its newest event
// time, the operator's is the least of its inputs', and each is
// MinWatermark before any record.
func TestWatermarksInStatus(t *testing.T) {
	g := startGateJob(t, false, Options{})
	wm := func() (quick, late, gate int64) {
		st := g.job.Status()
		return st.Tasks[0].Watermark, st.Tasks[1].Watermark, st.Tasks[2].Watermark
	}
	if q, l, op := wm(); q != graph.MinWatermark || l != graph.MinWatermark || op != graph.MinWatermark {
		t.Fatalf("watermarks before any record: %d %d %d", q, l, op)
	}
	g.quick.push(graph.Record{Key: "a", Time: 5000})
	testwait.For(t, 10*time.Second, "quick's watermark", func() bool {
		q, l, op := wm()
		return q == 4999 && l == graph.MinWatermark && op == graph.MinWatermark
	})
	g.late.push(graph.Record{Key: "b", Time: 3000})
	testwait.Recv(t, g.at, 10*time.Second, "the gate to hold late's record")
	g.turn <- struct{}{}
	testwait.For(t, 10*time.Second, "the gate's watermark, the least of its inputs'", func() bool {
		q, l, op := wm()
		return q == 4999 && l == 2999 && op == 2999
	})
}
