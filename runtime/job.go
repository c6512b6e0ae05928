package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
)

// Options configure a Job. Zero values mean the defaults noted.
type Options struct {
	// Checkpoints configures checkpointing; a zero Interval takes
	// checkpoints only on request. The zero Config is invalid: start from
	// checkpoint.DefaultConfig.
	Checkpoints checkpoint.Config
	// Store keeps checkpoints; default an in-memory store retaining 3.
	Store checkpoint.Store
	// Restore lists completed checkpoints to start from, newest first. The
	// first whose state reads, verifies and decodes is restored: state,
	// timers and watermarks come back and sources resume at its offsets.
	// Each one that fails is logged with its reason; if all fail, Run fails
	// rather than start from nothing (invariant I9).
	Restore []*checkpoint.Manifest
	// RestoreStore, if set, is where Restore's state is read from (a
	// savepoint); default Store.
	RestoreStore checkpoint.Store
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

// delivery is a batch on its way to input channel ch of a subtask.
type delivery struct {
	ch    int
	batch *graph.Batch
	// free: the batch came without a credit (a partial batch sent with an
	// unaligned barrier), so none goes back for it.
	free bool
}

// chanLink is a link between goroutines, with credit-based flow control.
type chanLink struct {
	ch      int
	credits chan struct{} // a token per batch in flight
	mailbox chan delivery // the receiver's, shared by all its channels
	done    <-chan struct{}
	sender  *TaskMetrics
	ctl     *controlQueue // the receiver's, for unaligned barriers
	// queued counts the records sent and not yet processed: the channel's
	// backlog, for status displays.
	queued atomic.Int64
}

func (l *chanLink) send(b *graph.Batch, reserved bool) error {
	if !reserved {
		if err := l.acquire(); err != nil {
			return err
		}
	}
	l.queued.Add(int64(len(b.Records)))
	l.mailbox <- delivery{ch: l.ch, batch: b} // has room: one slot per credit
	return nil
}

// acquire takes a credit, waiting (counted as backpressure) while there is
// none.
func (l *chanLink) acquire() error {
	select {
	case l.credits <- struct{}{}:
		return nil
	default:
	}
	start := time.Now()
	l.sender.waitingSince.Store(start.UnixNano())
	defer func() {
		l.sender.waitingSince.Store(0)
		l.sender.BackpressureNanos.Add(int64(time.Since(start)))
	}()
	select {
	case l.credits <- struct{}{}:
		return nil
	case <-l.done:
		return errStopped
	}
}

// full reports whether the link has no credit left.
func (l *chanLink) full() bool { return len(l.credits) == cap(l.credits) }

// barrier hands an unaligned barrier to the receiver's control queue,
// which the receiver drains before it processes another batch.
func (l *chanLink) barrier(b graph.Barrier, mark uint64, partial *graph.Batch) bool {
	took := false
	if partial != nil {
		// The mailbox has a slot per channel beyond the credits for this.
		select {
		case l.mailbox <- delivery{ch: l.ch, batch: partial, free: true}:
			l.queued.Add(int64(len(partial.Records)))
			took = true
		default:
		}
	}
	l.ctl.push(controlMsg{kind: ctlBarrier, barrier: b, ch: l.ch, mark: mark})
	return took
}

// controlKind is a message from the coordinator (or, for an unaligned
// barrier, an upstream subtask) to a subtask.
type controlKind uint8

const (
	ctlTrigger controlKind = iota
	ctlComplete
	ctlAbort
	ctlBarrier
)

type controlMsg struct {
	kind    controlKind
	barrier graph.Barrier
	id      uint64
	// ch and mark, for ctlBarrier: the receiver's input channel and the
	// records sent on it before the barrier.
	ch   int
	mark uint64
}

// controlQueue never blocks its sender: the coordinator must not wait on a
// subtask stuck in backpressure.
type controlQueue struct {
	mu     sync.Mutex
	items  []controlMsg
	signal chan struct{}
}

func (q *controlQueue) push(m controlMsg) {
	q.mu.Lock()
	q.items = append(q.items, m)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *controlQueue) drain() []controlMsg {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}

type declineMsg struct {
	task   checkpoint.TaskID
	id     uint64
	reason string
	by     uint64 // set when id was overtaken by checkpoint by
}

// finalizeResult is the outcome of writing a completion record: written
// is the manifest, when one was written.
type finalizeResult struct {
	id      uint64
	err     error
	written *checkpoint.Manifest
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
	held      []*held // per task: batches received and not processed

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
		incremental: opts.Incremental, maxChain: opts.MaxChain, alignmentTimeout: opts.Checkpoints.AlignmentTimeout,
		onRejected: opts.OnRejected}, j)
	n := len(j.plan.tasks)
	j.mailboxes = make([]chan delivery, n)
	j.inbound = make([][]*chanLink, n)
	j.controls = make([]*controlQueue, n)
	j.held = make([]*held, n)
	for i, ins := range j.plan.inputs {
		j.mailboxes[i] = make(chan delivery, len(ins)*(opts.Credits+1))
		j.inbound[i] = make([]*chanLink, len(ins))
		j.controls[i] = &controlQueue{signal: make(chan struct{}, 1)}
		j.held[i] = &held{stash: make([][]*graph.Batch, len(ins)), credited: make(map[*graph.Batch]bool)}
	}
	j.plan.connect(func(from *task, to, ch int) link {
		l := &chanLink{ch: ch, credits: make(chan struct{}, opts.Credits), mailbox: j.mailboxes[to], done: j.done,
			sender: from.metrics, ctl: j.controls[to]}
		j.inbound[to][ch] = l
		return l
	})
	return j, nil
}

