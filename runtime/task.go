package runtime

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
)

// errStopped is a link's answer once the job is stopping.
var errStopped = errors.New("job stopping")

// link carries batches from one upstream subtask to one input channel of a
// downstream subtask.
type link interface {
	// send hands b over; it may block for flow control, unless the sender
	// reserved the credit it takes already. After send, b belongs to the
	// receiver.
	send(b *graph.Batch, reserved bool) error
	// barrier hands an unaligned barrier to the receiver ahead of the
	// batches in flight; mark is the position of the sender on the link
	// when it sent it. The sender's partial batch, if not nil, goes first, in
	// order with the batches sent before it but without waiting for a
	// credit, so that the records in it do not wait for the backpressure
	// to ease either; barrier reports whether it took it. It never blocks.
	barrier(b graph.Barrier, mark position, partial *graph.Batch) bool
	// release gives back the credit a batch sent with send held, once the
	// receiver is done with it (inbox).
	release()
}

// env is what a task needs from its executor.
type env interface {
	// now is the time on the job's monotonic clock.
	now() time.Duration
	// wallMillis is processing time: the wall clock in milliseconds since
	// the epoch.
	wallMillis() int64
	// newBatch returns an empty batch.
	newBatch() *graph.Batch
	// snapshot runs the asynchronous phase of a snapshot and acknowledges
	// it, or declines the checkpoint on failure.
	snapshot(t *task, s snapshotRequest)
	// decline tells the coordinator that t cannot take checkpoint id.
	decline(t *task, id uint64, reason string)
	// overtaken tells the coordinator that t gave up checkpoint id for
	// the newer checkpoint by.
	overtaken(t *task, id, by uint64)
}

// snapshotRequest is the synchronous phase's result, handed to the
// asynchronous phase.
type snapshotRequest struct {
	id     uint64
	frozen *graph.FrozenState
	ack    checkpoint.Ack // all but State, and Stats.Async/StateSize
	// inflight, for an unaligned snapshot, delivers its channel state once
	// captured; the acknowledgement waits for it.
	inflight <-chan inflightResult
}

// task is one subtask: a source or an operator with its state, its barrier
// handler and its outputs. It is driven by one goroutine at a time.
type task struct {
	id      checkpoint.TaskID
	index   int // in plan.tasks
	node    *graph.Node
	env     env
	state   *graph.TaskState
	op      graph.Operator // nil for a source
	src     graph.Source   // nil for an operator
	handler *checkpoint.Handler

	inbox    *inbox              // what t received and has not processed
	inputOf  []int               // channel → logical input
	upstream []checkpoint.TaskID // channel → the sending subtask
	wm       []int64             // channel → watermark
	idle     []bool              // channel → its sender is idle (graph.Control.Idle)
	idleOut  bool                // t told its outputs it is idle
	open     int                 // channels not yet ended

	// Unaligned checkpoints (see inflight.go): per channel, the positions
	// received and processed, and the marks of the barriers of checkpoint
	// markID that arrived; the capture in progress; and the channel state a
	// restore brought back, replayed before any new input.
	received, processed []position
	marks               []position
	marked              []bool
	markID              uint64
	capture             *capture
	recovered           []channelState

	outputs   []*output
	batchSize int
	rejected  func(checkpoint.TaskID, *graph.Record, error) error // Options.OnRejected

	// sources
	maxTime     int64 // newest event time read, for watermarks
	sourceWM    int64
	sourceEnded bool
	lastInput   time.Duration // when the source last read a record, on the job's clock
	clockFloor  int64         // Options.ClockFloor, Unix milliseconds

	proc procClock // processing time

	buffered      int64 // records held on blocked channels this alignment
	bufferedBytes int64
	finished      bool
	err           error // first failure to emit (the job is stopping)
	metrics       *TaskMetrics
	chains        chains
	// offsets are a source's snapshotted offsets by checkpoint, until the
	// checkpoint's outcome is known.
	offsets map[uint64]uint64

	// alignView is the handler's alignment as of the last control event,
	// for Job.Status on other goroutines.
	alignMu   sync.Mutex
	alignView checkpoint.Alignment

	// onAligned, if set (Options.OnAligned), hears of every alignment
	// that ends; backlog says how many records wait for it on an input
	// channel (taskConfig.backlog). peak is, per channel, the largest
	// backlog seen in the alignment peakOf; said is the last alignment
	// reported or snapshotted.
	onAligned func(Aligned)
	backlog   func(t *task, ch int) int64
	peak      []int64
	peakOf    uint64
	said      uint64
}

