package runtime

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
)

// simulator executes a plan on one goroutine. Every choice — which channel
// delivers next, when a source reads, when an acknowledgement or a
// notification arrives, when the clock moves, when the job crashes — comes
// from a seeded random source, so a failing seed replays exactly.
type simulator struct {
	rng         *rand.Rand
	mode        checkpoint.Mode
	incremental bool
	// alignmentTimeout, in exactly-once mode, switches alignments that
	// take this long to unaligned.
	alignmentTimeout time.Duration
	build            func() *graph.Topology
	// readSize is how many records a source reads at a time; 0 for one to
	// three, at random. Where a source's watermark moves after each read,
	// what a record meets downstream depends on it.
	readSize int
	store    *checkpoint.MemStore
	clock    time.Duration

	plan  *plan
	links []*simLink
	notes [][]controlMsg // per task, pending coordinator messages
	coord *checkpoint.Coordinator
	acks  []checkpoint.Ack
	// waiting are unaligned snapshots whose channel state is being
	// captured; their acknowledgement follows it.
	waiting []waitingAck
	decl    []declineMsg
	final   *checkpoint.Manifest // completion record being written
	// reported marks the tasks whose finish the coordinator was told of.
	reported []bool

	crashes, restores, completed int
	// replayed counts records restored as channel state and replayed;
	// early, batches whose credit went back before they were processed,
	// their records being channel state already.
	replayed, early int
	free            map[*graph.Batch]bool // partial batches sent without a credit
	// reused counts snapshots that stored nothing, being their base's
	// bytes again; elided, checkpoints completed without a record.
	reused, elided int
	records        records
	// lull counts down the steps during which the sources read nothing,
	// as when no input arrives: checkpoints then find nothing changed.
	lull int
	err  error
}

type waitingAck struct {
	ack      checkpoint.Ack
	inflight <-chan inflightResult
}

// simLink delivers into the receiver's inbox: a batch is received as it is
// sent. credits counts the credits its batches hold; a sender whose link
// holds simCredits waits (backpressured).
type simLink struct {
	s       *simulator
	to, ch  int
	credits int
}

func (l *simLink) send(b *graph.Batch, _ bool) error {
	l.credits++
	l.s.plan.tasks[l.to].accept(l.ch, b, false)
	return nil
}

// release checks that no credit goes back twice.
func (l *simLink) release() {
	if l.credits--; l.credits < 0 && l.s.err == nil {
		l.s.err = fmt.Errorf("a credit of channel %d of %s went back twice", l.ch, l.s.plan.tasks[l.to].id)
	}
}

// barrier queues an unaligned barrier with the receiver's notes, which it
// handles before its next batch.
func (l *simLink) barrier(b graph.Barrier, mark position, partial *graph.Batch) bool {
	if partial != nil {
		l.s.free[partial] = true
		l.s.plan.tasks[l.to].accept(l.ch, partial, true)
	}
	l.s.notes[l.to] = append(l.s.notes[l.to], controlMsg{kind: ctlBarrier, barrier: b, ch: l.ch, mark: mark})
	return partial != nil
}

func (s *simulator) now() time.Duration     { return s.clock }
func (s *simulator) newBatch() *graph.Batch { return &graph.Batch{} }

// wallMillis is the simulated clock; the simulated topologies use no
// processing-time timers.
func (s *simulator) wallMillis() int64 { return s.clock.Milliseconds() }

func (s *simulator) snapshot(t *task, req snapshotRequest) {
	ack, err := storeSnapshot(s.store, t, req)
	if err != nil {
		s.decline(t, req.id, err.Error())
		return
	}
	if !strings.HasPrefix(ack.State.Key, fmt.Sprintf("%d/", req.id)) {
		s.reused++
	}
	if req.inflight != nil {
		s.waiting = append(s.waiting, waitingAck{ack: ack, inflight: req.inflight})
		return
	}
	s.acks = append(s.acks, ack)
}

