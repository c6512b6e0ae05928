package runtime

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
)

// Status is a point-in-time view of a running job, for status displays.
type Status struct {
	// Started is the wall-clock time of the job's clock zero, and Uptime
	// the job's clock now.
	Started time.Time
	Uptime  time.Duration
	Tasks   []TaskStatus
	// Pending are the checkpoints in flight, oldest first.
	Pending []PendingCheckpoint
	// Completed and Failed count checkpoints since the job started.
	Completed, Failed int64
	// LastCompleted is the newest completed checkpoint, or nil.
	LastCompleted *checkpoint.Manifest
	// RestoredFrom is the checkpoint the job restored, or nil.
	RestoredFrom *checkpoint.Manifest
	// History holds the newest checkpoint outcomes (completed or failed, not
	// subsumed), oldest first, at most HistoryLength of them.
	History []Outcome
}

// HistoryLength is how many checkpoint outcomes Status keeps.
const HistoryLength = 32

// Outcome is how a checkpoint ended.
type Outcome struct {
	ID uint64
	// Triggered is on the job's clock; Duration runs from the trigger to the
	// completion or the failure.
	Triggered, Duration time.Duration
	// Manifest is set for a completed checkpoint.
	Manifest *checkpoint.Manifest
	// Reason and Cause say why a checkpoint failed.
	Reason checkpoint.AbortReason
	Cause  string
}

// TaskStatus is one subtask's counters and barrier alignment.
type TaskStatus struct {
	ID checkpoint.TaskID
	// Upstream and Queued are, per input channel, the sending subtask and
	// the records it sent that wait to be processed (the channel's backlog,
	// including records held back by an alignment).
	Upstream              []checkpoint.TaskID
	Queued                []int64
	RecordsIn, RecordsOut int64
	Rejected              int64         // records the operator rejected (graph.RecordError)
	Backpressure          time.Duration // total time spent waiting for credits
	Alignment             checkpoint.Alignment
	// Buffered is the number of records held back on blocked channels by
	// the alignment in progress.
	Buffered int64
	// Watermark is the subtask's event time (milliseconds since the
	// epoch): graph.MinWatermark before any, graph.MaxWatermark once its
	// input ended.
	Watermark int64
}

// Aligned is a blocking barrier alignment of a subtask that ended
// (Options.OnAligned): in its snapshot, or given up with its checkpoint.
type Aligned struct {
	Task checkpoint.TaskID
	ID   uint64 // the checkpoint
	// Started is when the first barrier arrived (job clock); Duration
	// how long the alignment took, to the snapshot or to its end.
	Started, Duration time.Duration
	// WaitedFor is the input the alignment waited for last: the sender
	// of the barrier that came last, or, when none came (a timeout, an
	// abort), the pending input with the largest backlog.
	WaitedFor checkpoint.TaskID
	// Backlog is the most records seen waiting on that input and in its
	// sender's inputs (as Status counts them: the records before its
	// barrier and after), sampled as the alignment's barriers arrived.
	Backlog int64
	// Buffered are the records held back on the inputs whose barrier had
	// come.
	Buffered int64
	// TimedOut: the alignment timed out and the snapshot was taken
	// unaligned; Abandoned: its checkpoint was aborted, declined or
	// overtaken before the snapshot.
	TimedOut, Abandoned bool
}

// PendingCheckpoint is a checkpoint in flight.
type PendingCheckpoint struct {
	ID        uint64
	Triggered time.Duration // on the job's clock
	// Acked are the subtasks that acknowledged it, in the job's order of
	// subtasks, and AckedAt when each acknowledgement came (job clock).
	Acked   []checkpoint.TaskID
	AckedAt []time.Duration
}

// coordinatorView is what the coordinator's goroutine publishes for Status.
type coordinatorView struct {
	mu                sync.Mutex
	pending           []PendingCheckpoint
	completed, failed int64
	last              *checkpoint.Manifest
	history           []Outcome
}

