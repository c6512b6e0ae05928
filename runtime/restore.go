package runtime

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/localrecovery"
)

// Restore: the checkpoint that recovery chose, decoded for every subtask,
// falling back past damage only, and the subtasks opened from it.

// load decodes the first usable candidate of Options.Restore, falling
// back to an older one only past damage (localrecovery.Fallback), and then
// forgets them all, for the chosen one's store may hold its state in
// memory (localrecovery.Candidate.Reader). A candidate in another store than
// the job's (a savepoint, remote storage) starts new chains and is no
// replay (breakChains); one in the job's store is the checkpoint that a
// checkpoint which changes nothing refers to (records).
func (j *Job) load() ([]taskRestore, error) {
	cands := j.opts.Restore
	j.opts.Restore = nil
	var rs []taskRestore
	i, err := localrecovery.Fallback(cands, j.opts.Logger, func(c localrecovery.Candidate) (err error) {
		rs, err = j.plan.load(c.Manifest, c.Reader())
		return err
	})
	if i < 0 {
		return nil, err
	}
	m := cands[i].Manifest
	if cands[i].Store != j.opts.Store {
		breakChains(rs)
	} else {
		j.records.written(m)
	}
	j.restoredFrom.Store(m)
	var inflight int64
	for _, a := range m.Subtasks {
		inflight += a.Stats.InFlightRecords
	}
	j.opts.Logger.Info("restoring checkpoint", "id", m.ID, "mode", m.Mode.String(), "in_flight_records", inflight)
	return rs, nil
}

// taskRestore is what one subtask restores: the snapshots that hold its key
// groups (several when the parallelism changed) and its own old subtask's
// acknowledgement and snapshot, if it had one.
type taskRestore struct {
	snaps []*graph.SubtaskSnapshot
	own   *restored
	// rescaled holds, when the operator's parallelism changed, the
	// non-keyed states of the old subtasks that fall to this one
	// (graph.RescalableState).
	rescaled [][]byte
	// inflight is the channel state of an unaligned checkpoint, per input
	// channel.
	inflight []channelState
	// foreign says the checkpoint is from another store than the job's (a
	// savepoint, remote storage): what follows is no replay of this run,
	// whose input may have been another (graph.TaskInfo.OrderedInput).
	foreign bool
}

// load reads, verifies and decodes everything the subtasks need to restore
// checkpoint m. An error means m cannot be used; nothing has been changed.
func (p *plan) load(m *checkpoint.Manifest, store checkpoint.Store) ([]taskRestore, error) {
	rs := make([]taskRestore, len(p.tasks))
	for i, t := range p.tasks {
		snaps, own, rescaled, err := restoredSnapshots(t, m, store)
		if err != nil {
			return nil, err
		}
		if own == nil && t.node.IsSource() && slices.Contains(m.Operators(), t.node.ID) {
			return nil, fmt.Errorf("%s: source parallelism changed to %d; its offsets cannot be redistributed", t.id, t.node.Parallelism)
		}
		if own != nil && own.ack.InFlight != nil {
			if err := sameChannels(t, p.inputs[i], m); err != nil {
				return nil, fmt.Errorf("checkpoint %d holds records in flight to %s (unaligned), which cannot be restored: %w", m.ID, t.id, err)
			}
		}
		inflight, err := restoreChannelState(own, store, len(p.inputs[i]))
		if err != nil {
			return nil, fmt.Errorf("checkpoint %d, channel state of %s: %w", m.ID, t.id, err)
		}
		rs[i] = taskRestore{snaps: snaps, own: own, inflight: inflight, rescaled: rescaled}
	}
	return rs, nil
}

// breakChains is for a restore from another store than the job's (a
// savepoint, remote storage): new increments cannot build on the restored
// chains, whose blobs are not in the job's store, so each subtask's first
// new snapshot is whole; and the restore is no replay of this run
// (taskRestore.foreign).
func breakChains(rs []taskRestore) {
	for i, r := range rs {
		if r.own != nil {
			r.own.continueChain = false
		}
		rs[i].foreign = true
	}
}