// collect acknowledges the unaligned snapshots whose channel state is in.
func (s *simulator) collect() {
	s.waiting = slices.DeleteFunc(s.waiting, func(w waitingAck) bool {
		select {
		case r := <-w.inflight:
			ack := w.ack
			if ok, reason := storeChannelState(s.store, &ack, r); ok {
				s.acks = append(s.acks, ack)
			} else if reason != "" {
				s.decl = append(s.decl, declineMsg{task: ack.Task, id: ack.ID, reason: reason})
			}
			return true
		default:
			return false
		}
	})
}

func (s *simulator) decline(t *task, id uint64, reason string) {
	s.decl = append(s.decl, declineMsg{task: t.id, id: id, reason: reason})
}

func (s *simulator) overtaken(t *task, id, by uint64) {
	s.decl = append(s.decl, declineMsg{task: t.id, id: id, by: by})
}

// start builds and opens a fresh incarnation of the job, restoring the
// newest completed checkpoint if there is one.
func (s *simulator) start() error {
	var restore []taskRestore
	ms, _ := s.store.Completed()
	s.plan = build(s.build(), taskConfig{mode: s.mode, batchSize: 1 + s.rng.IntN(4),
		incremental: s.incremental, maxChain: 2 + s.rng.IntN(4), alignmentTimeout: s.alignmentTimeout}, s)
	n := len(s.plan.tasks)
	s.notes = make([][]controlMsg, n)
	s.reported = make([]bool, n)
	s.links, s.free = nil, make(map[*graph.Batch]bool)
	s.plan.connect(func(_ *task, to, ch int) link {
		l := &simLink{s: s, to: to, ch: ch}
		s.links = append(s.links, l)
		return l
	})
	s.acks, s.decl, s.final, s.waiting = nil, nil, nil, nil
	s.records = records{}
	if len(ms) > 0 {
		var err error
		if restore, err = s.plan.load(ms[0], s.store); err != nil {
			return err
		}
		s.records.written(ms[0])
		s.restores++
	}
	if err := s.plan.open(restore); err != nil {
		return err
	}
	for _, t := range s.plan.tasks {
		if t.op != nil {
			for _, cs := range t.recovered {
				s.replayed += len(cs.records)
			}
			if err := t.replay(); err != nil {
				return err
			}
		}
	}
	for _, t := range s.plan.tasks {
		if err := t.announceRestored(); err != nil {
			return err
		}
	}
	lastID, _ := s.store.LastID()
	var ids []checkpoint.TaskID
	for _, t := range s.plan.tasks {
		ids = append(ids, t.id)
	}
	cfg := checkpoint.Config{Mode: s.mode, Interval: time.Duration(3+s.rng.IntN(15)) * time.Millisecond,
		Timeout: 500 * time.Millisecond, MaxConcurrent: 1 + s.rng.IntN(2), TolerableFailures: -1,
		AlignmentTimeout: s.alignmentTimeout}
	var err error
	s.coord, err = checkpoint.NewCoordinator(cfg, ids, lastID)
	return err
}

// apply carries out the coordinator's Ready the way Job.apply does, with the
// completion record written in a later step.
func (s *simulator) apply() {
	for s.coord.HasReady() {
		rd := s.coord.Ready()
		for _, a := range rd.Aborted {
			s.broadcast(controlMsg{kind: ctlAbort, id: a.ID})
			_ = s.store.Discard(a.ID)
		}
		for _, tr := range rd.Triggers {
			for i, t := range s.plan.tasks {
				if t.node.IsSource() {
					s.notes[i] = append(s.notes[i], controlMsg{kind: ctlTrigger, barrier: tr.Barrier})
				}
			}
		}
		if m := rd.Finalize; m != nil {
			if s.records.elide(m) {
				s.coord.Finalized(m.ID, nil)
			} else {
				s.final = m
			}
		}
		for _, m := range rd.Completed {
			s.completed++
			if m.SameAs != 0 { // the job's OnComplete sees it so
				s.elided++
			}
			s.broadcast(controlMsg{kind: ctlComplete, id: m.ID})
		}
		if rd.Failed != nil {
			s.err = rd.Failed
		}
	}
}

