package checkpoint

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cairn-edge/cairn/graph"
)

// Config is a job's checkpointing configuration.
type Config struct {
	Mode Mode
	// Interval between periodic triggers; 0 triggers only on request.
	Interval time.Duration
	// MinPause is the least time from the end of one checkpoint to the start
	// of the next periodic one; when set, at most one is in flight.
	MinPause time.Duration
	// Timeout aborts a checkpoint that has not completed this long after its
	// trigger.
	Timeout time.Duration
	// MaxConcurrent bounds the periodic checkpoints in flight.
	MaxConcurrent int
	// TolerableFailures is how many checkpoints in a row may fail (time out,
	// be declined, fail to be written) before the job fails; negative means
	// any number.
	TolerableFailures int
	// AlignmentTimeout, in exactly-once mode, switches a subtask's
	// checkpoint to unaligned once its alignment has taken this long; 0
	// never switches.
	AlignmentTimeout time.Duration
}

// DefaultConfig is exactly-once every 10 s, one at a time, a 10 min timeout,
// and no tolerance for failed checkpoints, as in Flink.
func DefaultConfig() Config {
	return Config{Mode: ExactlyOnce, Interval: 10 * time.Second, Timeout: 10 * time.Minute, MaxConcurrent: 1}
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Interval < 0:
		return errors.New("checkpoint interval must not be negative")
	case c.MinPause < 0:
		return errors.New("checkpoint min pause must not be negative")
	case c.Timeout <= 0:
		return errors.New("checkpoint timeout must be positive")
	case c.MaxConcurrent < 1:
		return errors.New("max concurrent checkpoints must be at least 1")
	case c.AlignmentTimeout < 0:
		return errors.New("alignment timeout must not be negative")
	case c.AlignmentTimeout > 0 && c.Mode != ExactlyOnce:
		return fmt.Errorf("an alignment timeout needs exactly-once mode; %s checkpoints do not align", c.Mode)
	}
	return nil
}

// AbortReason says why a checkpoint was aborted.
type AbortReason uint8

const (
	// Subsumed: a newer checkpoint completed first; not a failure.
	Subsumed AbortReason = iota
	// Declined: a subtask declined it.
	Declined
	// Expired: it did not complete within the timeout.
	Expired
	// WriteFailed: its completion record could not be written.
	WriteFailed
	// TaskFinished: a subtask finished, so it cannot complete; not a failure.
	TaskFinished
	// Overtaken: a newer checkpoint's barrier reached a subtask capturing
	// its channel state (unaligned), which goes on with the newer one; not
	// a failure.
	Overtaken
)

func (r AbortReason) String() string {
	switch r {
	case Subsumed:
		return "subsumed"
	case Declined:
		return "declined"
	case Expired:
		return "expired"
	case WriteFailed:
		return "write failed"
	case TaskFinished:
		return "task finished"
	case Overtaken:
		return "overtaken"
	}
	return "unknown"
}

// Failure reports whether the reason counts towards TolerableFailures.
func (r AbortReason) Failure() bool { return r == Declined || r == Expired || r == WriteFailed }

// Abort is an aborted checkpoint.
type Abort struct {
	ID     uint64
	Reason AbortReason
	Cause  string
}

// Trigger asks every source subtask to start checkpoint Barrier.ID.
type Trigger struct {
	Barrier graph.Barrier
	// Manual is set for a checkpoint requested by RequestCheckpoint.
	Manual bool
}

// Ready is what the coordinator needs done, in field order.
type Ready struct {
	// Aborted checkpoints: notify the subtasks, discard stored state.
	Aborted []Abort
	// Triggers go to every source subtask.
	Triggers []Trigger
	// Finalize, when set, is a checkpoint every subtask acknowledged: write
	// its completion record durably, then call Finalized.
	Finalize *Manifest
	// Completed checkpoints, oldest first: notify the subtasks (sinks
	// commit), truncate inputs, upload. Each subsumes all earlier ones.
	// Each is a copy of the manifest Finalize gave, with what the caller
	// set on it (SameAs), and its Duration through completion. (The one
	// given stays as it was written: the store may hold it.)
	Completed []*Manifest
	// Failed, when set, is why the job must fail.
	Failed error
}

type pendingCheckpoint struct {
	id        uint64
	triggered time.Duration
	manual    bool
	acks      map[TaskID]Ack
	final     *Manifest // given in Ready.Finalize
}

// Coordinator is the job's checkpoint coordinator: a deterministic state
// machine in the manner of etcd's raft. Time moves only through Tick.
type Coordinator struct {
	cfg   Config
	tasks []TaskID
	now   time.Duration

	lastID     uint64
	pending    []*pendingCheckpoint // by increasing id
	finalizing uint64               // id whose completion record is being written

	triggeredOnce bool
	lastTrigger   time.Duration
	lastEnd       time.Duration // last completion or abort, for MinPause

	failures int // consecutive
	failed   error
	finished bool // a subtask finished: no further checkpoints
	final    bool // RequestFinal was called: no further periodic checkpoints

	ready Ready
}