// accept takes batch b off channel ch into the inbox: it is received
// (counted, and captured if it is channel state), and waits there until
// the executor processes it. free says it came without a credit.
func (t *task) accept(ch int, b *graph.Batch, free bool) {
	t.receive(ch, b)
	if t.inbox.put(ch, b, free, t.fullyCaptured(ch)) {
		t.noteBuffered(b)
	}
}

// process handles one batch from channel ch, taken from the inbox.
func (t *task) process(ch int, b *graph.Batch) error {
	if t.alignView.Blocking {
		t.measureAlignment(t.alignView)
	}
	t.processed[ch] = t.processed[ch].after(b)
	if err := t.processRecords(ch, b.Records); err != nil {
		return err
	}
	switch b.Control.Kind {
	case graph.BarrierControl:
		return t.barrierArrived(ch, b.Control.Barrier, t.processed[ch])
	case graph.WatermarkControl:
		return t.watermarkArrived(ch, b.Control)
	case graph.EndOfStreamControl:
		t.wm[ch] = graph.MaxWatermark
		t.open--
		if c := t.capture; c != nil && c.until[ch] == openMark {
			if err := c.close(ch, t.processed[ch]); err != nil {
				return t.fail(err)
			}
		}
		if err := t.advanceWatermark(); err != nil {
			return err
		}
		t.handler.Tick(t.env.now())
		t.handler.Step(checkpoint.Event{Kind: checkpoint.InputEnded, Channel: ch})
		if err := t.act(); err != nil {
			return err
		}
		if t.open == 0 {
			t.finish()
		}
	}
	return t.err
}

// watermarkArrived takes watermark control c of channel ch.
func (t *task) watermarkArrived(ch int, c graph.Control) error {
	changed := c.Idle != t.idle[ch]
	t.idle[ch] = c.Idle
	if c.Watermark > t.wm[ch] {
		t.wm[ch], changed = c.Watermark, true
	}
	if changed {
		return t.advanceWatermark()
	}
	return t.err
}

// announceRestored tells t's outputs, once its channel state is replayed,
// the event time it restored: a subtask downstream restores its own but
// not what each of its input channels had said, and would otherwise wait
// for news on every one of them before its event time moved again (a
// window would not close while a source has nothing new to read).
func (t *task) announceRestored() error {
	wm := t.sourceWM
	if !t.node.IsSource() {
		wm = t.state.Watermark()
	}
	if wm != graph.MinWatermark && wm != graph.MaxWatermark {
		t.broadcast(graph.Control{Kind: graph.WatermarkControl, Watermark: wm})
	}
	return t.err
}

// processRecords runs the operator on records of channel ch.
func (t *task) processRecords(ch int, recs []graph.Record) error {
	t.metrics.RecordsIn.Add(int64(len(recs)))
	t.state.SetProcessingTime(t.processingTime())
	input := t.inputOf[ch]
	keyed := t.node.Inputs[input].Partitioner.Kind == graph.HashPartitioning
	for i := range recs {
		r := &recs[i]
		if keyed {
			t.state.SetKey(r.Key)
		} else {
			t.state.SetUnkeyed(r.Key)
		}
		if err := t.op.ProcessRecord(input, r); err != nil {
			if err = t.reject(r, err); err != nil {
				return t.fail(err)
			}
		}
		if err := t.state.Err(); err != nil {
			return t.fail(err)
		}
	}
	return nil
}

// reject hands a record the operator rejected to Options.OnRejected, and
// returns what fails the job: err if it is no graph.RecordError or nothing
// handles it, else the handler's answer.
func (t *task) reject(r *graph.Record, err error) error {
	var rejected *graph.RecordError
	if !errors.As(err, &rejected) {
		return err
	}
	t.metrics.Rejected.Add(1)
	if t.rejected == nil {
		return err
	}
	return t.rejected(t.id, r, rejected.Err)
}

// Reject implements graph.Rejecter: it rejects r as a RecordError of
// ProcessRecord would (Context.Reject).
func (t *task) Reject(r *graph.Record, err error) error { return t.reject(r, graph.Reject(err)) }

// barrierArrived handles barrier b on channel ch, in order (mark is the
// position processed on ch) or ahead of what is queued (mark is the
// position of its sender when it sent it).
func (t *task) barrierArrived(ch int, b graph.Barrier, mark position) error {
	if err := t.noteBarrier(ch, b, mark); err != nil {
		return t.fail(err)
	}
	t.handler.Tick(t.env.now())
	t.handler.Step(checkpoint.Event{Kind: checkpoint.BarrierArrived, Channel: ch, Barrier: b})
	return t.act()
}

