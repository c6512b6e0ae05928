package runtime

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-edge/cairn/graph"
)

// Links between subtasks: batches over credit-limited channels, and the
// control messages that overtake them.

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

func (l *chanLink) release() { <-l.credits }

// full reports whether the link has no credit left.
func (l *chanLink) full() bool { return len(l.credits) == cap(l.credits) }

// barrier hands an unaligned barrier to the receiver's control queue,
// which the receiver drains before it processes another batch.
func (l *chanLink) barrier(b graph.Barrier, mark position, partial *graph.Batch) bool {
	took := false
	if partial != nil {
		// The mailbox has a slot per channel beyond the credits for this.
		// Counted before it is sent, as send counts: once sent, the batch
		// is the receiver's, which may process and recycle it at once.
		n := int64(len(partial.Records))
		l.queued.Add(n)
		select {
		case l.mailbox <- delivery{ch: l.ch, batch: partial, free: true}:
			took = true
		default:
			l.queued.Add(-n)
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
	// sender's position on it when it sent the barrier.
	ch   int
	mark position
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
