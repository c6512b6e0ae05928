package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/localrecovery"
)

// Options configure a Job. Zero values mean the defaults noted.
type Options struct {
	// Checkpoints configures checkpointing; a zero Interval takes
	// checkpoints only on request. The zero Config is invalid: start from
	// checkpoint.DefaultConfig.
	Checkpoints checkpoint.Config
	// Store keeps checkpoints; default an in-memory store retaining 3.
	Store checkpoint.Store
	// Restore lists completed checkpoints to start from, newest first,
	// each with the store that holds it: localrecovery.Choose chooses and
	// verifies them. The first whose state reads, verifies and decodes is
	// restored: state, timers and watermarks come back and sources resume
	// at its offsets. Run falls back to the next only past damage, each
	// logged with its reason; any other failure fails Run, and so does
	// damage in every one (localrecovery.Fallback, invariant I9). Run forgets
	// them once it has read them.
	Restore []localrecovery.Candidate
	// BatchSize is the most records per batch; default 256.
	BatchSize int
	// Linger is the longest a partial batch waits before it is sent;
	// default 5 ms.
	Linger time.Duration
	// Credits is the number of batches in flight per channel; default 4.
	Credits int
	// Incremental makes snapshots hold only the keyed state changed since
	// the subtask's last completed one; MaxChain (default 10) is the chain
	// length at which a whole snapshot is taken again.
	Incremental bool
	MaxChain    int
	// Logger receives checkpoint and failure messages; default slog.Default.
	Logger *slog.Logger
	// OnComplete and OnAbort, if set, are called from the coordinator's
	// goroutine after a checkpoint completes or aborts. They must not block.
	OnComplete func(*checkpoint.Manifest)
	OnAbort    func(checkpoint.Abort)
	// OnRejected, if set, is called on a subtask's goroutine with a record
	// its operator rejected (graph.RecordError) and the error: it keeps or
	// drops the record and returns nil, and the subtask goes on with the
	// next, or returns an error, which fails the job. Unset, a rejected
	// record fails the job. Rejected records are counted either way
	// (TaskMetrics.Rejected). A crash replays the input since the last
	// checkpoint, so a record may be rejected again after a restore.
	OnRejected func(id checkpoint.TaskID, r *graph.Record, err error) error
	// OnAligned, if set, is called on a subtask's goroutine when one of
	// its blocking barrier alignments ends (Aligned): a subtask with one
	// input never aligns. It must not block.
	OnAligned func(Aligned)
	// Hold, if set, is asked before each read of a source: a non-nil
	// channel makes every source read nothing until it is closed, while
	// checkpoints and other control messages go on. A sink that cannot
	// deliver its output holds the input back this way rather than let
	// output pile up in memory (see mqttio.Backlog).
	Hold func() <-chan struct{}
	// WallClock is the wall clock processing time is read from
	// (processing-time timers and windows); default time.Now. It may jump
	// either way, as a device's clock does when NTP corrects it: a
	// processing-time timer fires once the clock reads its time or later,
	// never before, and a jump forward is noticed within
	// wallClockRecheck. Nothing else reads it: intervals, timeouts and
	// checkpoint statistics use the monotonic clock, checkpoint ids a
	// persisted counter, event time the records' own timestamps.
	WallClock func() time.Time
	// ClockFloor is the earliest the wall clock can read and be trusted
	// (mqttio.ClockFloor): before it, it was never set, and neither idle
	// sources (graph.Idleness) nor restored watermarks follow it.
	ClockFloor time.Time
	// MaxFuture, if above 0, is how far ahead of the wall clock a
	// restored watermark may be: one further ahead, which a reading from
	// a device clock gone wrong put there before its time was bounded,
	// is brought back to the clock when the job starts, and logged.
	MaxFuture time.Duration
}