// env implementation.

func (j *Job) now() time.Duration { return time.Since(j.start) }

func (j *Job) wallMillis() int64 { return j.opts.WallClock().UnixMilli() }

// wallClockRecheck is the longest a subtask with processing-time timers
// waits before it reads the wall clock again: a timer's wait is measured on
// the monotonic clock, so a jump of the wall clock forward would otherwise
// go unnoticed until the wait ends.
const wallClockRecheck = time.Second

func (j *Job) newBatch() *graph.Batch { return j.pool.Get().(*graph.Batch) }

func (j *Job) recycle(b *graph.Batch) {
	b.Reset()
	j.pool.Put(b)
}

func (j *Job) decline(t *task, id uint64, reason string) {
	select {
	case j.declines <- declineMsg{task: t.id, id: id, reason: reason}:
	case <-j.done:
	}
}

func (j *Job) overtaken(t *task, id, by uint64) {
	select {
	case j.declines <- declineMsg{task: t.id, id: id, by: by}:
	case <-j.done:
	}
}

// snapshot runs the asynchronous phase on its own goroutine: encode and
// store (storeSnapshot), then acknowledge.
func (j *Job) snapshot(t *task, req snapshotRequest) {
	j.async.Add(1)
	go func() {
		defer j.async.Done()
		start := time.Now()
		ack, err := storeSnapshot(j.opts.Store, t, req)
		if err != nil {
			j.decline(t, req.id, "storing snapshot: "+err.Error())
			return
		}
		if req.inflight != nil {
			var r inflightResult
			select {
			case r = <-req.inflight:
			case <-j.done:
				return
			}
			if ok, reason := storeChannelState(j.opts.Store, &ack, r); !ok {
				if reason != "" {
					j.decline(t, req.id, reason)
				}
				return
			}
		}
		ack.Stats.Async = time.Since(start)
		select {
		case j.acks <- ack:
		case <-j.done:
		}
	}()
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
	if m := j.restoredFrom.Load(); m != nil && j.opts.RestoreStore == nil {
		j.records.written(m)
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

// ErrNothingRestored is wrapped by Run's error when every checkpoint of
// Options.Restore failed verification.
var ErrNothingRestored = errors.New("no checkpoint could be restored")

// load reads the first usable checkpoint of Options.Restore: it falls back
// to an older one only past damage (checkpoint.ErrCorrupt,
// graph.ErrCorruptSnapshot); any other failure is the restore's.
func (j *Job) load() ([]taskRestore, error) {
	var errs []error
	for _, m := range j.opts.Restore {
		from := j.opts.RestoreStore
		if from == nil {
			from = j.opts.Store
		}
		rs, err := j.plan.load(m, from)
		if err == nil {
			if from != j.opts.Store {
				breakChains(rs)
			}
			j.restoredFrom.Store(m)
			var inflight int64
			for _, a := range m.Subtasks {
				inflight += a.Stats.InFlightRecords
			}
			j.opts.Logger.Info("restoring checkpoint", "id", m.ID, "mode", m.Mode.String(), "in_flight_records", inflight)
			return rs, nil
		}
		errs = append(errs, fmt.Errorf("checkpoint %d: %w", m.ID, err))
		if !errors.Is(err, checkpoint.ErrCorrupt) && !errors.Is(err, graph.ErrCorruptSnapshot) {
			// Not damage (remote storage unreachable, a changed graph): an
			// older checkpoint would restore older state for no good
			// reason, so the start fails and a retry tries this one again.
			return nil, fmt.Errorf("checkpoint %d cannot be restored: %w", m.ID, err)
		}
		j.opts.Logger.Error("checkpoint cannot be restored; trying an older one", "id", m.ID, "err", err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrNothingRestored, errors.Join(errs...))
	}
	return nil, nil
}

// RestoredFrom is the checkpoint Run restored, or nil. It is set once Run
// has started the subtasks.
func (j *Job) RestoredFrom() *checkpoint.Manifest { return j.restoredFrom.Load() }

// request asks the coordinator's loop for a checkpoint now.
type request struct {
	savepoint bool
	reply     chan uint64
}

// TriggerCheckpoint starts a checkpoint now and returns its id. It fails
// when the job is not running or a subtask has finished.
func (j *Job) TriggerCheckpoint(ctx context.Context) (uint64, error) {
	return j.trigger(ctx, false)
}

// TriggerSavepoint is TriggerCheckpoint for a savepoint: a checkpoint
// aligned in every mode, which holds no records in flight and so restores
// under another parallelism too.
func (j *Job) TriggerSavepoint(ctx context.Context) (uint64, error) {
	return j.trigger(ctx, true)
}

func (j *Job) trigger(ctx context.Context, savepoint bool) (uint64, error) {
	reply := make(chan uint64, 1)
	select {
	case j.requests <- request{savepoint: savepoint, reply: reply}:
	case <-j.done:
		return 0, errStopped
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if id := <-reply; id != 0 {
		return id, nil
	}
	return 0, errors.New("no checkpoint can be taken: a subtask has finished or the job failed")
}

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

// runTask is the goroutine of one subtask.
func (j *Job) runTask(i int, t *task) {
	defer j.closeTask(t)
	defer func() {
		if r := recover(); r != nil {
			j.stop(fmt.Errorf("%s: panic: %v\n%s", t.id, r, debug.Stack()))
		}
	}()
	var err error
	if t.src != nil {
		err = j.runSource(i, t)
	} else {
		err = j.runOperator(i, t)
	}
	if errors.Is(err, errStopped) {
		return
	}
	if err != nil {
		j.stop(err)
		return
	}
	if t.finished {
		select {
		case j.finished <- t.id:
		case <-j.done:
		}
	}
}

func (j *Job) runSource(i int, t *task) error {
	ctl := j.controls[i]
	buf := make([]graph.Record, j.opts.BatchSize)
	for !t.finished {
		select {
		case <-ctl.signal:
			if err := j.handleControl(t, ctl); err != nil {
				return err
			}
		case <-j.done:
			return errStopped
		default:
		}
		if err := j.awaitOutput(t); err != nil {
			return err
		}
		if hold := j.holding(); hold != nil {
			t.flushAll()
			if t.err != nil {
				return t.err
			}
			select {
			case <-hold:
			case <-ctl.signal:
				if err := j.handleControl(t, ctl); err != nil {
					return err
				}
			case <-j.done:
				return errStopped
			}
			continue
		}
		had, err := t.readSource(buf)
		if err != nil {
			return err
		}
		if had || t.finished {
			continue
		}
		t.flushAll()
		if t.err != nil {
			return t.err
		}
		select {
		case <-t.src.Ready():
		case <-ctl.signal:
			if err := j.handleControl(t, ctl); err != nil {
				return err
			}
		case <-j.done:
			return errStopped
		}
	}
	return nil
}

// holding returns Options.Hold's channel: non-nil while sources must not
// read.
func (j *Job) holding() <-chan struct{} {
	if j.opts.Hold == nil {
		return nil
	}
	return j.opts.Hold()
}

// awaitOutput waits, before t processes a batch or reads its source, until
// every output channel has room for one more batch, reserving the credit.
// Waiting here, between batches, rather than in the middle of one, t keeps
// handling control messages: a checkpoint's trigger or an unaligned barrier
// does not wait for the backpressure to ease.
func (j *Job) awaitOutput(t *task) error {
	ctl := j.controls[t.index]
	for _, o := range t.outputs {
		for _, c := range o.channels {
			l := c.link.(*chanLink)
			if c.reserved || !l.full() {
				continue
			}
			start := time.Now()
			t.metrics.waitingSince.Store(start.UnixNano())
			err := j.reserve(t, c, l, ctl)
			t.metrics.waitingSince.Store(0)
			t.metrics.BackpressureNanos.Add(int64(time.Since(start)))
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// reserve takes a credit of l for c's next send, handling t's control
// messages while it waits.
func (j *Job) reserve(t *task, c *outChannel, l *chanLink, ctl *controlQueue) error {
	for {
		select {
		case l.credits <- struct{}{}:
			c.reserved = true
			return nil
		case <-ctl.signal:
			if err := j.handleControl(t, ctl); err != nil {
				return err
			}
		case <-j.done:
			return errStopped
		}
	}
}

// held is what an operator subtask holds of its input: per channel, the
// batches received and not processed yet (blocked by an alignment, or
// taken early to capture channel state), oldest first; and those whose
// credit went back early because they are captured.
type held struct {
	stash    [][]*graph.Batch
	credited map[*graph.Batch]bool
}

// queued implements env.
func (j *Job) queued(t *task, ch int) []*graph.Batch { return j.held[t.index].stash[ch] }

func (j *Job) runOperator(i int, t *task) error {
	mailbox, ctl, h := j.mailboxes[i], j.controls[i], j.held[i]
	stash := h.stash
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	defer linger.Stop()
	armed := false
	procTimer := time.NewTimer(time.Hour) // the next processing-time timer
	procTimer.Stop()
	defer procTimer.Stop()
	alignTimer := time.NewTimer(time.Hour) // the alignment timeout
	alignTimer.Stop()
	defer alignTimer.Stop()
	if err := t.replay(); err != nil {
		return err
	}
	for !t.finished {
		if err := j.drainStash(t); err != nil {
			return err
		}
		if t.finished {
			break
		}
		next, pending, err := t.fireProcessingTimers()
		if err != nil {
			return err
		}
		if !armed && t.hasPartial() { // after the timers: they may emit
			linger.Reset(j.opts.Linger)
			armed = true
		}
		if pending {
			procTimer.Reset(min(time.Duration(max(0, next-j.wallMillis()))*time.Millisecond, wallClockRecheck))
		}
		if deadline, ok := t.handler.Deadline(); ok {
			alignTimer.Reset(max(deadline-j.now(), 0))
		}
		select {
		case <-procTimer.C:
		case <-alignTimer.C:
			if err := t.tick(); err != nil {
				return err
			}
		case d := <-mailbox:
			// An unaligned barrier sent before this batch is handled first;
			// the batch is received after the wait for room downstream, so
			// that a capture begun meanwhile takes it.
			if err := j.handleControl(t, ctl); err != nil {
				return err
			}
			if err := j.awaitOutput(t); err != nil {
				return err
			}
			j.received(t, d)
			if t.handler.Blocked(d.ch) || len(stash[d.ch]) > 0 || t.capture != nil {
				j.hold(t, d)
				continue
			}
			if err := j.deliver(t, d.ch, d.batch); err != nil {
				return err
			}
		case <-ctl.signal:
			if err := j.handleControl(t, ctl); err != nil {
				return err
			}
		case <-linger.C:
			armed = false
			t.flushAll()
			if t.err != nil {
				return t.err
			}
		case <-j.done:
			return errStopped
		}
	}
	return nil
}

// hold stashes a received batch: behind a blocked channel (counted as
// buffered by the alignment), or, while channel state is captured, to
// process in order later; a batch that is captured whole returns its credit
// at once, so the sender's records in flight reach the capture sooner.
func (j *Job) hold(t *task, d delivery) {
	h := j.held[t.index]
	h.stash[d.ch] = append(h.stash[d.ch], d.batch)
	switch {
	case t.handler.Blocked(d.ch):
		t.noteBuffered(d.batch)
	case t.fullyCaptured(d.ch) && !h.credited[d.batch]:
		h.credited[d.batch] = true
		<-j.inbound[t.index][d.ch].credits
	}
}

// received counts d as received by t; a batch that came without a credit
// is noted, so that none goes back for it.
func (j *Job) received(t *task, d delivery) {
	if d.free {
		j.held[t.index].credited[d.batch] = true
	}
	t.receive(d.ch, d.batch)
}

// absorb takes every batch waiting in the mailbox while channel state is
// captured, so the capture does not wait for the subtask to process them.
func (j *Job) absorb(t *task) error {
	mailbox, ctl := j.mailboxes[t.index], j.controls[t.index]
	for t.capture != nil {
		select {
		case d := <-mailbox:
			if err := j.handleControl(t, ctl); err != nil {
				return err
			}
			j.received(t, d)
			j.hold(t, d)
		default:
			return nil
		}
	}
	return nil
}

// deliver processes a batch, then returns its credit (unless it went back
// early) and recycles it.
func (j *Job) deliver(t *task, ch int, b *graph.Batch) error {
	err := t.process(ch, b)
	l := j.inbound[t.index][ch]
	l.queued.Add(-int64(len(b.Records)))
	if h := j.held[t.index]; h.credited[b] {
		delete(h.credited, b)
		j.recycle(b)
		return err
	}
	<-l.credits
	j.recycle(b)
	return err
}

// drainStash processes held-back batches of channels that are no longer
// blocked, oldest first, until none is left or all are blocked again.
// Between batches it handles control messages, so that an unaligned
// barrier does not wait behind the stash, and while channel state is
// captured it absorbs the mailbox.
func (j *Job) drainStash(t *task) error {
	stash, ctl := j.held[t.index].stash, j.controls[t.index]
	for progress := true; progress; {
		progress = false
		if err := j.absorb(t); err != nil {
			return err
		}
		for ch := range stash {
			if len(stash[ch]) == 0 || t.handler.Blocked(ch) {
				continue
			}
			if err := j.awaitOutput(t); err != nil {
				return err
			}
			if len(stash[ch]) == 0 || t.handler.Blocked(ch) {
				continue // a control message changed it
			}
			b := stash[ch][0]
			stash[ch] = stash[ch][1:]
			if err := j.deliver(t, ch, b); err != nil {
				return err
			}
			progress = true
			if err := j.handleControl(t, ctl); err != nil {
				return err
			}
			if err := j.absorb(t); err != nil {
				return err
			}
		}
	}
	return nil
}

func (j *Job) handleControl(t *task, q *controlQueue) error {
	for _, m := range q.drain() {
		var err error
		switch m.kind {
		case ctlTrigger:
			err = t.trigger(m.barrier)
		case ctlComplete:
			err = t.completed(m.id)
		case ctlAbort:
			err = t.aborted(m.id)
		case ctlBarrier:
			err = t.barrierArrived(m.ch, m.barrier, m.mark)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// coordinate is the coordinator's event loop: the only goroutine that
// touches coord. Between events it sleeps until the coordinator's next
// tick is due, and not at all while none is: an idle job does not wake.
func (j *Job) coordinate(coord *checkpoint.Coordinator) {
	tick := time.NewTimer(time.Hour)
	defer tick.Stop()
	triggered := make(map[uint64]time.Duration)
	for {
		tick.Stop()
		if at, ok := coord.NextTick(); ok {
			tick.Reset(max(at-j.now(), 0))
		}
		select {
		case <-tick.C:
		case a := <-j.acks:
			coord.Tick(j.now())
			coord.Acknowledge(a)
		case d := <-j.declines:
			coord.Tick(j.now())
			if d.by != 0 {
				coord.Overtaken(d.task, d.id, d.by)
			} else {
				coord.Decline(d.task, d.id, d.reason)
			}
		case id := <-j.finished:
			coord.TaskFinished(id)
		case r := <-j.requests:
			coord.Tick(j.now())
			if r.savepoint {
				id := coord.RequestSavepoint()
				j.records.savepoint(id)
				r.reply <- id
			} else {
				r.reply <- coord.RequestCheckpoint()
			}
		case f := <-j.finalized:
			coord.Tick(j.now())
			if f.written != nil {
				j.records.written(f.written)
			}
			j.records.finalized(f.id)
			coord.Finalized(f.id, f.err)
		case <-j.done:
			return
		}
		coord.Tick(j.now())
		for coord.HasReady() {
			rd := coord.Ready()
			for _, tr := range rd.Triggers {
				triggered[tr.Barrier.ID] = tr.Barrier.Triggered
			}
			j.apply(coord, rd)
			j.view.publish(coord, triggered, rd, j.now())
			for id := range triggered {
				if !slices.Contains(coord.Pending(), id) {
					delete(triggered, id)
				}
			}
		}
	}
}

// apply carries out a Ready in order.
func (j *Job) apply(coord *checkpoint.Coordinator, rd checkpoint.Ready) {
	store, log := j.opts.Store, j.opts.Logger
	for _, a := range rd.Aborted {
		log.Info("checkpoint aborted", "id", a.ID, "reason", a.Reason.String(), "cause", a.Cause)
		for _, q := range j.controls {
			q.push(controlMsg{kind: ctlAbort, id: a.ID})
		}
		j.async.Add(1)
		go func() {
			defer j.async.Done()
			if err := store.Discard(a.ID); err != nil {
				log.Warn("discarding aborted checkpoint", "id", a.ID, "err", err)
			}
		}()
		if j.opts.OnAbort != nil {
			j.opts.OnAbort(a)
		}
	}
	for _, tr := range rd.Triggers {
		for i, t := range j.plan.tasks {
			if t.node.IsSource() {
				j.controls[i].push(controlMsg{kind: ctlTrigger, barrier: tr.Barrier})
			}
		}
	}
	if m := rd.Finalize; m != nil {
		if j.records.elide(m) {
			coord.Finalized(m.ID, nil)
		} else {
			j.async.Add(1)
			go func() {
				defer j.async.Done()
				err := store.Complete(m)
				r := finalizeResult{id: m.ID, err: err}
				if err == nil {
					r.written = m
				}
				select {
				case j.finalized <- r:
				case <-j.done:
				}
			}()
		}
	}
	for _, m := range rd.Completed {
		if m.SameAs != 0 {
			log.Debug("checkpoint complete", "id", m.ID, "duration", m.Duration, "same_as", m.SameAs)
		} else {
			log.Debug("checkpoint complete", "id", m.ID, "duration", m.Duration)
		}
		for _, q := range j.controls {
			q.push(controlMsg{kind: ctlComplete, id: m.ID})
		}
		if j.opts.OnComplete != nil {
			j.opts.OnComplete(m)
		}
	}
	if rd.Failed != nil {
		j.stop(rd.Failed)
	}
}
