package tui

import (
	"fmt"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/cairn-edge/cairn/agent/api"
)

// stallHold is how long the banner keeps showing a stall after it ended,
// so that one who looks up from another window still reads it.
const stallHold = 5 * time.Second

// stalls lists the blocking alignments in progress for at least the stall
// threshold, longest first, each with its laggard: the pending input with
// the largest backlog. An unaligned capture blocks nothing and is none.
func (m *Model) stalls() []api.Aligning {
	var out []api.Aligning
	for _, a := range m.st.Aligning() {
		if time.Duration(a.Alignment.ElapsedMS)*time.Millisecond >= m.opts.Stall {
			out = append(out, a)
		}
	}
	return out
}

// ended lists the recent stalls of at least the stall threshold, oldest
// first.
func (m *Model) ended() []api.Stall {
	var out []api.Stall
	for _, s := range m.st.Stalls {
		if time.Duration(s.DurationMS)*time.Millisecond >= m.opts.Stall {
			out = append(out, s)
		}
	}
	return out
}

// stallBanner is the header's stall line: the longest stall in progress,
// or else the longest that ended within stallHold of the status's time,
// saying how long ago; "" when there is neither.
func (m *Model) stallBanner() string {
	if s := m.stalls(); len(s) > 0 {
		a := s[0]
		if a.Laggard == nil { // every input arrived or ended: the snapshot is next
			return alarmStyle.Render("▲ STALL") + fmt.Sprintf(" %s aligning for %s · checkpoint #%d", a.Subtask, millis(a.Alignment.ElapsedMS), a.Alignment.CheckpointID)
		}
		return alarmStyle.Render("▲ STALL") + fmt.Sprintf(" %s waits %s for %s (backlog %s) · checkpoint #%d", a.Subtask, millis(a.Alignment.ElapsedMS),
			a.Laggard.From, count(float64(a.Backlog)), a.Alignment.CheckpointID)
	}
	var held *api.Stall
	for _, s := range m.ended() {
		if ago := m.st.TimeUnixMS - s.EndedUnixMS(); ago <= stallHold.Milliseconds() && (held == nil || s.DurationMS > held.DurationMS) {
			held = &s
		}
	}
	if held == nil {
		return ""
	}
	return warnStyle.Render("▲ STALL") + fmt.Sprintf(" %s waited %s for %s (backlog %s) · #%d · ended %s ago", held.Subtask, millis(held.DurationMS),
		held.WaitedFor, count(float64(held.Backlog)), held.CheckpointID, millis(max(m.st.TimeUnixMS-held.EndedUnixMS(), 0)))
}

// stallsPanel lists the recent stalls of at least the stall threshold,
// newest first, in h lines of w cells: whole rows where they fit, else a
// compact line each.
func (m *Model) stallsPanel(w, h int) []string {
	stalls := m.ended()
	var lines []string
	wide := w >= 72
	if wide {
		lines = append(lines, dimStyle.Render(fmt.Sprintf("%-8s %-7s %-16s %-16s %7s %7s  %s", "ENDED", "CKPT", "SUBTASK", "WAITED FOR", "TOOK", "BACKLOG", "OUTCOME")))
	}
	for i := len(stalls) - 1; i >= 0 && len(lines) < h; i-- {
		s := stalls[i]
		at := time.UnixMilli(s.EndedUnixMS()).In(m.opts.Location).Format("15:04:05")
		if wide {
			lines = append(lines, fmt.Sprintf("%-8s %-7s %-16s %-16s %7s %7s  %s", at, id(s.CheckpointID),
				ansi.Truncate(s.Subtask, 16, "…"), ansi.Truncate(s.WaitedFor, 16, "…"), millis(s.DurationMS), count(float64(s.Backlog)), s.Outcome))
			continue
		}
		lines = append(lines, fmt.Sprintf("%s %s %s ◀%s", at, s.Subtask, millis(s.DurationMS), s.WaitedFor))
	}
	if len(stalls) == 0 {
		for _, l := range sentence(fmt.Sprintf("no subtask aligned for %s or more in the recent checkpoints", millis(m.opts.Stall.Milliseconds())), w) {
			lines = append(lines, dimStyle.Render(l))
		}
	}
	return lines
}