// NewCoordinator returns a coordinator for a job whose subtasks are tasks.
// lastID is the store's (Store.LastID: the highest id of a completion
// record, or one carried over); new ids continue after it (invariant I6).
func NewCoordinator(cfg Config, tasks []TaskID, lastID uint64) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(tasks) == 0 {
		return nil, errors.New("coordinator needs at least one subtask")
	}
	sorted := slices.Clone(tasks)
	slices.SortFunc(sorted, TaskID.Compare)
	return &Coordinator{cfg: cfg, tasks: sorted, lastID: lastID}, nil
}

// Tick tells the coordinator the time on the job's monotonic clock: it
// expires overdue checkpoints and triggers a periodic one when due.
func (c *Coordinator) Tick(now time.Duration) {
	c.now = now
	for _, p := range slices.Clone(c.pending) {
		if p.id != c.finalizing && now-p.triggered >= c.cfg.Timeout {
			c.abort(p.id, Expired, fmt.Sprintf("not complete %v after its trigger", c.cfg.Timeout))
		}
	}
	if c.periodicDue() {
		c.trigger(false, false)
	}
}

// NextTick returns the time at which Tick next has something to do if
// nothing else happens first: a periodic checkpoint falls due, or one in
// flight expires. ok is false when only another event (an acknowledgement,
// a completion) can make anything due. A caller may sleep until then
// instead of ticking on a period.
func (c *Coordinator) NextTick() (at time.Duration, ok bool) {
	consider := func(t time.Duration) {
		if !ok || t < at {
			at, ok = t, true
		}
	}
	for _, p := range c.pending {
		if p.id != c.finalizing {
			consider(p.triggered + c.cfg.Timeout)
		}
	}
	if c.cfg.Interval == 0 || c.finished || c.final || c.failed != nil {
		return at, ok
	}
	next := c.cfg.Interval
	if c.triggeredOnce {
		next = c.lastTrigger + c.cfg.Interval
	}
	switch {
	case c.cfg.MinPause > 0:
		if len(c.pending) == 0 {
			if c.triggeredOnce {
				next = max(next, c.lastEnd+c.cfg.MinPause)
			}
			consider(next)
		}
	case len(c.pending) < c.cfg.MaxConcurrent:
		consider(next)
	}
	return at, ok
}

func (c *Coordinator) periodicDue() bool {
	if c.cfg.Interval == 0 || c.finished || c.final || c.failed != nil {
		return false
	}
	if c.triggeredOnce && c.now < c.lastTrigger+c.cfg.Interval || !c.triggeredOnce && c.now < c.cfg.Interval {
		return false
	}
	if c.cfg.MinPause > 0 {
		return len(c.pending) == 0 && (!c.triggeredOnce || c.now >= c.lastEnd+c.cfg.MinPause)
	}
	return len(c.pending) < c.cfg.MaxConcurrent
}

// RequestCheckpoint triggers a checkpoint now, regardless of interval, pause
// and concurrency limits, and returns its id. It returns 0 when no
// checkpoint can be taken: a subtask has finished or the job failed.
func (c *Coordinator) RequestCheckpoint() uint64 {
	if c.finished || c.failed != nil {
		return 0
	}
	return c.trigger(true, false)
}

// RequestSavepoint is RequestCheckpoint for a savepoint: its barrier is
// aligned at every subtask, whatever the mode (graph.Barrier.Aligned).
func (c *Coordinator) RequestSavepoint() uint64 {
	if c.finished || c.failed != nil {
		return 0
	}
	return c.trigger(true, true)
}

// RequestFinal is RequestSavepoint for the final checkpoint of a job that
// stops once it completes: no periodic checkpoint is triggered after it.
// The caller holds the sources first, so one would hold nothing more; but
// it could complete as the job ends, unannounced, and a start would
// restore it instead of the final one. Requested checkpoints still are
// taken.
func (c *Coordinator) RequestFinal() uint64 {
	id := c.RequestSavepoint()
	c.final = c.final || id != 0
	return id
}

func (c *Coordinator) trigger(manual, aligned bool) uint64 {
	c.lastID++
	id := c.lastID
	c.triggeredOnce, c.lastTrigger = true, c.now
	c.pending = append(c.pending, &pendingCheckpoint{id: id, triggered: c.now, manual: manual, acks: make(map[TaskID]Ack)})
	c.ready.Triggers = append(c.ready.Triggers, Trigger{Barrier: graph.Barrier{ID: id, Triggered: c.now, Aligned: aligned}, Manual: manual})
	return id
}

// Acknowledge records a subtask's durable snapshot. Acknowledgements of
// checkpoints no longer pending (completed, subsumed, aborted) are ignored;
// their state is the store's to clean up.
func (c *Coordinator) Acknowledge(a Ack) {
	p := c.find(a.ID)
	if p == nil || !c.isTask(a.Task) {
		return
	}
	p.acks[a.Task] = a
	c.maybeFinalize()
}

// Decline aborts checkpoint id, which task cannot take.
func (c *Coordinator) Decline(task TaskID, id uint64, cause string) {
	if c.find(id) == nil || id == c.finalizing {
		return
	}
	c.abort(id, Declined, task.String()+": "+cause)
}

