package runtime

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
)

// The coordinator's goroutine: checkpoint requests, acknowledgements and
// declines in; the effects of its Ready out.

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

// request asks the coordinator's loop for a checkpoint now: a savepoint,
// and the final one (Coordinator.RequestFinal).
type request struct {
	savepoint, final bool
	reply            chan uint64
}

// TriggerCheckpoint starts a checkpoint now and returns its id. It fails
// when the job is not running or a subtask has finished.
func (j *Job) TriggerCheckpoint(ctx context.Context) (uint64, error) {
	return j.trigger(ctx, request{})
}

// TriggerSavepoint is TriggerCheckpoint for a savepoint: a checkpoint
// aligned in every mode, which holds no records in flight and so restores
// under another parallelism too.
func (j *Job) TriggerSavepoint(ctx context.Context) (uint64, error) {
	return j.trigger(ctx, request{savepoint: true})
}

// TriggerFinal is TriggerSavepoint for the final checkpoint of a job that
// the caller ends once it completes, having held its sources: the job
// triggers no periodic checkpoint after it (Coordinator.RequestFinal).
func (j *Job) TriggerFinal(ctx context.Context) (uint64, error) {
	return j.trigger(ctx, request{savepoint: true, final: true})
}

func (j *Job) trigger(ctx context.Context, r request) (uint64, error) {
	r.reply = make(chan uint64, 1)
	select {
	case j.requests <- r:
	case <-j.done:
		return 0, errStopped
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if id := <-r.reply; id != 0 {
		return id, nil
	}
	return 0, errors.New("no checkpoint can be taken: a subtask has finished or the job failed")
}

// coordinate is the coordinator's event loop: the only goroutine that
// touches coord. Between events it sleeps until the coordinator's next
// tick is due, and not at all while none is: an idle job does not wake.
func (j *Job) coordinate(coord *checkpoint.Coordinator) {
	tick := time.NewTimer(time.Hour)
	defer tick.Stop()
	triggered := make(map[uint64]time.Duration)
	// acked is when each subtask's acknowledgement of a checkpoint in
	// flight came, for Status: published as they come, not only when the
	// coordinator has something to do.
	acked := make(map[uint64]map[checkpoint.TaskID]time.Duration)
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
			if slices.Contains(coord.Pending(), a.ID) {
				if acked[a.ID] == nil {
					acked[a.ID] = make(map[checkpoint.TaskID]time.Duration)
				}
				acked[a.ID][a.Task] = j.now()
			}
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
				request := coord.RequestSavepoint
				if r.final {
					request = coord.RequestFinal
				}
				id := request()
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
			j.view.publish(coord, triggered, acked, rd, j.now())
			for id := range triggered {
				if !slices.Contains(coord.Pending(), id) {
					delete(triggered, id)
					delete(acked, id)
				}
			}
		}
		j.view.publish(coord, triggered, acked, checkpoint.Ready{}, j.now())
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
