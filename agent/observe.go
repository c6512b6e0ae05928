package agent

import (
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/runtime"
)

// observe adds to out, the status state.status built from the job's
// st, what tells an operator how the checkpoints keep up: which subtasks
// acknowledged the checkpoints in flight, which completed ones were late,
// each operator's event time and how far it trails now, and the recent
// alignment stalls; all at now.
func (s *state) observe(out *api.Status, inc *incarnation, st runtime.Status, now clocks) {
	out.TimeUnixMS = now.wall.UnixMilli()
	if s.stalls != nil {
		out.Stalls = s.stalls.list(now)
	}
	if inc == nil {
		return
	}
	out.Checkpoints.IntervalMS = inc.interval.Milliseconds()
	if inc.lateCheckpoints != nil {
		out.Checkpoints.Late = inc.lateCheckpoints.Load()
	}
	for i := range out.History {
		h := &out.History[i]
		h.Late = h.Status == "completed" && isLate(inc.interval, time.Duration(h.DurationMS)*time.Millisecond)
	}
	for i, p := range st.Pending {
		if i >= len(out.InFlight) {
			break
		}
		at := make(map[string]time.Duration, len(p.Acked))
		for k, t := range p.Acked {
			at[t.String()] = p.AckedAt[k] - p.Triggered
		}
		acks := make([]api.Ack, 0, len(st.Tasks))
		for _, t := range st.Tasks {
			a := api.Ack{Subtask: t.ID.String()}
			if d, ok := at[a.Subtask]; ok {
				a.Acked, a.AtMS = true, max(d.Milliseconds(), 0)
			}
			acks = append(acks, a)
		}
		out.InFlight[i].Subtasks = acks
	}
	watermarks(out, st, now.wall)
}

// watermarks sets each operator's and subtask's event time and the
// operator's lag behind now, the wall clock's time of day: event time is
// a time of day too. An operator's is its least subtask's, none while
// one of them has none.
func watermarks(out *api.Status, st runtime.Status, now time.Time) {
	byOp := make(map[string]*api.Operator, len(out.Operators))
	for i := range out.Operators {
		byOp[out.Operators[i].ID] = &out.Operators[i]
	}
	least := make(map[string]int64)
	for _, t := range st.Tasks {
		op := byOp[t.ID.Operator]
		if op == nil {
			continue
		}
		wm := t.Watermark
		if wm == graph.MaxWatermark { // input ended: no time to trail
			continue
		}
		if l, ok := least[t.ID.Operator]; !ok || wm < l {
			least[t.ID.Operator] = wm
		}
		for k := range op.Subtasks {
			if s := &op.Subtasks[k]; s.Index == t.ID.Subtask && wm != graph.MinWatermark {
				s.WatermarkUnixMS = wm
			}
		}
	}
	for id, wm := range least {
		if wm == graph.MinWatermark {
			continue
		}
		op := byOp[id]
		op.WatermarkUnixMS = wm
		op.WatermarkLagMS = max(now.UnixMilli()-wm, 0)
	}
}