// note handles task i's oldest note.
func (s *simulator) note(t *task, i int) error {
	m := s.notes[i][0]
	s.notes[i] = s.notes[i][1:]
	switch m.kind {
	case ctlTrigger:
		return t.trigger(m.barrier)
	case ctlComplete:
		return t.completed(m.id)
	case ctlBarrier:
		return t.barrierArrived(m.ch, m.barrier, m.mark)
	default:
		return t.aborted(m.id)
	}
}

func (s *simulator) broadcast(m controlMsg) {
	for i := range s.notes {
		s.notes[i] = append(s.notes[i], m)
	}
}

// run drives the job to the end of its input, crashing it up to maxCrashes
// times at random steps.
func (s *simulator) run(maxCrashes int) error {
	if err := s.start(); err != nil {
		return err
	}
	for steps := 0; ; steps++ {
		if steps > 200_000 {
			return fmt.Errorf("no end after %d steps", steps)
		}
		if s.err != nil {
			return s.err
		}
		if s.crashes < maxCrashes && s.rng.IntN(400) == 0 {
			s.crashes++
			if err := s.start(); err != nil {
				return fmt.Errorf("restore after crash %d: %w", s.crashes, err)
			}
			continue
		}
		done, err := s.step()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// step takes one random action; it reports whether every task finished.
func (s *simulator) step() (bool, error) {
	type action func() error
	var enabled []action
	allFinished := true
	if s.lull > 0 {
		s.lull--
	} else if s.rng.IntN(200) == 0 {
		s.lull = 50 + s.rng.IntN(200)
	}
	for i, t := range s.plan.tasks {
		if !t.finished {
			allFinished = false
		}
		if s.backpressured(t) {
			continue // as if blocked waiting for credits
		}
		if t.src != nil && !t.finished && s.lull == 0 {
			enabled = append(enabled, func() error {
				n := s.readSize
				if n == 0 {
					n = 1 + s.rng.IntN(3)
				}
				buf := make([]graph.Record, n)
				_, err := t.readSource(buf)
				return err
			})
		}
		for ch := range s.plan.inputs[i] {
			if t.inbox.ready(ch) {
				enabled = append(enabled, func() error {
					// As the runtime does, an unaligned barrier sent before
					// the batch is handled first.
					for slices.ContainsFunc(s.notes[i], func(m controlMsg) bool { return m.kind == ctlBarrier }) {
						if err := s.note(t, i); err != nil {
							return err
						}
					}
					if !t.inbox.ready(ch) {
						return nil
					}
					b := t.inbox.take(ch)
					if t.inbox.credited[b] && !s.free[b] {
						s.early++
					}
					delete(s.free, b)
					err := t.process(ch, b)
					t.inbox.done(ch, b)
					return err
				})
			}
		}
		if len(s.notes[i]) > 0 {
			enabled = append(enabled, func() error { return s.note(t, i) })
		}
		if _, ok := t.handler.Deadline(); ok {
			enabled = append(enabled, t.tick)
		}
		if t.hasPartial() {
			enabled = append(enabled, func() error { t.flushAll(); return nil })
		}
	}
	s.collect()
	if len(s.acks) > 0 {
		enabled = append(enabled, func() error {
			k := s.rng.IntN(len(s.acks))
			a := s.acks[k]
			s.acks = slices.Delete(s.acks, k, k+1)
			s.coord.Acknowledge(a)
			return nil
		})
	}
	if len(s.decl) > 0 {
		enabled = append(enabled, func() error {
			d := s.decl[0]
			s.decl = s.decl[1:]
			if d.by != 0 {
				s.coord.Overtaken(d.task, d.id, d.by)
			} else {
				s.coord.Decline(d.task, d.id, d.reason)
			}
			return nil
		})
	}
	if s.final != nil {
		enabled = append(enabled, func() error {
			m := s.final
			s.final = nil
			err := s.store.Complete(m)
			if err == nil {
				s.records.written(m)
			}
			s.coord.Finalized(m.ID, err)
			return nil
		})
	}
	if allFinished && len(enabled) == 0 {
		for _, l := range s.links {
			if l.credits != 0 {
				return false, fmt.Errorf("channel %d of %s ended holding %d credits", l.ch, s.plan.tasks[l.to].id, l.credits)
			}
		}
		return true, nil
	}
	// The clock moves often enough for several periodic checkpoints in a
	// run, not so often that they time out.
	if s.rng.IntN(4) == 0 || len(enabled) == 0 {
		s.clock += time.Millisecond
		s.coord.Tick(s.clock)
	} else if err := enabled[s.rng.IntN(len(enabled))](); err != nil {
		return false, err
	}
	for i, t := range s.plan.tasks {
		if t.finished && !s.reported[i] {
			s.reported[i] = true
			s.coord.TaskFinished(t.id)
		}
	}
	s.apply()
	return false, nil
}

// simCredits is the number of batches a simulated channel holds before its
// sender waits, as with the runtime's credits.
const simCredits = 4

// backpressured reports whether a downstream channel of t is full.
func (s *simulator) backpressured(t *task) bool {
	for _, o := range t.outputs {
		for _, c := range o.channels {
			if c.link.(*simLink).credits >= simCredits {
				return true
			}
		}
	}
	return false
}

// keyedState is every keyed value of a finished job: operator → key →
// table → encoded value.
type keyedState map[string]map[string]map[string][]byte

func (s *simulator) state() (keyedState, error) {
	out := make(keyedState)
	for _, t := range s.plan.tasks {
		if t.op == nil {
			continue
		}
		snap, err := graph.DecodeSubtaskSnapshot(t.state.Freeze(nil, 0, false).Encode(), graph.KeyGroupRange{Start: 0, End: 1 << 30})
		if err != nil {
			return nil, err
		}
		byKey := out[t.node.ID]
		if byKey == nil {
			byKey = make(map[string]map[string][]byte)
			out[t.node.ID] = byKey
		}
		for _, g := range snap.Groups {
			for _, tb := range g.Tables {
				for k, key := range tb.Keys {
					if byKey[key] == nil {
						byKey[key] = make(map[string][]byte)
					}
					byKey[key][tb.Name] = tb.Values[k]
				}
			}
		}
	}
	return out, nil
}

// diff describes how got differs from want. With lossOnly, it reports only
// losses: a count missing or lower than wanted; other tables may differ
// under duplicates (sums modulo a prime, parities).
func (got keyedState) diff(want keyedState, lossOnly bool) string {
	var out []string
	for _, op := range slices.Sorted(maps.Keys(want)) {
		for _, key := range slices.Sorted(maps.Keys(want[op])) {
			for _, tb := range slices.Sorted(maps.Keys(want[op][key])) {
				w, g := want[op][key][tb], got[op][key][tb]
				if bytes.Equal(g, w) {
					continue
				}
				if lossOnly && (tb != "count" || g != nil && decodeFloat(g) >= decodeFloat(w)) {
					continue
				}
				out = append(out, fmt.Sprintf("%s %s %s: got %s, want %s", op, key, tb, floatOf(g), floatOf(w)))
			}
		}
	}
	if !lossOnly {
		for op := range got {
			for key := range got[op] {
				if want[op][key] == nil {
					out = append(out, fmt.Sprintf("%s %s: unexpected key", op, key))
				}
			}
		}
	}
	return strings.Join(out, "\n")
}

func decodeFloat(b []byte) float64 {
	v, _ := graph.Float64Codec{}.Decode(b)
	return v
}

func floatOf(b []byte) string {
	if b == nil {
		return "nothing"
	}
	v, err := graph.Float64Codec{}.Decode(b)
	if err != nil {
		return fmt.Sprintf("%x", b)
	}
	return fmt.Sprint(v)
}
