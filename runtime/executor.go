package runtime

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/cairn-edge/cairn/graph"
)

// The goroutine executor: the goroutine of each subtask (runTask), the
// loops of source and operator subtasks, and the env they see.

// env implementation.

func (j *Job) now() time.Duration { return time.Since(j.start) }

func (j *Job) wallMillis() int64 { return j.opts.WallClock().UnixMilli() }

// wallClockRecheck is the longest a subtask with processing-time timers
// waits before it reads the wall clock again: a timer's wait is measured on
// the monotonic clock, so a jump of the wall clock forward would otherwise
// go unnoticed until the wait ends.
const wallClockRecheck = time.Second

// inputBacklog is the records waiting on input channel ch of t and in
// the inputs of its sender: what stands before the sender's next barrier
// on ch, and what came after it.
func (j *Job) inputBacklog(t *task, ch int) int64 {
	n := j.inbound[t.index][ch].queued.Load()
	for _, l := range j.inbound[j.plan.inputs[t.index][ch].index] {
		n += l.queued.Load()
	}
	return n
}

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
	idle := time.NewTimer(time.Hour) // the next idleTick
	idle.Stop()
	defer idle.Stop()
	if err := t.announceRestored(); err != nil {
		return err
	}
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
		if next := t.idleTick(); next > 0 {
			idle.Reset(next)
		}
		if t.err != nil {
			return t.err
		}
		select {
		case <-t.src.Ready():
		case <-idle.C:
		case <-ctl.signal:
			if err := j.handleControl(t, ctl); err != nil {
				return err
			}
		case <-j.done:
			return errStopped
		}
		idle.Stop()
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

func (j *Job) runOperator(i int, t *task) error {
	mailbox, ctl := j.mailboxes[i], j.controls[i]
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
	if err := t.announceRestored(); err != nil {
		return err
	}
	for !t.finished {
		if err := j.drainInbox(t); err != nil {
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
			procTimer.Reset(min(time.Duration(max(0, next-t.processingTime()))*time.Millisecond, wallClockRecheck))
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
			t.accept(d.ch, d.batch, d.free)
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
			t.accept(d.ch, d.batch, d.free)
		default:
			return nil
		}
	}
	return nil
}

// drainInbox processes the batches of t's inbox whose channels are not
// blocked, taking turns, until none is left or all are blocked. Between
// batches it handles control messages, so that an unaligned barrier does
// not wait behind the inbox, and while channel state is captured it
// absorbs the mailbox.
func (j *Job) drainInbox(t *task) error {
	ctl := j.controls[t.index]
	for {
		if err := j.absorb(t); err != nil {
			return err
		}
		if _, ok := t.inbox.next(); !ok {
			return nil
		}
		if err := j.awaitOutput(t); err != nil {
			return err
		}
		ch, ok := t.inbox.next() // a control message may have blocked it
		if !ok {
			continue
		}
		b := t.inbox.take(ch)
		err := t.process(ch, b)
		j.inbound[t.index][ch].queued.Add(-int64(len(b.Records)))
		t.inbox.done(ch, b)
		j.recycle(b)
		if err != nil {
			return err
		}
		if err := j.handleControl(t, ctl); err != nil {
			return err
		}
	}
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