func (o *Options) setDefaults() {
	if o.Store == nil {
		o.Store = checkpoint.NewMemStore(3)
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 256
	}
	if o.Linger <= 0 {
		o.Linger = 5 * time.Millisecond
	}
	if o.Credits <= 0 {
		o.Credits = 4
	}
	if o.MaxChain <= 0 {
		o.MaxChain = 10
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.WallClock == nil {
		o.WallClock = time.Now
	}
}

// Job runs a topology with goroutines. Create it with New, run it once with
// Run.
type Job struct {
	opts  Options
	plan  *plan
	start time.Time
	pool  sync.Pool

	mailboxes []chan delivery
	inbound   [][]*chanLink // per task, per input channel
	controls  []*controlQueue

	acks      chan checkpoint.Ack
	declines  chan declineMsg
	finished  chan checkpoint.TaskID
	requests  chan request
	finalized chan finalizeResult

	restoredFrom atomic.Pointer[checkpoint.Manifest]
	view         coordinatorView

	records records // owned by the coordinator's goroutine

	done     chan struct{}
	stopOnce sync.Once
	errMu    sync.Mutex
	err      error
	async    sync.WaitGroup // asynchronous snapshot phases and store writes
}

// New prepares topo to run. It checks the options; state is restored when
// Run starts.
func New(topo *graph.Topology, opts Options) (*Job, error) {
	opts.setDefaults()
	if err := opts.Checkpoints.Validate(); err != nil {
		return nil, err
	}
	j := &Job{
		opts:      opts,
		acks:      make(chan checkpoint.Ack, 64),
		declines:  make(chan declineMsg, 64),
		finished:  make(chan checkpoint.TaskID, 64),
		requests:  make(chan request),
		finalized: make(chan finalizeResult, 1),
		done:      make(chan struct{}),
		start:     time.Now(),
	}
	j.pool.New = func() any { return &graph.Batch{Records: make([]graph.Record, 0, opts.BatchSize)} }
	j.plan = build(topo, taskConfig{mode: opts.Checkpoints.Mode, batchSize: opts.BatchSize,
		incremental: opts.Incremental, maxChain: opts.MaxChain, alignmentTimeout: opts.Checkpoints.AlignmentTimeout, clockFloor: opts.ClockFloor.UnixMilli(),
		onRejected: opts.OnRejected, onAligned: opts.OnAligned, backlog: j.inputBacklog}, j)
	n := len(j.plan.tasks)
	j.mailboxes = make([]chan delivery, n)
	j.inbound = make([][]*chanLink, n)
	j.controls = make([]*controlQueue, n)
	for i, ins := range j.plan.inputs {
		j.mailboxes[i] = make(chan delivery, len(ins)*(opts.Credits+1))
		j.inbound[i] = make([]*chanLink, len(ins))
		j.controls[i] = &controlQueue{signal: make(chan struct{}, 1)}
	}
	j.plan.connect(func(from *task, to, ch int) link {
		l := &chanLink{ch: ch, credits: make(chan struct{}, opts.Credits), mailbox: j.mailboxes[to], done: j.done,
			sender: from.metrics, ctl: j.controls[to]}
		j.inbound[to][ch] = l
		return l
	})
	return j, nil
}

// Run restores state if asked, runs the job until every subtask has
// finished, ctx is done, or the job fails, and returns the first failure
// (nil when the input ended or ctx was cancelled).
func (j *Job) Run(ctx context.Context) error {
	rs, err := j.load()
	if err != nil {
		return err
	}
	if err := j.plan.open(rs); err != nil {
		j.closeAll()
		return err
	}
	if rs != nil {
		j.bringBackWatermarks()
	}
	lastID, err := j.opts.Store.LastID()
	if m := j.restoredFrom.Load(); err == nil && m != nil && m.ID > lastID {
		lastID = m.ID // a checkpoint from another store
	}
	if err != nil {
		j.closeAll()
		return fmt.Errorf("reading the checkpoint id counter: %w", err)
	}
	var tasks []checkpoint.TaskID
	for _, t := range j.plan.tasks {
		tasks = append(tasks, t.id)
	}
	coord, err := checkpoint.NewCoordinator(j.opts.Checkpoints, tasks, lastID)
	if err != nil {
		j.closeAll()
		return err
	}
	var running sync.WaitGroup
	for i, t := range j.plan.tasks {
		running.Add(1)
		go func() {
			defer running.Done()
			j.runTask(i, t)
		}()
	}
	allDone := make(chan struct{})
	go func() {
		running.Wait()
		close(allDone)
	}()
	coordDone := make(chan struct{})
	go func() {
		defer close(coordDone)
		j.coordinate(coord)
	}()

	select {
	case <-allDone:
	case <-ctx.Done():
	case <-j.done:
	}
	j.stop(nil)
	<-allDone
	<-coordDone
	j.async.Wait()
	j.errMu.Lock()
	defer j.errMu.Unlock()
	return j.err
}

// RestoredFrom is the checkpoint Run restored, or nil. It is set once Run
// has started the subtasks.
func (j *Job) RestoredFrom() *checkpoint.Manifest { return j.restoredFrom.Load() }

// Metrics returns the live counters of every subtask.
func (j *Job) Metrics() map[checkpoint.TaskID]*TaskMetrics {
	m := make(map[checkpoint.TaskID]*TaskMetrics, len(j.plan.tasks))
	for _, t := range j.plan.tasks {
		m[t.id] = t.metrics
	}
	return m
}

// stop ends the job, recording err as its failure if it is the first.
func (j *Job) stop(err error) {
	if err != nil {
		j.errMu.Lock()
		if j.err == nil {
			j.err = err
			j.opts.Logger.Error("job failed", "err", err)
		}
		j.errMu.Unlock()
	}
	j.stopOnce.Do(func() { close(j.done) })
}

func (j *Job) closeAll() {
	for _, t := range j.plan.tasks {
		j.closeTask(t)
	}
}

// closeTask releases the subtask's operator or source, if it was opened.
func (j *Job) closeTask(t *task) {
	var err error
	switch {
	case t.op != nil:
		err = t.op.Close()
	case t.src != nil:
		err = t.src.Close()
	}
	if err != nil {
		j.opts.Logger.Warn("closing subtask", "task", t.id.String(), "err", err)
	}
}