// tick tells the handler the time, which may end an alignment.
func (t *task) tick() error {
	t.handler.Tick(t.env.now())
	return t.act()
}

// advanceWatermark moves the subtask's event time to the least watermark
// of its active inputs (neither idle nor ended), or of all when none is,
// and tells its outputs when that moved it or changed whether it is idle.
func (t *task) advanceWatermark() error {
	low, lowActive := int64(graph.MaxWatermark), int64(graph.MaxWatermark)
	idle := true // no input is active: each is idle or ended
	for ch, w := range t.wm {
		low = min(low, w)
		if !t.idle[ch] && w != graph.MaxWatermark {
			lowActive, idle = min(lowActive, w), false
		}
	}
	if !idle {
		low = lowActive
	}
	moved, err := t.state.AdvanceWatermark(low, t.op)
	if moved {
		t.metrics.Watermark.Store(low)
	}
	if err != nil {
		return t.fail(err)
	}
	if wm := t.state.Watermark(); (moved || idle != t.idleOut) && wm != graph.MaxWatermark {
		t.idleOut = idle
		t.broadcast(graph.Control{Kind: graph.WatermarkControl, Watermark: wm, Idle: idle})
	}
	return t.err
}

// processingTime is the subtask's processing time now (procClock).
func (t *task) processingTime() int64 { return t.proc.read(t.env.wallMillis(), t.env.now()) }

// fireProcessingTimers fires the processing-time timers that are due and
// returns when the next one is, if any.
func (t *task) fireProcessingTimers() (int64, bool, error) {
	next, ok := t.state.NextProcessingTimer()
	if !ok {
		return 0, false, nil
	}
	if now := t.processingTime(); next <= now {
		if err := t.state.AdvanceProcessingTime(now, t.op); err != nil {
			return 0, false, t.fail(err)
		}
		next, ok = t.state.NextProcessingTimer()
	}
	return next, ok, t.err
}

// finish ends the subtask's output.
func (t *task) finish() {
	t.broadcast(graph.Control{Kind: graph.EndOfStreamControl})
	t.finished = true
}

// act carries out the handler's actions in order.
func (t *task) act() error {
	prev := t.alignView // written only on this goroutine
	align := t.handler.Alignment()
	t.alignMu.Lock()
	t.alignView = align
	t.alignMu.Unlock()
	t.measureAlignment(align)
	for _, a := range t.handler.Ready() {
		switch a.Kind {
		case checkpoint.Snapshot:
			if prev.ID == a.ID && prev.Blocking {
				t.aligned(prev, a.Alignment, a.TimedOut, false)
			}
			t.said = a.ID
			if err := t.snapshot(a); err != nil {
				return err
			}
		case checkpoint.Forward:
			if a.Barrier.Unaligned {
				t.overtake(a.Barrier)
			} else {
				t.broadcast(graph.Control{Kind: graph.BarrierControl, Barrier: a.Barrier})
			}
		case checkpoint.Captured:
			if c := t.capture; c != nil && c.id == a.ID {
				c.barriersIn = true
				t.checkCapture()
			}
		case checkpoint.Decline:
			t.dropCapture(a.ID)
			if a.Overtaken {
				t.env.overtaken(t, a.ID, a.Barrier.ID)
			} else {
				t.env.decline(t, a.ID, a.Reason)
			}
		case checkpoint.Block:
			t.inbox.block(a.Channel)
		case checkpoint.Unblock:
			t.inbox.unblock(a.Channel)
		}
	}
	if prev.Blocking && prev.ID != align.ID && prev.ID != t.said {
		// Given up before its snapshot: aborted, declined or overtaken.
		t.aligned(prev, t.env.now()-prev.Started, false, true)
	}
	return t.err
}

// measureAlignment notes the backlog of each input whose barrier a is
// still waiting for, if anyone listens for ended alignments: as each
// batch is taken and as each barrier arrives.
func (t *task) measureAlignment(a checkpoint.Alignment) {
	if t.onAligned == nil || !a.Blocking {
		return
	}
	if t.peakOf != a.ID {
		t.peakOf = a.ID
		t.peak = make([]int64, len(a.Arrived))
	}
	for ch, at := range a.Arrived {
		if at < 0 && !a.Ended[ch] {
			t.peak[ch] = max(t.peak[ch], t.backlog(t, ch))
		}
	}
}

