package tui

import (
	"fmt"
	"strings"
	"time"
)

// detailLines are the gateway f.detail as cairn top would show it, from
// its statuses: what it is and how it does, its checkpoints and stalls as
// received since the view started.
func (f *Fleet) detailLines(w int) []string {
	g := f.gateways[f.detail]
	if g == nil {
		return []string{"no gateway " + f.detail}
	}
	head := titleStyle.Render(g.id) + "  " + g.rank.state
	st := g.status
	if st == nil {
		return append([]string{head, ""}, f.problemLines(g)...)
	}
	head += fmt.Sprintf(" · %s · %s · %s", st.Agent, st.Pipeline, st.Mode)
	if st.Version != "" {
		head += " · cairn " + st.Version
	}
	age, _ := f.age(g)
	topic := "online"
	if g.down {
		topic = badStyle.Render("offline")
	}
	lines := []string{head, fmt.Sprintf("up %s · status %s old (one every %s) · status topic %s", uptime(float64(st.UptimeS)), ago(age),
		millis(st.IntervalMS), topic)}
	if s := st.Stall; s != nil {
		if s.Ended {
			lines = append(lines, warnStyle.Render("▲ STALL")+fmt.Sprintf(" %s waited %s for %s (backlog %s) · #%d · ended %s earlier",
				s.Subtask, millis(s.DurationMS), s.WaitsFor, count(float64(s.Backlog)), s.Checkpoint, millis(s.EndedAgoMS)))
		} else {
			lines = append(lines, alarmStyle.Render("▲ STALL")+fmt.Sprintf(" %s waits %s for %s (backlog %s) · checkpoint #%d",
				s.Subtask, millis(s.DurationMS), s.WaitsFor, count(float64(s.Backlog)), s.Checkpoint))
		}
	}
	c := st.Checkpoints
	ckpt := fmt.Sprintf("checkpoints %d ok, %d failed, %d late, one every %s", c.Completed, c.Failed, c.Late, millis(c.IntervalMS))
	if c.InFlightMS > 0 {
		ckpt += fmt.Sprintf(" · one in flight for %s", millis(c.InFlightMS))
	}
	lines = append(lines, ckpt)
	flow := fmt.Sprintf("lag %s · dead letters %d · rejected %d · output backlog %s", count(float64(st.IngestLag)), st.DeadLetters, st.Rejected, bytes(st.OutputBacklog))
	if st.WatermarkLagMS > 0 {
		flow += " · event time " + millis(st.WatermarkLagMS) + " behind"
	}
	lines = append(lines, flow)
	if len(st.Brokers) > 0 {
		var bs []string
		for _, b := range st.Brokers {
			state := "up"
			if !b.Up {
				state = warnStyle.Render("DOWN")
			}
			since := ""
			if b.Since != 0 {
				since = " since " + f.clock(time.UnixMilli(b.Since))
			}
			bs = append(bs, fmt.Sprintf("%s %s (%d/%d)%s", b.Name, state, b.Connected, b.Clients, since))
		}
		lines = append(lines, wrap("brokers ", bs, w)...)
	}
	mem := fmt.Sprintf("memory %s resident, heap %s", bytes(st.Memory.Resident), bytes(st.Memory.HeapLive))
	if st.Memory.Limit > 0 {
		mem += " of " + bytes(st.Memory.Limit)
	}
	if st.DiskPerDay > 0 {
		mem += fmt.Sprintf(" · disk %s/day", bytes(st.DiskPerDay))
	} else {
		mem += " · disk a day: measured once it has run 10 minutes"
	}
	lines = append(lines, sentence(mem, w)...)
	lines = append(lines, f.problemLines(g)...)
	lines = append(lines, dimStyle.Render("── Checkpoints its statuses told of since this view started ──"))
	lines = append(lines, f.historyLines(g)...)
	if len(g.stalls) > 0 {
		lines = append(lines, dimStyle.Render("── Stalls ──"))
		for i := len(g.stalls) - 1; i >= 0; i-- {
			s := g.stalls[i]
			verb := "waits"
			if s.Ended {
				verb = "waited"
			}
			lines = append(lines, fmt.Sprintf("%s %-7s %s %s %s for %s (backlog %s)", f.clock(s.at), id(s.Checkpoint), s.Subtask, verb,
				millis(s.DurationMS), s.WaitsFor, count(float64(s.Backlog))))
		}
	}
	return lines
}

// problemLines lists what is wrong with g, worst first.
func (f *Fleet) problemLines(g *gateway) []string {
	if len(g.rank.problems) == 0 {
		return []string{okStyle.Render("✓") + " nothing wrong that its status tells"}
	}
	var out []string
	for _, p := range g.rank.problems {
		line := "• " + p.text
		switch {
		case p.tier <= tierFailing:
			line = badStyle.Render(line)
		case p.tier <= tierAttention:
			line = warnStyle.Render(line)
		}
		out = append(out, line)
	}
	return out
}

// historyLines are g's checkpoints and failures seen, newest first.
func (f *Fleet) historyLines(g *gateway) []string {
	type row struct {
		at   time.Time
		text string
	}
	var rows []row
	for _, h := range g.history {
		status := "completed"
		if h.Late {
			status = "LATE"
		}
		text := fmt.Sprintf("%-6d %-9s %-8s %6s %6s %8s  %s", h.ID, status, f.clock(h.at), millis(h.DurationMS), millis(h.AlignmentMS), bytes(h.Size), h.Kind)
		if h.Late {
			text = warnStyle.Render(text)
		}
		rows = append(rows, row{h.at, text})
	}
	for _, h := range g.failures {
		rows = append(rows, row{h.at, badStyle.Render(fmt.Sprintf("%-6d %-9s %-8s  %s", h.ID, "FAILED", f.clock(h.at), h.Cause))})
	}
	if len(rows) == 0 {
		return []string{dimStyle.Render("no checkpoint told of yet")}
	}
	for i := 1; i < len(rows); i++ {
		for j := i; j > 0 && rows[j].at.After(rows[j-1].at); j-- {
			rows[j], rows[j-1] = rows[j-1], rows[j]
		}
	}
	out := []string{dimStyle.Render(fmt.Sprintf("%-6s %-9s %-8s %6s %6s %8s  %s", "ID", "STATUS", "AT", "E2E", "ALIGN", "SIZE", "KIND"))}
	for _, r := range rows {
		out = append(out, r.text)
	}
	return strings.Split(strings.Join(out, "\n"), "\n")
}
