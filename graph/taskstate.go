package graph

// TaskState is the runtime's side of a subtask's Context: it sets the current
// key, advances the watermark and fires timers, and takes and restores
// snapshots. Like Context it belongs to the subtask's goroutine.
type TaskState struct {
	ctx Context
}

// NewTaskState creates the state of subtask info, whose operator emits to
// out. A zero MaxParallelism means DefaultMaxParallelism.
func NewTaskState(info TaskInfo, out Output) *TaskState {
	if info.MaxParallelism == 0 {
		info.MaxParallelism = DefaultMaxParallelism
	}
	return &TaskState{ctx: Context{
		info:      info,
		groups:    KeyGroupRangeFor(info.Subtask, info.Parallelism, info.MaxParallelism),
		out:       out,
		keySlot:   -1,
		version:   1,
		watermark: MinWatermark,
	}}
}

// Context is the operator's view of this state.
func (s *TaskState) Context() *Context { return &s.ctx }

// SetKey makes key the current key of keyed state and keyed timers, as
// for a record of a hash-partitioned input or a timer. Every string is a
// key, the empty one too: a device that sends an empty key field, or an
// empty level of a topic a key comes from, has state of its own.
func (s *TaskState) SetKey(key string) {
	if key != s.ctx.key || !s.ctx.keyed {
		s.ctx.key, s.ctx.keyed = key, true
		s.ctx.keySlot = -1
	}
}

// SetUnkeyed makes key the current key of a record of an input that is
// not hash-partitioned: CurrentKey returns it, but the subtask does not own
// it, and keyed state or a keyed timer used now fails the job with
// ErrNoKey (the operator is wired wrongly, whatever the record).
func (s *TaskState) SetUnkeyed(key string) {
	if key != s.ctx.key || s.ctx.keyed {
		s.ctx.key, s.ctx.keyed = key, false
		s.ctx.keySlot = -1
	}
}

// Err returns the first misuse of keyed state (ErrNoKey, ErrForeignKey) since
// the subtask started; the runtime fails the job with it.
func (s *TaskState) Err() error { return s.ctx.err }

// Watermark is the current watermark.
func (s *TaskState) Watermark() int64 { return s.ctx.watermark }

// LowerWatermark sets event time back to wm if it is later, without firing
// or dropping a timer, for a restore that finds a watermark a wrong clock
// put far ahead; it reports whether it did. Records of windows that the
// late watermark closed already are then on time again.
func (s *TaskState) LowerWatermark(wm int64) bool {
	if wm >= s.ctx.watermark {
		return false
	}
	s.ctx.watermark = wm
	return true
}

// AdvanceWatermark moves event time to wm if that is later than now: it
// fires the timers up to wm in (time, key) order, then calls op.OnWatermark.
// It reports whether the watermark moved.
func (s *TaskState) AdvanceWatermark(wm int64, op Operator) (bool, error) {
	if wm <= s.ctx.watermark {
		return false, nil
	}
	s.ctx.watermark = wm
	for {
		t, ok := s.ctx.timers.popDue(wm)
		if !ok {
			break
		}
		s.SetKey(t.Key)
		if err := op.OnTimer(t.Time); err != nil {
			return true, err
		}
		if s.ctx.err != nil {
			return true, s.ctx.err
		}
	}
	return true, op.OnWatermark(wm)
}

// RestoredElsewhere marks the state restored from another store than the
// job's, before the operator opens: TaskInfo.RestoredElsewhere is set and
// OrderedInput cleared, the restore being no replay of the same run.
func (s *TaskState) RestoredElsewhere() {
	s.ctx.info.RestoredElsewhere, s.ctx.info.OrderedInput = true, false
}

// SetProcessingTime tells the operator's Context the wall-clock time, in
// milliseconds since the epoch.
func (s *TaskState) SetProcessingTime(now int64) { s.ctx.procTime = now }

// AdvanceProcessingTime fires the processing-time timers due at now (ms
// since the epoch), in (time, key) order.
func (s *TaskState) AdvanceProcessingTime(now int64, op Operator) error {
	s.ctx.procTime = now
	pt, ok := op.(ProcessingTimeOperator)
	for {
		t, due := s.ctx.procTimers.popDue(now)
		if !due {
			return nil
		}
		if !ok {
			continue
		}
		s.SetKey(t.Key)
		if err := pt.OnProcessingTimer(t.Time); err != nil {
			return err
		}
		if s.ctx.err != nil {
			return s.ctx.err
		}
	}
}

// NextProcessingTimer is the time of the earliest processing-time timer.
func (s *TaskState) NextProcessingTimer() (int64, bool) { return s.ctx.procTimers.next() }

// Freeze is the synchronous phase of a snapshot. It costs O(key groups +
// timers + keys deleted since base), copies no keyed state, and returns a
// view that later processing does not change. operator is what the
// operator's SnapshotState (or SnapshotStateParts) returned; the snapshot
// holds the parts, which must not change after. With incremental set, the snapshot
// holds only keyed state changed after version base (a snapshot restored or
// taken earlier, whose FrozenState.Version that was), with tombstones for
// deleted keys; timers, watermark and operator state are always whole.
func (s *TaskState) Freeze(operator [][]byte, base Version, incremental bool) *FrozenState {
	f := &FrozenState{
		operator:    operator,
		version:     s.ctx.version,
		incremental: incremental,
		watermark:   s.ctx.watermark,
		groups:      s.ctx.groups,
		maxPar:      s.ctx.info.MaxParallelism,
		timers:      s.ctx.timers.live(),
		procTimers:  s.ctx.procTimers.live(),
	}
	for _, t := range s.ctx.tables {
		f.tables = append(f.tables, t.freeze(base, incremental))
	}
	s.ctx.version++
	return f
}

// Restore loads snapshots taken by one or more subtasks (several when the
// parallelism changed) before the operator opens; each must be whole, an
// incremental chain merged by MergeChain. Restored state has version 0. Keyed state waits until the
// operator registers it by name; timers and the watermark apply at once. The
// watermark is the lowest among snaps, so no timer fires early.
func (s *TaskState) Restore(snaps []*SubtaskSnapshot) {
	for i, snap := range snaps {
		if i == 0 || snap.Watermark < s.ctx.watermark {
			s.ctx.watermark = snap.Watermark
		}
		for _, g := range snap.Groups {
			if !s.ctx.groups.Contains(g.KeyGroup) {
				continue
			}
			for ti := range g.Tables {
				t := &g.Tables[ti]
				if s.ctx.pending == nil {
					s.ctx.pending = make(map[string]map[int]*TableSnapshot)
				}
				byGroup := s.ctx.pending[t.Name]
				if byGroup == nil {
					byGroup = make(map[int]*TableSnapshot)
					s.ctx.pending[t.Name] = byGroup
				}
				byGroup[g.KeyGroup] = t
			}
			for _, t := range g.Timers {
				s.ctx.timers.add(t)
			}
			for _, t := range g.ProcessingTimers {
				s.ctx.procTimers.add(t)
			}
		}
	}
}