// aligned reports alignment a, which took d, to Options.OnAligned: it
// ended in a snapshot (unaligned when timedOut) or, abandoned, in none.
// The input it waited for is the one still pending in a (the last view
// before its end) with the largest backlog.
func (t *task) aligned(a checkpoint.Alignment, d time.Duration, timedOut, abandoned bool) {
	t.said = a.ID
	if t.onAligned == nil {
		return
	}
	r := Aligned{Task: t.id, ID: a.ID, Started: a.Started, Duration: d, Buffered: t.buffered,
		TimedOut: timedOut, Abandoned: abandoned, Backlog: -1}
	for ch, at := range a.Arrived {
		if at >= 0 || a.Ended[ch] {
			continue
		}
		var peak int64
		if t.peakOf == a.ID && ch < len(t.peak) {
			peak = t.peak[ch]
		}
		if peak > r.Backlog {
			r.WaitedFor, r.Backlog = t.upstream[ch], peak
		}
	}
	r.Backlog = max(r.Backlog, 0)
	t.onAligned(r)
}

// snapshot takes the synchronous phase of checkpoint a.ID and hands the rest
// to the executor.
func (t *task) snapshot(a checkpoint.Action) error {
	start := t.env.now()
	req := snapshotRequest{id: a.ID, ack: checkpoint.Ack{
		Task:           t.id,
		ID:             a.ID,
		MaxParallelism: t.node.MaxParallelism,
		Watermark:      t.state.Watermark(),
		Stats: checkpoint.SubtaskStats{
			StartDelay:      a.StartDelay,
			Alignment:       a.Alignment,
			BufferedRecords: t.buffered,
			BufferedBytes:   t.bufferedBytes,
			Unaligned:       a.Unaligned,
			TimedOut:        a.TimedOut,
		},
	}}
	var opState [][]byte
	if t.src != nil {
		req.ack.Source, req.ack.Offset, req.ack.Watermark = true, t.src.Offset(), t.sourceWM
		if _, ok := t.src.(graph.OffsetCommitter); ok {
			if t.offsets == nil {
				t.offsets = make(map[uint64]uint64)
			}
			t.offsets[a.ID] = req.ack.Offset
		}
	} else {
		var err error
		if parts, ok := t.op.(graph.StateParts); ok {
			opState, err = parts.SnapshotStateParts(a.ID)
		} else {
			var state []byte
			state, err = t.op.SnapshotState(a.ID)
			opState = [][]byte{state}
		}
		if err != nil {
			t.env.decline(t, a.ID, "operator snapshot: "+err.Error())
			return nil
		}
	}
	if a.Unaligned {
		c, err := t.startCapture(a.ID)
		if err != nil {
			t.env.decline(t, a.ID, err.Error())
			return nil
		}
		t.capture, req.inflight = c, c.result
	}
	base, baseChain, incremental := t.chains.next()
	req.frozen = t.state.Freeze(opState, base, incremental)
	req.ack.Base = baseChain
	t.chains.took(a.ID, req.frozen.Version())
	req.ack.Stats.Sync = t.env.now() - start
	t.buffered, t.bufferedBytes = 0, 0
	t.metrics.Buffered.Store(0)
	t.env.snapshot(t, req)
	return nil
}

// stored completes req's acknowledgement once its snapshot of digest d is
// stored at h, and remembers the chain for incremental snapshots to build
// on. It is called by the asynchronous phase.
func (t *task) stored(req snapshotRequest, h checkpoint.StateHandle, d digest) checkpoint.Ack {
	t.chains.stored(req.id, append(slices.Clone(req.ack.Base), h), d)
	ack := req.ack
	ack.State = h
	ack.Stats.StateSize = h.Size
	return ack
}

// reused completes req's acknowledgement with the base's chain, a snapshot
// of the same bytes already stored: nothing is stored, and the chain stays
// as it was. It is called by the asynchronous phase.
func (t *task) reused(req snapshotRequest, chain []checkpoint.StateHandle, d digest) checkpoint.Ack {
	t.chains.stored(req.id, chain, d)
	ack := req.ack
	ack.Base, ack.State = chain[:len(chain)-1], chain[len(chain)-1]
	ack.Stats.StateSize = 0
	return ack
}

// noteBuffered counts a batch held back on a blocked channel.
func (t *task) noteBuffered(b *graph.Batch) {
	t.buffered += int64(len(b.Records))
	t.metrics.Buffered.Store(t.buffered)
	for i := range b.Records {
		t.bufferedBytes += recordOverhead + int64(len(b.Records[i].Key))
	}
}

// trigger starts checkpoint b at a source.
func (t *task) trigger(b graph.Barrier) error {
	if t.finished {
		return nil // the coordinator aborts checkpoints once a task finishes
	}
	t.handler.Tick(t.env.now())
	t.handler.Trigger(b)
	return t.act()
}

