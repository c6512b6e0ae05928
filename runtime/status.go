package runtime

import (
	"slices"
	"sync"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
)

// Status is a point-in-time view of a running job, for status displays.
type Status struct {
	// Uptime is the job's clock.
	Uptime time.Duration
	Tasks  []TaskStatus
	// Pending are the checkpoints in flight, oldest first.
	Pending []PendingCheckpoint
	// Completed and Failed count checkpoints since the job started.
	Completed, Failed int64
	// LastCompleted is the newest completed checkpoint, or nil.
	LastCompleted *checkpoint.Manifest
	// RestoredFrom is the checkpoint the job restored, or nil.
	RestoredFrom *checkpoint.Manifest
}

// TaskStatus is one subtask's counters and barrier alignment.
type TaskStatus struct {
	ID                    checkpoint.TaskID
	Inputs                int // input channels
	RecordsIn, RecordsOut int64
	Backpressure          time.Duration // total time spent waiting for credits
	Alignment             checkpoint.Alignment
}

// PendingCheckpoint is a checkpoint in flight.
type PendingCheckpoint struct {
	ID        uint64
	Triggered time.Duration // on the job's clock
	Acked     []checkpoint.TaskID
}

// coordinatorView is what the coordinator's goroutine publishes for Status.
type coordinatorView struct {
	mu                sync.Mutex
	pending           []PendingCheckpoint
	completed, failed int64
	last              *checkpoint.Manifest
}

// publish records the coordinator's state after it changed.
func (v *coordinatorView) publish(coord *checkpoint.Coordinator, triggered map[uint64]time.Duration, rd checkpoint.Ready) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.pending = v.pending[:0]
	for _, id := range coord.Pending() {
		v.pending = append(v.pending, PendingCheckpoint{ID: id, Triggered: triggered[id], Acked: coord.Acked(id)})
	}
	v.completed += int64(len(rd.Completed))
	for _, a := range rd.Aborted {
		if a.Reason.Failure() {
			v.failed++
		}
	}
	if n := len(rd.Completed); n > 0 {
		v.last = rd.Completed[n-1]
	}
}

// Status returns a view of the job; safe from any goroutine while Run runs.
func (j *Job) Status() Status {
	s := Status{RestoredFrom: j.restoredFrom.Load(), Uptime: j.now()}
	for _, t := range j.plan.tasks {
		t.alignMu.Lock()
		align := t.alignView
		t.alignMu.Unlock()
		s.Tasks = append(s.Tasks, TaskStatus{
			ID: t.id, Inputs: len(t.inputOf),
			RecordsIn: t.metrics.RecordsIn.Load(), RecordsOut: t.metrics.RecordsOut.Load(),
			Backpressure: time.Duration(t.metrics.BackpressureNanos.Load()), Alignment: align,
		})
	}
	v := &j.view
	v.mu.Lock()
	defer v.mu.Unlock()
	s.Pending = slices.Clone(v.pending)
	s.Completed, s.Failed, s.LastCompleted = v.completed, v.failed, v.last
	return s
}
