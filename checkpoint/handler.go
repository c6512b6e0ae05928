package checkpoint

import (
	"fmt"
	"time"

	"github.com/cairn-edge/cairn/graph"
)

// EventKind says what happened on a subtask's inputs.
type EventKind uint8

const (
	// BarrierArrived: Barrier arrived on Channel.
	BarrierArrived EventKind = iota
	// InputEnded: Channel delivered end of stream; it counts as aligned for
	// every later checkpoint.
	InputEnded
	// CheckpointAborted: the coordinator aborted checkpoint ID.
	CheckpointAborted
)

// Event is an input to Handler.Step.
type Event struct {
	Kind    EventKind
	Channel int
	Barrier graph.Barrier
	ID      uint64
}

// ActionKind says what the subtask must do.
type ActionKind uint8

const (
	// Block: stop processing records of Channel; keep them queued.
	Block ActionKind = iota
	// Unblock: resume Channel, queued records first.
	Unblock
	// Snapshot: take the synchronous snapshot for checkpoint ID now, before
	// any further record is processed (invariant I2).
	Snapshot
	// Forward: emit Barrier on every output. Always follows its Snapshot.
	Forward
	// Decline: checkpoint ID cannot complete at this subtask; tell the
	// coordinator, with Reason — or, when Overtaken is set, that the
	// subtask gave it up for the newer checkpoint Barrier.ID (not a
	// failure).
	Decline
	// Captured: every input's barrier ID has arrived after an unaligned
	// snapshot, so ID's channel state is complete once the records in front
	// of those barriers have been received.
	Captured
)

func (k ActionKind) String() string {
	switch k {
	case Block:
		return "block"
	case Unblock:
		return "unblock"
	case Snapshot:
		return "snapshot"
	case Forward:
		return "forward"
	case Decline:
		return "decline"
	case Captured:
		return "captured"
	}
	return "unknown"
}

// Action is an output of Handler. Actions are carried out in order.
type Action struct {
	Kind    ActionKind
	Channel int           // Block, Unblock
	ID      uint64        // Snapshot, Forward, Decline
	Barrier graph.Barrier // Forward
	Reason  string        // Decline
	// StartDelay and Alignment, on Snapshot, are the time from the trigger to
	// the first barrier here and from the first barrier to the snapshot.
	StartDelay time.Duration
	Alignment  time.Duration
	// Overtaken, on Decline: see Decline.
	Overtaken bool
	// Unaligned, on Snapshot, says the snapshot is taken before every
	// barrier arrived: from now until each input's barrier, the records
	// received on that input are the checkpoint's channel state. TimedOut
	// says it switched from aligned because the alignment timed out.
	Unaligned, TimedOut bool
}

// Handler is the barrier handler of one subtask with a fixed number of input
// channels. It is a deterministic state machine: events in through Step,
// time in through Tick, actions out through Ready.
type Handler struct {
	mode     Mode
	step     func(h *Handler, ev Event)
	channels int
	now      time.Duration
	timeout  time.Duration // alignment timeout; 0 for none

	ended []bool
	// The checkpoint being aligned; id 0 means none.
	aligning   uint64
	barrier    graph.Barrier
	arrivedAt  []time.Duration // per channel; -1 if barrier aligning has not arrived
	blocked    []bool
	alignStart time.Duration
	// captured: the checkpoint being aligned was snapshotted unaligned and
	// its channel state is being captured until every barrier arrives.
	capturing bool

	// early holds, in at-least-once mode, barriers of newer checkpoints
	// that arrived on a channel which already delivered the one being
	// aligned; they are stepped once it is done.
	early []Event

	// done is the newest checkpoint this subtask snapshotted or declined;
	// barriers up to it are stale. aborted holds newer ids the coordinator
	// aborted, whose barriers are dropped.
	done    uint64
	aborted map[uint64]bool

	actions []Action
}

// NewHandler returns a handler for a subtask with channels input channels
// (0 for a source, whose checkpoints start with a trigger instead).
func NewHandler(mode Mode, channels int) *Handler {
	h := &Handler{
		mode:      mode,
		channels:  channels,
		ended:     make([]bool, channels),
		arrivedAt: make([]time.Duration, channels),
		blocked:   make([]bool, channels),
		aborted:   make(map[uint64]bool),
	}
	switch mode {
	case AtLeastOnce:
		h.step = stepAtLeastOnce
	case Unaligned:
		h.step = stepUnaligned
	default:
		h.step = stepAligned
	}
	h.resetAlignment()
	return h
}