// publish records the coordinator's state after an event: the
// checkpoints in flight with the acknowledgements they have, and what rd
// (empty when the event readied nothing) completed or aborted; now is the
// job's clock.
func (v *coordinatorView) publish(coord *checkpoint.Coordinator, triggered map[uint64]time.Duration,
	acked map[uint64]map[checkpoint.TaskID]time.Duration, rd checkpoint.Ready, now time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.pending = v.pending[:0]
	for _, id := range coord.Pending() {
		p := PendingCheckpoint{ID: id, Triggered: triggered[id], Acked: coord.Acked(id)}
		for _, t := range p.Acked {
			p.AckedAt = append(p.AckedAt, acked[id][t])
		}
		v.pending = append(v.pending, p)
	}
	v.completed += int64(len(rd.Completed))
	for _, a := range rd.Aborted {
		if a.Reason.Failure() {
			v.failed++
			at := triggered[a.ID]
			v.remember(Outcome{ID: a.ID, Triggered: at, Duration: now - at, Reason: a.Reason, Cause: a.Cause})
		}
	}
	for _, m := range rd.Completed {
		v.remember(Outcome{ID: m.ID, Triggered: m.Triggered, Duration: m.Duration, Manifest: m})
	}
	if n := len(rd.Completed); n > 0 {
		v.last = rd.Completed[n-1]
	}
}

func (v *coordinatorView) remember(o Outcome) {
	if len(v.history) == HistoryLength {
		v.history = slices.Delete(v.history, 0, 1)
	}
	v.history = append(v.history, o)
}

// Status returns a view of the job; safe from any goroutine while Run runs.
func (j *Job) Status() Status {
	s := Status{RestoredFrom: j.restoredFrom.Load(), Started: j.start, Uptime: j.now()}
	for _, t := range j.plan.tasks {
		t.alignMu.Lock()
		align := t.alignView
		t.alignMu.Unlock()
		ts := TaskStatus{
			ID:        t.id,
			RecordsIn: t.metrics.RecordsIn.Load(), RecordsOut: t.metrics.RecordsOut.Load(), Rejected: t.metrics.Rejected.Load(),
			Backpressure: t.metrics.Backpressure(), Alignment: align,
			Buffered: t.metrics.Buffered.Load(), Watermark: t.metrics.Watermark.Load(),
		}
		for ch, up := range j.plan.inputs[t.index] {
			ts.Upstream = append(ts.Upstream, up.id)
			ts.Queued = append(ts.Queued, j.inbound[t.index][ch].queued.Load())
		}
		s.Tasks = append(s.Tasks, ts)
	}
	v := &j.view
	v.mu.Lock()
	defer v.mu.Unlock()
	s.Pending = slices.Clone(v.pending)
	s.Completed, s.Failed, s.LastCompleted = v.completed, v.failed, v.last
	s.History = slices.Clone(v.history)
	return s
}

// TaskMetrics are a subtask's live counters, safe to read from any goroutine.
type TaskMetrics struct {
	RecordsIn  atomic.Int64
	RecordsOut atomic.Int64
	// BackpressureNanos is the time spent waiting for credits downstream,
	// added when a wait ends; Backpressure includes a wait in progress.
	BackpressureNanos atomic.Int64
	// waitingSince is when the wait in progress began (Unix nanoseconds),
	// or 0.
	waitingSince atomic.Int64
	// Buffered is the number of records held back on blocked channels by
	// the alignment in progress.
	Buffered atomic.Int64
	// Rejected counts the records the operator rejected (graph.RecordError).
	Rejected atomic.Int64
	// Watermark is the subtask's event time, as TaskStatus.Watermark.
	Watermark atomic.Int64
}

func newTaskMetrics() *TaskMetrics {
	m := new(TaskMetrics)
	m.Watermark.Store(graph.MinWatermark)
	return m
}

// Backpressure is the time spent waiting for credits downstream so far,
// including a wait in progress, so that a subtask blocked for long shows as
// blocked while it is. Two calls around the end of a wait may see it go
// back by up to that wait.
func (m *TaskMetrics) Backpressure() time.Duration {
	total := m.BackpressureNanos.Load()
	if since := m.waitingSince.Load(); since != 0 {
		total += max(time.Now().UnixNano()-since, 0)
	}
	return time.Duration(total)
}