// listener is the subtask's operator or source if it listens to checkpoint
// outcomes.
func (t *task) listener() (graph.CheckpointListener, bool) {
	if t.src != nil {
		l, ok := t.src.(graph.CheckpointListener)
		return l, ok
	}
	l, ok := t.op.(graph.CheckpointListener)
	return l, ok
}

// aborted tells the handler and the operator that checkpoint id was aborted.
func (t *task) aborted(id uint64) error {
	t.dropCapture(id)
	t.chains.aborted(id)
	delete(t.offsets, id)
	t.handler.Step(checkpoint.Event{Kind: checkpoint.CheckpointAborted, ID: id})
	if l, ok := t.listener(); ok {
		l.CheckpointAborted(id)
	}
	return t.act()
}

// completed tells the operator or source that checkpoint id is complete.
func (t *task) completed(id uint64) error {
	t.chains.completed(id)
	if offset, ok := t.offsets[id]; ok {
		for k := range t.offsets {
			if k <= id {
				delete(t.offsets, k)
			}
		}
		if err := t.src.(graph.OffsetCommitter).CommitOffset(offset); err != nil {
			return t.fail(fmt.Errorf("committing offset %d of checkpoint %d: %w", offset, id, err))
		}
	}
	if l, ok := t.listener(); ok {
		if err := l.CheckpointComplete(id); err != nil {
			return t.fail(fmt.Errorf("checkpoint %d complete: %w", id, err))
		}
	}
	return nil
}

// readSource reads and emits one buffer of records. It reports whether the
// source had any; at the end of input it finishes the subtask.
func (t *task) readSource(buf []graph.Record) (bool, error) {
	n, err := t.src.Read(buf)
	if n > 0 {
		t.lastInput = t.env.now()
		if t.idleOut { // ahead of the records: they are no idle input's
			t.idleOut = false
			t.broadcast(graph.Control{Kind: graph.WatermarkControl, Watermark: t.sourceWM})
		}
	}
	for i := 0; i < n; i++ {
		r := &buf[i]
		t.maxTime = max(t.maxTime, r.Time)
		t.Emit(r)
	}
	t.metrics.RecordsIn.Add(int64(n))
	if t.node.Watermarks && n > 0 {
		if wm := t.maxTime - t.node.OutOfOrderness.Milliseconds() - 1; wm > t.sourceWM {
			t.sourceWM = wm
			t.metrics.Watermark.Store(wm)
			t.broadcast(graph.Control{Kind: graph.WatermarkControl, Watermark: wm})
		}
	}
	if err == io.EOF {
		t.sourceEnded = true
		t.metrics.Watermark.Store(graph.MaxWatermark)
		t.finish()
		return n > 0, t.err
	}
	if err != nil {
		return false, t.fail(err)
	}
	return n > 0, t.err
}

// idleTick is called while the source has nothing to read: once it has
// read nothing for its node's Idleness.Timeout, it is idle and its
// watermark follows the wall clock (graph.Idleness). It returns how long
// until it should be called again, or 0 when only input can change
// anything.
func (t *task) idleTick() time.Duration {
	idleness := t.node.Idleness
	if !t.node.Watermarks || idleness.Timeout <= 0 || t.finished {
		return 0
	}
	if wait := t.lastInput + idleness.Timeout - t.env.now(); wait > 0 {
		return wait
	}
	if !t.idleOut {
		t.idleOut = true
		t.broadcast(graph.Control{Kind: graph.WatermarkControl, Watermark: t.sourceWM, Idle: true})
	}
	if t.maxTime == graph.MinWatermark {
		return 0 // nothing read: no window of this source to close
	}
	horizon := t.maxTime + idleness.Horizon.Milliseconds()
	wall := t.env.wallMillis()
	if wall < t.clockFloor {
		return idleFollow // the clock is not set yet: ask it again
	}
	wm := min(wall-(t.node.OutOfOrderness+idleness.Lag).Milliseconds()-1, horizon)
	if wm > t.sourceWM {
		t.sourceWM = wm
		t.metrics.Watermark.Store(wm)
		t.broadcast(graph.Control{Kind: graph.WatermarkControl, Watermark: wm, Idle: true})
	}
	if t.sourceWM >= horizon {
		return 0
	}
	return idleFollow
}

// idleFollow is how often an idle source's watermark catches up with the
// wall clock: a window closes at most this late.
const idleFollow = 250 * time.Millisecond

func (t *task) fail(err error) error {
	return fmt.Errorf("%s: %w", t.id, err)
}