// SetAlignmentTimeout makes an exactly-once handler switch a checkpoint to
// unaligned once its alignment has taken d (0: never).
func (h *Handler) SetAlignmentTimeout(d time.Duration) {
	if h.mode == ExactlyOnce {
		h.timeout = d
	}
}

// Tick tells the handler the time on the job's monotonic clock. An
// alignment that reached the timeout switches to unaligned here, so Tick
// may produce actions.
func (h *Handler) Tick(now time.Duration) {
	h.now = now
	if d, ok := h.Deadline(); ok && now >= d {
		h.snapshotUnaligned(true)
	}
}

// Deadline returns when the alignment in progress times out, if it can.
func (h *Handler) Deadline() (time.Duration, bool) {
	if h.timeout <= 0 || h.aligning == 0 || h.capturing || h.barrier.Aligned {
		return 0, false
	}
	return h.alignStart + h.timeout, true
}

// Step applies one event.
func (h *Handler) Step(ev Event) {
	switch ev.Kind {
	case BarrierArrived:
		if ev.Channel < 0 || ev.Channel >= h.channels || h.ended[ev.Channel] {
			return
		}
		id := ev.Barrier.ID
		if id <= h.done || h.aborted[id] {
			return // stale: snapshotted, declined or aborted already
		}
		if h.aligning != 0 && id > h.aligning {
			switch {
			case h.arrivedAt[ev.Channel] < 0:
				// The channel skipped the barrier being aligned: it was
				// dropped upstream and can never align here.
				h.decline(h.aligning, fmt.Sprintf("barrier %d arrived on channel %d before barrier %d was aligned", id, ev.Channel, h.aligning))
			case h.mode == AtLeastOnce && !h.barrier.Aligned:
				// Unblocked channels run ahead: this one is done with the
				// older checkpoint, whose other barriers are still coming.
				h.early = append(h.early, ev)
				return
			default:
				// Capturing channel state (channels run ahead unblocked):
				// go on with the newer checkpoint.
				h.overtake(ev.Barrier)
			}
		}
		if h.aligning != 0 && id < h.aligning {
			return // an older barrier on a channel that skipped it: stale
		}
		if h.aligning == 0 {
			h.aligning, h.barrier, h.alignStart = id, ev.Barrier, h.now
		}
		if h.arrivedAt[ev.Channel] >= 0 {
			return // duplicate barrier on one channel: ignore
		}
		h.arrivedAt[ev.Channel] = h.now
		if h.barrier.Aligned {
			stepAligned(h, ev) // a savepoint
		} else {
			h.step(h, ev)
		}
	case InputEnded:
		if ev.Channel < 0 || ev.Channel >= h.channels || h.ended[ev.Channel] {
			return
		}
		h.ended[ev.Channel] = true
		if h.aligning != 0 && h.barrier.Aligned {
			stepAligned(h, ev)
		} else if h.aligning != 0 {
			h.step(h, ev)
		}
	case CheckpointAborted:
		if ev.ID <= h.done {
			return
		}
		h.aborted[ev.ID] = true
		if ev.ID == h.aligning {
			h.unblockAll()
			h.resetAlignment()
			h.stepEarly()
		}
	}
}

// stepAligned is exactly-once: block each channel whose barrier has arrived
// until all have. A barrier that comes unaligned (its sender's alignment
// timed out) switches this checkpoint to unaligned here too.
func stepAligned(h *Handler, ev Event) {
	switch {
	case h.capturing:
		h.captureStep()
	case ev.Kind == BarrierArrived && ev.Barrier.Unaligned:
		h.snapshotUnaligned(false)
	case h.aligned():
		h.snapshotAndForward()
	case ev.Kind == BarrierArrived:
		h.blocked[ev.Channel] = true
		h.actions = append(h.actions, Action{Kind: Block, Channel: ev.Channel})
	}
}

// stepUnaligned snapshots at the first barrier and captures channel state
// until the last.
func stepUnaligned(h *Handler, ev Event) {
	if h.capturing {
		h.captureStep()
		return
	}
	h.snapshotUnaligned(false)
}

// snapshotUnaligned snapshots the checkpoint being aligned now and forwards
// its barrier ahead of the queued records; its channel state is captured
// until every barrier has arrived.
func (h *Handler) snapshotUnaligned(timedOut bool) {
	b := h.barrier
	b.Unaligned = true
	h.actions = append(h.actions,
		Action{Kind: Snapshot, ID: b.ID, StartDelay: h.alignStart - b.Triggered, Alignment: h.now - h.alignStart,
			Unaligned: true, TimedOut: timedOut},
		Action{Kind: Forward, ID: b.ID, Barrier: b})
	h.unblockAll()
	h.capturing = true
	h.captureStep()
}

