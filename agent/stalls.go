package agent

import (
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/runtime"
)

// stallsKept is how many checkpoints' stalls the status lists: as many
// as its checkpoint history.
const stallsKept = runtime.HistoryLength

// stalls keeps what the runtime reports of blocking alignments that ended
// (runtime.Options.OnAligned), across reloads: for each of the newest
// checkpoints its longest alignment of a millisecond or more, for the
// status; and every alignment's duration in a histogram per subtask, for
// the metrics. Safe for concurrent use: every
// subtask reports on its own goroutine.
type stalls struct {
	mu     sync.Mutex
	recent []stall               // oldest first, one per checkpoint
	hist   map[string]*histogram // by the subtask's labels (operator, subtask)
}

// stall is an alignment kept for the status: its StartedUnixMS is set as
// the status is taken, from started, when the first barrier came on
// time.Now's clock, so that it is on the wall clock as it reads then.
type stall struct {
	api.Stall
	started time.Time
}

func newStalls() *stalls { return &stalls{hist: make(map[string]*histogram)} }

// aligned takes an alignment of a job whose clock started at start
// (runtime.Status.Started, read from time.Now). A nil stalls (a control
// of tests) keeps nothing.
func (s *stalls) aligned(start time.Time, a runtime.Aligned) {
	if s == nil {
		return
	}
	st := stall{api.Stall{CheckpointID: a.ID, Subtask: a.Task.String(), WaitedFor: a.WaitedFor.String(),
		DurationMS: a.Duration.Milliseconds(), Backlog: a.Backlog, BufferedRecords: a.Buffered, Outcome: "aligned"},
		start.Add(a.Started)}
	switch {
	case a.Abandoned:
		st.Outcome = "abandoned"
	case a.TimedOut:
		st.Outcome = "timed out"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := labels("operator", a.Task.Operator, "subtask", strconv.Itoa(a.Task.Subtask))
	h := s.hist[l]
	if h == nil {
		n := newHistogram(checkpointAlignmentBuckets)
		h = &n
		s.hist[l] = h
	}
	h.observe(a.Duration.Seconds())
	if st.DurationMS < 1 {
		return // in the histogram; too short to list
	}
	i := slices.IndexFunc(s.recent, func(r stall) bool { return r.CheckpointID == st.CheckpointID })
	switch {
	case i >= 0:
		if st.DurationMS > s.recent[i].DurationMS {
			s.recent[i] = st
		}
	case len(s.recent) > 0 && st.CheckpointID < s.recent[0].CheckpointID && len(s.recent) == stallsKept:
		// older than every one kept
	default: // in order of checkpoint, which is mostly the order they end in
		i := len(s.recent)
		for i > 0 && s.recent[i-1].CheckpointID > st.CheckpointID {
			i--
		}
		s.recent = slices.Insert(s.recent, i, st)
		if len(s.recent) > stallsKept {
			s.recent = s.recent[len(s.recent)-stallsKept:]
		}
	}
}

// list returns the recent stalls, oldest first, as the status says them
// at now.
func (s *stalls) list(now clocks) []api.Stall {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []api.Stall
	for _, r := range s.recent {
		r.StartedUnixMS = now.unixMS(r.started)
		out = append(out, r.Stall)
	}
	return out
}

// histograms copies the per-subtask histograms, by the subtask's labels.
func (s *stalls) histograms() map[string]histogram {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]histogram, len(s.hist))
	for l, h := range s.hist {
		out[l] = h.clone()
	}
	return out
}

// writeStallMetrics writes the event-time lag of every operator whose
// records carry event time, and the histograms of each subtask's
// alignments.
func (c *exporter) writeStallMetrics(e exposition, st api.Status) {
	e.family("cairn_watermark_lag_seconds", "gauge", "How far an operator's event time (the least watermark of its subtasks) trails the agent's wall clock; only operators whose records carry event time.")
	for _, o := range st.Operators {
		if o.WatermarkUnixMS != 0 {
			e.sample("cairn_watermark_lag_seconds", labels("operator", o.ID), float64(o.WatermarkLagMS)/1000)
		}
	}
	e.family("cairn_alignment_stall_seconds", "histogram", "Barrier alignments of a subtask with several inputs, by how long they held the inputs whose barrier had come.")
	if c.state.stalls == nil {
		return
	}
	hs := c.state.stalls.histograms()
	for _, l := range slices.Sorted(maps.Keys(hs)) {
		hs[l].write(e, "cairn_alignment_stall_seconds", l)
	}
}