// Overtaken aborts checkpoint id, which task gave up for the newer
// checkpoint by (Action.Overtaken); it does not count as a failure.
func (c *Coordinator) Overtaken(task TaskID, id, by uint64) {
	if c.find(id) == nil || id == c.finalizing {
		return
	}
	c.abort(id, Overtaken, fmt.Sprintf("%s: overtaken by checkpoint %d", task, by))
}

// Finalized reports the outcome of writing the completion record of the
// checkpoint in Ready.Finalize: err nil means it is durable.
func (c *Coordinator) Finalized(id uint64, err error) {
	if id != c.finalizing {
		return
	}
	c.finalizing = 0
	if err != nil {
		c.abort(id, WriteFailed, err.Error())
		c.maybeFinalize()
		return
	}
	p := c.find(id)
	c.remove(id)
	c.failures = 0
	c.lastEnd = c.now
	m := *p.final
	m.Duration = c.now - p.triggered
	c.ready.Completed = append(c.ready.Completed, &m)
	for _, q := range slices.Clone(c.pending) {
		if q.id < id {
			c.abort(q.id, Subsumed, fmt.Sprintf("checkpoint %d completed", id))
		}
	}
	c.maybeFinalize()
}

// TaskFinished records that a subtask reached the end of its input. It can
// take part in no further checkpoint, so pending ones are aborted and no new
// ones are triggered.
func (c *Coordinator) TaskFinished(task TaskID) {
	if !c.isTask(task) || c.finished {
		return
	}
	c.finished = true
	for _, p := range slices.Clone(c.pending) {
		if p.id != c.finalizing {
			c.abort(p.id, TaskFinished, task.String()+" finished")
		}
	}
}

// maybeFinalize starts writing the completion record of the newest fully
// acknowledged checkpoint, unless one is being written. Older pending
// checkpoints are subsumed by it.
func (c *Coordinator) maybeFinalize() {
	if c.finalizing != 0 {
		return
	}
	for i := len(c.pending) - 1; i >= 0; i-- {
		p := c.pending[i]
		if len(p.acks) < len(c.tasks) {
			continue
		}
		for _, q := range slices.Clone(c.pending[:i]) {
			c.abort(q.id, Subsumed, fmt.Sprintf("checkpoint %d was acknowledged first", p.id))
		}
		c.finalizing, p.final = p.id, c.manifest(p)
		c.ready.Finalize = p.final
		return
	}
}

func (c *Coordinator) manifest(p *pendingCheckpoint) *Manifest {
	m := &Manifest{ID: p.id, Mode: c.cfg.Mode, Triggered: p.triggered, Duration: c.now - p.triggered}
	for _, t := range c.tasks {
		m.Subtasks = append(m.Subtasks, p.acks[t])
	}
	return m
}

func (c *Coordinator) abort(id uint64, reason AbortReason, cause string) {
	c.remove(id)
	c.lastEnd = c.now
	c.ready.Aborted = append(c.ready.Aborted, Abort{ID: id, Reason: reason, Cause: cause})
	if !reason.Failure() {
		return
	}
	c.failures++
	if c.cfg.TolerableFailures >= 0 && c.failures > c.cfg.TolerableFailures && c.failed == nil {
		c.failed = fmt.Errorf("%d checkpoints failed in a row, more than the %d tolerated; last: checkpoint %d %s: %s",
			c.failures, c.cfg.TolerableFailures, id, reason, cause)
		c.ready.Failed = c.failed
	}
}

func (c *Coordinator) find(id uint64) *pendingCheckpoint {
	for _, p := range c.pending {
		if p.id == id {
			return p
		}
	}
	return nil
}

func (c *Coordinator) remove(id uint64) {
	c.pending = slices.DeleteFunc(c.pending, func(p *pendingCheckpoint) bool { return p.id == id })
}

func (c *Coordinator) isTask(t TaskID) bool {
	_, ok := slices.BinarySearchFunc(c.tasks, t, TaskID.Compare)
	return ok
}

// HasReady reports whether Ready has anything to do.
func (c *Coordinator) HasReady() bool {
	r := &c.ready
	return len(r.Triggers) > 0 || r.Finalize != nil || len(r.Completed) > 0 || len(r.Aborted) > 0 || r.Failed != nil
}

// Ready returns what must be done and forgets it.
func (c *Coordinator) Ready() Ready {
	r := c.ready
	c.ready = Ready{}
	return r
}

// Pending returns the ids of the checkpoints in flight, oldest first.
func (c *Coordinator) Pending() []uint64 {
	ids := make([]uint64, len(c.pending))
	for i, p := range c.pending {
		ids[i] = p.id
	}
	return ids
}

// Acked returns the subtasks that acknowledged pending checkpoint id.
func (c *Coordinator) Acked(id uint64) []TaskID {
	p := c.find(id)
	if p == nil {
		return nil
	}
	var out []TaskID
	for _, t := range c.tasks {
		if _, ok := p.acks[t]; ok {
			out = append(out, t)
		}
	}
	return out
}