// captureStep completes the capture once every barrier has arrived.
func (h *Handler) captureStep() {
	if h.aligned() {
		h.actions = append(h.actions, Action{Kind: Captured, ID: h.aligning})
		h.finish(h.aligning)
	}
}

// stepAtLeastOnce never blocks; it snapshots when the last barrier arrives.
func stepAtLeastOnce(h *Handler, ev Event) {
	if h.aligned() {
		h.snapshotAndForward()
	}
}

// aligned reports whether every channel has delivered the barrier being
// aligned or has ended.
func (h *Handler) aligned() bool {
	for c := 0; c < h.channels; c++ {
		if h.arrivedAt[c] < 0 && !h.ended[c] {
			return false
		}
	}
	return true
}

func (h *Handler) snapshotAndForward() {
	id, b := h.aligning, h.barrier
	b.Unaligned = h.mode == Unaligned && !b.Aligned // a source's barrier overtakes its queued output
	h.actions = append(h.actions,
		Action{Kind: Snapshot, ID: id, StartDelay: h.alignStart - b.Triggered, Alignment: h.now - h.alignStart},
		Action{Kind: Forward, ID: id, Barrier: b})
	h.unblockAll()
	h.finish(id)
}

func (h *Handler) decline(id uint64, reason string) {
	h.actions = append(h.actions, Action{Kind: Decline, ID: id, Reason: reason})
	h.unblockAll()
	h.finish(id)
}

// overtake gives up the checkpoint being aligned for the newer one of b.
func (h *Handler) overtake(b graph.Barrier) {
	id := h.aligning
	h.actions = append(h.actions, Action{Kind: Decline, ID: id, Overtaken: true, Barrier: b,
		Reason: fmt.Sprintf("overtaken by checkpoint %d", b.ID)})
	h.unblockAll()
	h.finish(id)
}

func (h *Handler) finish(id uint64) {
	h.done = id
	for a := range h.aborted {
		if a <= id {
			delete(h.aborted, a)
		}
	}
	h.resetAlignment()
	h.stepEarly()
}

// stepEarly steps the barriers that arrived early, now that the checkpoint
// they waited behind is done.
func (h *Handler) stepEarly() {
	early := h.early
	h.early = nil
	for _, ev := range early {
		h.Step(ev)
	}
}

func (h *Handler) unblockAll() {
	for c, b := range h.blocked {
		if b {
			h.blocked[c] = false
			h.actions = append(h.actions, Action{Kind: Unblock, Channel: c})
		}
	}
}

func (h *Handler) resetAlignment() {
	h.aligning = 0
	h.capturing = false
	h.barrier = graph.Barrier{}
	for c := range h.arrivedAt {
		h.arrivedAt[c] = -1
	}
}

// Trigger starts checkpoint barrier at a source subtask, which has no inputs:
// it snapshots and forwards at once. A stale or aborted id does nothing.
func (h *Handler) Trigger(b graph.Barrier) {
	if b.ID <= h.done || h.aborted[b.ID] {
		return
	}
	h.aligning, h.barrier, h.alignStart = b.ID, b, h.now
	h.snapshotAndForward()
}

// Ready returns the actions accumulated since the last call, in order.
func (h *Handler) Ready() []Action {
	a := h.actions
	h.actions = nil
	return a
}

// Alignment describes the alignment in progress, for status displays.
type Alignment struct {
	// ID is the checkpoint being aligned; 0 when none is.
	ID uint64
	// Started is when its first barrier arrived.
	Started time.Duration
	// Arrived is, per input channel, when the barrier arrived, or -1 while
	// it is pending.
	Arrived []time.Duration
	// Ended is, per input channel, whether the channel has ended.
	Ended []bool
	// Unaligned: the checkpoint was snapshotted unaligned and its channel
	// state is captured until the pending barriers arrive.
	Unaligned bool
	// Blocking: the channels whose barrier arrived are held until the
	// others' come (exactly-once, or a savepoint in any mode), so that
	// the alignment stalls the subtask's input.
	Blocking bool
}

// Alignment returns a copy of the alignment state.
func (h *Handler) Alignment() Alignment {
	return Alignment{
		ID:        h.aligning,
		Started:   h.alignStart,
		Arrived:   append([]time.Duration(nil), h.arrivedAt...),
		Ended:     append([]bool(nil), h.ended...),
		Unaligned: h.capturing,
		Blocking:  h.aligning != 0 && !h.capturing && (h.mode == ExactlyOnce || h.barrier.Aligned),
	}
}