// open creates every subtask's operator or source and opens it, restoring
// rs (from load) unless it is nil.
func (p *plan) open(rs []taskRestore) error {
	for i, t := range p.tasks {
		var r taskRestore
		if rs != nil {
			r = rs[i]
		}
		if err := t.openFrom(r); err != nil {
			return fmt.Errorf("%s: %w", t.id, err)
		}
	}
	return nil
}

func (t *task) openFrom(r taskRestore) error {
	var offset uint64
	var opState []byte
	t.state.Restore(r.snaps)
	if r.foreign {
		t.state.RestoredElsewhere()
	}
	t.recovered = r.inflight
	if own := r.own; own != nil {
		if own.continueChain {
			// Increments continue the restored chain; its keyed state is
			// version 0.
			t.chains.base = chain{handles: append(slices.Clone(own.ack.Base), own.ack.State)}
		}
		opState = snapOperator(own)
		if own.ack.Source {
			offset = own.ack.Offset
			t.sourceWM = own.ack.Watermark
			t.maxTime = own.ack.Watermark
		}
	}
	if t.node.IsSource() {
		t.metrics.Watermark.Store(t.sourceWM)
		t.src = t.node.NewSource(t.id.Subtask)
		return t.src.Open(t.state.Context(), offset)
	}
	t.metrics.Watermark.Store(t.state.Watermark())
	t.op = t.node.NewOperator(t.id.Subtask)
	if err := t.op.Open(t.state.Context()); err != nil {
		return err
	}
	if r.rescaled != nil {
		rs, ok := t.op.(graph.RescalableState)
		if !ok {
			return fmt.Errorf("parallelism changed, and its operator state (not keyed) cannot be redistributed")
		}
		return rs.RestoreStates(r.rescaled)
	}
	if opState != nil {
		return t.op.RestoreState(opState)
	}
	return nil
}

// sameChannels checks that t and the subtasks feeding it have the
// parallelism they had in m, so that its input channels are the ones its
// channel state was captured on.
func sameChannels(t *task, ins []*task, m *checkpoint.Manifest) error {
	count := make(map[string]int)
	for _, a := range m.Subtasks {
		count[a.Task.Operator]++
	}
	for _, u := range append([]*task{t}, ins...) {
		if n := count[u.node.ID]; n != u.node.Parallelism {
			return fmt.Errorf("the parallelism of %s changed from %d to %d; restore with the old parallelism, or from a savepoint (savepoints are aligned)",
				u.node.ID, n, u.node.Parallelism)
		}
	}
	return nil
}

// restored is one old subtask's snapshot.
type restored struct {
	ack  checkpoint.Ack
	snap *graph.SubtaskSnapshot
	// continueChain: the operator had the same parallelism and the
	// snapshot is in the job's store, so its chain can be continued.
	continueChain bool
}

func snapOperator(r *restored) []byte {
	if len(r.snap.Operator) == 0 {
		return nil
	}
	return r.snap.Operator
}

// restoredSnapshots reads, verifies and decodes the snapshots in m of the
// old subtasks of t's operator whose key groups overlap t's, and returns them
// with the one of t's own index (nil if the operator had fewer subtasks or
// is new). Key groups outside t's range are dropped while decoding. When the
// parallelism changed and the operator had non-keyed state, it also returns
// the states of the old subtasks that fall to t (graph.RescalableState):
// non-nil, though maybe empty, in that case only.
func restoredSnapshots(t *task, m *checkpoint.Manifest, store checkpoint.Store) ([]*graph.SubtaskSnapshot, *restored, [][]byte, error) {
	var old []checkpoint.Ack
	for _, a := range m.Subtasks {
		if a.Task.Operator == t.node.ID {
			old = append(old, a)
		}
	}
	for _, a := range old {
		if a.MaxParallelism != 0 && a.MaxParallelism != t.node.MaxParallelism {
			return nil, nil, nil, fmt.Errorf("%s: max parallelism changed from %d to %d; keyed state cannot be mapped to the new key groups",
				t.node.ID, a.MaxParallelism, t.node.MaxParallelism)
		}
	}
	rescaling := len(old) > 0 && len(old) != t.node.Parallelism
	mine := graph.KeyGroupRangeFor(t.id.Subtask, t.node.Parallelism, t.node.MaxParallelism)
	var snaps []*graph.SubtaskSnapshot
	var own *restored
	var states [][]byte
	hasOperatorState := false
	for _, a := range old {
		theirs := graph.KeyGroupRangeFor(a.Task.Subtask, len(old), t.node.MaxParallelism)
		isOwn := a.Task.Subtask == t.id.Subtask
		overlaps := theirs.End > mine.Start && theirs.Start < mine.End
		fallsHere := rescaling && a.Task.Subtask%t.node.Parallelism == t.id.Subtask
		if !isOwn && !overlaps && !fallsHere {
			continue
		}
		var links []*graph.SubtaskSnapshot
		for _, h := range append(slices.Clone(a.Base), a.State) {
			data, err := store.ReadState(h)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("checkpoint %d: %w", m.ID, err)
			}
			snap, err := graph.DecodeSubtaskSnapshot(data, mine)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("checkpoint %d, state of %s: %w", m.ID, a.Task, err)
			}
			links = append(links, snap)
		}
		snap, err := graph.MergeChain(links)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("checkpoint %d, state of %s: %w", m.ID, a.Task, err)
		}
		hasOperatorState = hasOperatorState || len(snap.Operator) > 0
		if fallsHere && len(snap.Operator) > 0 {
			states = append(states, snap.Operator)
		}
		if overlaps || isOwn {
			snaps = append(snaps, snap)
		}
		if isOwn {
			own = &restored{ack: a, snap: snap, continueChain: !rescaling}
		}
	}
	if !rescaling || !hasOperatorState {
		return snaps, own, nil, nil
	}
	if states == nil {
		states = [][]byte{}
	}
	return snaps, own, states, nil
}

// bringBackWatermarks lowers, after a restore, every watermark further
// ahead of the wall clock than Options.MaxFuture to the clock less the
// out-of-orderness (a source's own, an operator's the largest), and says
// so: a reading from a device whose clock was wrong put it there, before
// its time was bounded, and every later reading would be late. Nothing is
// done while the wall clock reads before Options.ClockFloor.
func (j *Job) bringBackWatermarks() {
	wall := j.opts.WallClock()
	if j.opts.MaxFuture <= 0 || wall.Before(j.opts.ClockFloor) {
		return
	}
	now := wall.UnixMilli()
	limit := now + j.opts.MaxFuture.Milliseconds()
	// An operator is brought back to where the least of the sources is:
	// the clock less the largest out-of-orderness.
	var ooo time.Duration
	for _, t := range j.plan.tasks {
		if t.node.IsSource() {
			ooo = max(ooo, t.node.OutOfOrderness)
		}
	}
	var lowered []string
	var from int64
	for _, t := range j.plan.tasks {
		switch {
		case t.node.IsSource() && t.sourceWM > limit:
			from = max(from, t.sourceWM)
			t.sourceWM = now - t.node.OutOfOrderness.Milliseconds() - 1
			t.maxTime = t.sourceWM
			t.metrics.Watermark.Store(t.sourceWM)
		case !t.node.IsSource() && t.state.Watermark() > limit && t.state.Watermark() != graph.MaxWatermark:
			from = max(from, t.state.Watermark())
			t.state.LowerWatermark(now - ooo.Milliseconds() - 1)
			t.metrics.Watermark.Store(t.state.Watermark())
		default:
			continue
		}
		lowered = append(lowered, t.id.String())
	}
	if len(lowered) > 0 {
		j.opts.Logger.Warn("restored event time was ahead of the clock, brought back to it: a device clock was wrong before its readings' times were bounded",
			"subtasks", strings.Join(lowered, ","), "watermark_was", time.UnixMilli(from).UTC().Format(time.RFC3339),
			"now", wall.UTC().Format(time.RFC3339), "max_future", j.opts.MaxFuture.String())
	}
}
