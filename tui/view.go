package tui

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/cairn-edge/cairn/agent/api"
)

// Colours are the 16 basic ones, which every terminal has; the renderer
// degrades them further (or drops them) to what the terminal supports.
// Nothing is said by colour alone: stalls, failures and barrier states also
// have a marker (▲, FAILED, ✓, …).
var (
	colorOK    = lipgloss.Green
	titleStyle = lipgloss.NewStyle().Bold(true)
	dimStyle   = lipgloss.NewStyle().Foreground(lipgloss.BrightBlack)
	okStyle    = lipgloss.NewStyle().Foreground(colorOK)
	warnStyle  = lipgloss.NewStyle().Foreground(lipgloss.Yellow).Bold(true)
	alarmStyle = lipgloss.NewStyle().Foreground(lipgloss.BrightWhite).Background(lipgloss.Red).Bold(true)
	badStyle   = lipgloss.NewStyle().Foreground(lipgloss.Red).Bold(true)
	tabStyle   = lipgloss.NewStyle().Reverse(true).Bold(true)
)

// Wide terminals show all panels at once.
const wideWidth, wideHeight = 120, 30

// View renders the UI in the alternate screen.
func (m *Model) View() tea.View {
	v := tea.NewView(m.render())
	v.AltScreen = true
	v.WindowTitle = "cairn top"
	return v
}

// render draws the whole screen: exactly m.height lines of at most m.width
// cells.
func (m *Model) render() string {
	w, h := m.size()
	top := m.header(w)
	footer := m.footer()
	bodyH := bodyHeight(h, top)
	var body []string
	switch {
	case m.showHelp:
		body = m.helpPanel()
	case m.st == nil:
		body = []string{"", dimStyle.Render("waiting for the agent's status; is `cairn run` running on this data directory?")}
	case m.wide():
		upper := bodyH / 2
		left := fit(m.titled(graphPanel, w/2-1, m.graphPanel(w/2-1, upper-1)), w/2-1, upper)
		right := fit(m.titled(checkpointPanel, w-w/2-2, m.checkpointPanel(w-w/2-2)), w-w/2-2, upper)
		for i := range upper {
			body = append(body, pad(left[i], w/2-1)+dimStyle.Render(" │ ")+right[i])
		}
		// History beside the recent stalls, which take what its rows leave.
		lower := bodyH - upper
		histW := max(historyWidth, w*2/3)
		hist := fit(m.titled(historyPanel, histW, m.historyPanel(histW, lower-1)), histW, lower)
		stalls := fit(m.titled(stallsPanel, w-histW-3, m.stallsPanel(w-histW-3, lower-1)), w-histW-3, lower)
		for i := range lower {
			body = append(body, pad(hist[i], histW)+dimStyle.Render(" │ ")+stalls[i])
		}
	default:
		switch m.panel {
		case graphPanel:
			body = m.graphPanel(w, bodyH)
		case checkpointPanel:
			body = m.checkpointPanel(w)
		case historyPanel:
			body = m.historyPanel(w, bodyH)
		case stallsPanel:
			body = m.stallsPanel(w, bodyH)
		}
	}
	lines := append(top, m.tabs())
	lines = append(lines, fit(body, w, bodyH)...)
	lines = append(lines, footer)
	return strings.Join(fit(lines, w, h), "\n")
}

// size is the terminal's size, or the least the layout works with.
func (m *Model) size() (w, h int) { return max(m.width, 20), max(m.height, 5) }

// wide reports whether the terminal shows all panels at once.
func (m *Model) wide() bool {
	w, h := m.size()
	return w >= wideWidth && h >= wideHeight
}

// bodyHeight is the lines of a terminal h lines high between the tabs and
// the footer, under the header top.
func bodyHeight(h int, top []string) int { return max(h-len(top)-2, 1) }

// graphHeight is the lines of the graph panel, its column heads included.
func (m *Model) graphHeight() int {
	w, h := m.size()
	bodyH := bodyHeight(h, m.header(w))
	if m.wide() {
		return bodyH/2 - 1 // half the body, under the panel's title
	}
	return bodyH
}

// header is the agent line, the counters line, the checkpoint in flight,
// and the stall, if any. While the agent is unreachable, the agent line says
// since when and what it last was, the next line why the last attempt to
// reach it failed, and the checkpoint and stall lines, stale, are left out.
func (m *Model) header(w int) []string {
	if m.st == nil {
		line := titleStyle.Render("cairn top") + "  connecting to " + m.client.Socket() + "…"
		if m.lost != nil {
			return append([]string{line}, sentence(m.lostLine(), w)...)
		}
		return []string{line}
	}
	st := m.st
	var lines []string
	if m.lost != nil {
		// What the last status says of the agent's state, uptime and
		// memory is no longer so: the header says since when it is not
		// known, and why; the rest of the screen is the last status, as
		// the line says where it has room.
		reconnecting := m.lostLine()
		if note := " · showing the last status received"; lipgloss.Width(reconnecting+note) <= w {
			reconnecting += note
		}
		lines = append(lines, fmt.Sprintf("%s  %s · %s · %s since %s · last seen %s", titleStyle.Render("cairn top"),
			st.Agent, filepath.Base(st.Pipeline), alarmStyle.Render("unreachable"),
			m.lostSince.In(m.opts.Location).Format("15:04:05"), st.State))
		lines = append(lines, sentence(reconnecting, w)...)
	} else {
		state := st.State
		if state != "running" {
			state = warnStyle.Render(state)
		}
		head := fmt.Sprintf("%s  %s · %s · %s · %s · up %s", titleStyle.Render("cairn top"),
			st.Agent, filepath.Base(st.Pipeline), st.Mode, state, uptime(st.UptimeSeconds))
		if st.Memory.Resident > 0 {
			head += " · mem " + bytes(st.Memory.Resident)
		}
		lines = append(lines, head)
	}
	restored := "fresh start"
	if r := st.RestoredFrom; r != nil {
		restored = fmt.Sprintf("restored %s #%d", r.Source, r.ID)
	}
	failed := fmt.Sprintf("%d failed", st.Checkpoints.Failed)
	if st.Checkpoints.Failed > 0 {
		failed = badStyle.Render(failed)
	}

	counters := fmt.Sprintf("%s · lag %s · dead letters %s · checkpoints %d ok, %s",
		restored, count(float64(st.IngestLag)), count(float64(st.DeadLetters)), st.Checkpoints.Completed, failed)
	// How many brokers are connected, how many checkpoints were late and
	// what the agent writes to its disk a day, in that order where the
	// line has room.
	var brokers, late string
	if len(st.Brokers) > 0 {
		up := 0
		for _, b := range st.Brokers {
			if b.Connected {
				up++
			}
		}
		brokers = fmt.Sprintf("brokers %d/%d up", up, len(st.Brokers))
		if up < len(st.Brokers) {
			brokers = warnStyle.Render(brokers)
		}
		if brokers = " · " + brokers; lipgloss.Width(counters+brokers) > w {
			brokers = ""
		}
	}
	if n := st.Checkpoints.Late; n > 0 {
		if late = ", " + warnStyle.Render(fmt.Sprintf("%d late", n)); lipgloss.Width(counters+late+brokers) > w {
			late = ""
		}
	}
	counters += late + brokers
	if disk := fmt.Sprintf(" · disk %s/day", bytes(st.Disk.PerDayBytes)); st.Disk.PerDaySpanSeconds > 0 && lipgloss.Width(counters+disk) <= w {
		counters += disk
	}
	lines = append(lines, counters)
	for _, op := range st.Operators {
		if n := op.BadTimeRecords; n > 0 {
			lines = append(lines, warnStyle.Render(fmt.Sprintf("source %s: %s readings set aside, their device's clock wrong", op.ID, count(float64(n))))+
				" (cairn deadletters lists them)")
		}
	}
	for _, b := range st.Brokers {
		if !b.Connected {
			line := warnStyle.Render("broker "+b.ID+" NOT CONNECTED") + fmt.Sprintf(" (%d of %d clients) since %s",
				b.ConnectedClients, b.Clients, time.UnixMilli(b.SinceUnixMS).In(m.opts.Location).Format("15:04:05"))
			if b.LastError != "" {
				line += ": " + b.LastError
			}
			lines = append(lines, sentence(line, w)...)
		}
	}
	if st.ConfigError != "" {
		lines = append(lines, sentence(warnStyle.Render("config change not applied: ")+st.ConfigError, w)...)
	}
	if st.InputHeld {
		lines = append(lines, warnStyle.Render("input held: ")+fmt.Sprintf("the sinks hold %s their brokers have not taken", bytes(st.OutputBacklogBytes)))
	}
	if since := st.Ingest.NotAcknowledgingSinceUnixMS; since != 0 {
		lines = append(lines, sentence(alarmStyle.Render("input NOT acknowledged")+fmt.Sprintf(" since %s: %s",
			time.UnixMilli(since).In(m.opts.Location).Format("15:04:05"), st.Ingest.NotAcknowledgingReason), w)...)
	}
	if in := st.Ingest; in.DamagedRecords > 0 {
		lines = append(lines, badStyle.Render("ingest log damaged")+fmt.Sprintf(": %d messages lost in %d ranges, dead letters of their sources", in.LostMessages, in.DamagedRecords))
	}
	if mem := st.Memory; mem.NearLimit() {
		lines = append(lines, warnStyle.Render("memory near its limit: ")+fmt.Sprintf("heap %s live of %s; the GC runs almost all the time", bytes(mem.HeapLive), bytes(mem.Limit)))
	}
	if m.lost != nil {
		return lines
	}
	lines = append(lines, m.inFlightLine(w))
	if b := m.stallBanner(); b != "" {
		lines = append(lines, b)
	}
	return lines
}

// lostLine says that the UI reconnects to the agent, and why the last
// attempt failed: the client's errors are sentences that name the socket
// ("agent not running: no control socket at …").
func (m *Model) lostLine() string {
	return warnStyle.Render("⟳ reconnecting") + fmt.Sprintf(", attempt %d: %v", m.lost.attempt, m.lost.err)
}

// inFlightLine shows the oldest checkpoint in flight, or the last one.
func (m *Model) inFlightLine(w int) string {
	st := m.st
	if len(st.InFlight) == 0 {
		if l := st.Checkpoints.LastCompleted; l != nil {
			late := ""
			if l.Late {
				late = " " + warnStyle.Render("LATE")
			}
			return fmt.Sprintf("no checkpoint in flight · last %s %s in %s%s, %s",
				okStyle.Render("✓"), id(l.ID), millis(l.DurationMS), late, size(*l))
		}
		return "no checkpoint in flight · none completed yet"
	}
	c := st.InFlight[0]
	late := ""
	if st.Checkpoints.IntervalMS > 0 && c.ElapsedMS > st.Checkpoints.IntervalMS/2 {
		late = " " + warnStyle.Render("LATE")
	}
	line := fmt.Sprintf("checkpoint %s in flight %s%s · acked %d/%d ", id(c.ID), millis(c.ElapsedMS), late, c.Acked, c.Total)
	more := ""
	if n := len(st.InFlight); n > 1 {
		more = fmt.Sprintf(" +%d more", n-1)
	}
	m.bar.SetWidth(min(max(w-ansi.StringWidth(line)-len(more), 10), 40))
	return line + m.bar.ViewAs(float64(c.Acked)/float64(max(c.Total, 1))) + more
}

func id(n uint64) string { return fmt.Sprintf("#%d", n) }

// size is a checkpoint's size, marked Δ when incremental, or the
// checkpoint it is the same as.
func size(c api.CheckpointInfo) string {
	if c.SameAs != 0 {
		return "= " + id(c.SameAs)
	}
	if c.Incremental {
		return bytes(c.SizeBytes) + " Δ"
	}
	return bytes(c.SizeBytes)
}

func (m *Model) tabs() string {
	var parts []string
	for i, name := range panelNames {
		if i == m.panel {
			parts = append(parts, tabStyle.Render("["+name+"]"))
		} else {
			parts = append(parts, " "+name+" ")
		}
	}
	return strings.Join(parts, " ")
}

// titled puts a panel's title above its lines, in the wide layout.
func (m *Model) titled(panel, w int, lines []string) []string {
	title := "── " + panelNames[panel] + " "
	title += strings.Repeat("─", max(w-ansi.StringWidth(title), 0))
	if panel == m.panel {
		title = titleStyle.Render(title)
	} else {
		title = dimStyle.Render(title)
	}
	return append([]string{title}, lines...)
}

func (m *Model) footer() string {
	switch {
	case m.filter.typing:
		return m.filter.prompt()
	case m.flash != "":
		if m.alarm {
			return badStyle.Render("! ") + m.flash
		}
		return okStyle.Render("» ") + m.flash
	}
	short := m.help.ShortHelpView(keys.ShortHelp())
	return m.filter.kept() + short
}

func (m *Model) helpPanel() []string {
	lines := strings.Split(m.help.FullHelpView(keys.FullHelp()), "\n")
	return append(lines, "",
		"Barriers: ✓ arrived (+time after the first)  … pending  ■ input ended",
		fmt.Sprintf("▲ STALL: a subtask aligning for %s or more; its laggard is the pending", millis(m.opts.Stall.Milliseconds())),
		"  input with the largest backlog (records queued in the channel and upstream);",
		"  one that ended stays 5s. Stalls: the longest alignment of recent checkpoints.",
		"LATE: a checkpoint taking more than half the interval · acks: ✓ +time after",
		"the trigger · EV LAG: how far an operator's event time trails the clock.",
		"⇢ unaligned: snapshot taken, records in flight captured until the barriers come",
		"STATUS: completed (aligned), unaligned, timed out (alignment timed out and",
		"switched to unaligned), FAILED · Δ incremental · IN-FL in-flight data persisted",
		"· UPL remote upload: done, pend(ing), FAIL(ed), skip(ped: a newer one went",
		"first), off · lag: MQTT messages logged, not processed yet · QUEUED: records",
		"waiting in an operator's inputs · rates per second on the agent's clock.",
		"Operators that do not fit: ↑/↓ (k/j) scroll a row, pgup/pgdown a page, home/end.")
}

// shown reports whether the operator filter lets op through.
func (m *Model) shown(op string) bool {
	f := m.filter.lower()
	return f == "" || strings.Contains(strings.ToLower(op), f)
}

// graphColumns is the cells of a graph row besides the operator's name and
// its backpressure: the PAR, IN/s, OUT/s and QUEUED columns and the gaps;
// lagColumn, those of EV LAG.
const graphColumns, lagColumn = 30, 7

// graphPanel lists the operators the filter lets through, with their
// throughput and backpressure, in at most h lines of w cells. Names take
// the width the other columns leave, and are cut (…) only beyond it. When
// the operators do not all fit, it shows those from m.scroll on and a last
// line saying how many are out of view. The EV LAG column is there when
// some operator has event time and it leaves the names the room they need
// (up to 16 cells).
func (m *Model) graphPanel(w, h int) []string {
	// Every operator's cells, shown or not: the columns keep their
	// widths while a filter is typed.
	type cells struct{ name, par, in, out, queued, lag, bp string }
	var rows []cells
	nameW, bpW := len("OPERATOR"), len("BACKPRESSURE")
	eventTime := false
	for _, op := range m.st.Operators {
		nameW = max(nameW, ansi.StringWidth(op.ID))
		eventTime = eventTime || op.WatermarkUnixMS != 0
		var in, out, worst float64
		var queued int64
		levels := make([]int64, 0, len(op.Subtasks))
		for _, s := range op.Subtasks {
			r := m.rates[subtaskName(op.ID, s.Index)]
			in, out, worst = in+r.in, out+r.out, max(worst, r.backpressure)
			queued += s.Queued
			levels = append(levels, int64(r.backpressure*100))
		}
		bp := fmt.Sprintf("%s %3.0f%%", backpressureBlocks(levels, 8), worst*100)
		switch {
		case worst >= 0.5:
			bp = badStyle.Render(bp + " ▲")
		case worst >= 0.1:
			bp = warnStyle.Render(bp)
		}
		bpW = max(bpW, ansi.StringWidth(bp))
		if m.shown(op.ID) {
			lag := "-"
			switch {
			case op.WatermarkUnixMS == 0:
			case m.st.TimeUnixMS != 0 && op.WatermarkUnixMS > m.st.TimeUnixMS:
				lag = warnStyle.Render("ahead") // a device or gateway clock is wrong
			default:
				lag = millis(op.WatermarkLagMS)
			}
			rows = append(rows, cells{op.ID, fmt.Sprint(op.Parallelism), count(in), count(out), count(float64(queued)), lag, bp})
		}
	}
	columns := graphColumns
	if eventTime && w-graphColumns-lagColumn-bpW >= min(nameW, 16) {
		columns += lagColumn
	} else {
		eventTime = false
	}
	nameW = min(nameW, max(w-columns-bpW, len("OPERATOR")))
	row := func(c cells) string {
		if !eventTime {
			return pad(ansi.Truncate(c.name, nameW, "…"), nameW) + fmt.Sprintf(" %3s %7s %7s %7s  %s", c.par, c.in, c.out, c.queued, c.bp)
		}
		return pad(ansi.Truncate(c.name, nameW, "…"), nameW) + fmt.Sprintf(" %3s %7s %7s %7s %6s  %s", c.par, c.in, c.out, c.queued, c.lag, c.bp)
	}
	lines := []string{dimStyle.Render(row(cells{"OPERATOR", "PAR", "IN/s", "OUT/s", "QUEUED", "EV LAG", "BACKPRESSURE"}))}
	first, n := graphWindow(m.scroll, len(rows), h)
	for _, c := range rows[first : first+n] {
		lines = append(lines, row(c))
	}
	if n < len(rows) {
		var out []string
		if first > 0 {
			out = append(out, fmt.Sprintf("%d above", first))
		}
		if below := len(rows) - first - n; below > 0 {
			out = append(out, fmt.Sprintf("+%d more", below))
		}
		lines = append(lines, strings.Join(out, " · ")+dimStyle.Render(" · ↑/↓ scroll"))
	}
	return lines
}

// graphWindow is the operator rows, of rows, that a graph panel of h lines
// shows: all when they fit under the column heads; else as many as fit
// above the line that says how many are out of view, from top on, moved
// back within the rows. It returns the first row shown and how many.
func graphWindow(top, rows, h int) (first, n int) {
	if rows <= h-1 {
		return 0, rows
	}
	n = max(h-2, 0)
	return min(max(top, 0), rows-n), n
}

// graphRows is how many operators the filter lets through.
func (m *Model) graphRows() int {
	n := 0
	for _, op := range m.st.Operators {
		if m.shown(op.ID) {
			n++
		}
	}
	return n
}

// backpressureBlocks draws each subtask's backpressure (percent) as a block,
// at most n of them.
func backpressureBlocks(percent []int64, n int) string {
	steps := []rune("▁▂▃▄▅▆▇█")
	var b strings.Builder
	for i, p := range percent {
		if i == n {
			b.WriteString("…")
			break
		}
		b.WriteRune(steps[min(p, 100)*int64(len(steps)-1)/100])
	}
	return b.String()
}

// checkpointPanel shows the checkpoints in flight and, for every aligning
// subtask, each input channel's barrier.
func (m *Model) checkpointPanel(w int) []string {
	st := m.st
	var lines []string
	if len(st.InFlight) == 0 {
		lines = append(lines, "no checkpoint in flight")
	}
	for _, c := range st.InFlight {
		line := fmt.Sprintf("checkpoint %s · %s · acked %d/%d ", id(c.ID), millis(c.ElapsedMS), c.Acked, c.Total)
		m.bar.SetWidth(max(min(w-ansi.StringWidth(line), 40), 10))
		lines = append(lines, line+m.bar.ViewAs(float64(c.Acked)/float64(max(c.Total, 1))))
		var acks []string
		for _, a := range c.Subtasks {
			if !m.shown(strings.SplitN(a.Subtask, "/", 2)[0]) {
				continue
			}
			if a.Acked {
				acks = append(acks, okStyle.Render("✓")+" "+a.Subtask+" +"+millis(a.AtMS))
			} else {
				acks = append(acks, "… "+a.Subtask)
			}
		}
		if len(acks) > 0 {
			lines = append(lines, wrap("  acks ", acks, w)...)
		}
	}
	stalled := map[string]*api.Channel{}
	for _, s := range m.stalls() {
		stalled[s.Subtask] = s.Laggard
	}
	queued := map[string]int64{}
	for _, op := range st.Operators {
		for _, s := range op.Subtasks {
			queued[subtaskName(op.ID, s.Index)] = s.Queued
		}
	}
	const nameW = 16
	head := fmt.Sprintf("%-*s %8s %8s  %s", nameW, "SUBTASK", "ALIGNING", "BUFFERED", "INPUTS (barrier)")
	lines = append(lines, "", dimStyle.Render(head))
	aligning := 0
	for _, op := range st.Operators {
		if !m.shown(op.ID) {
			continue
		}
		for _, s := range op.Subtasks {
			a := s.Alignment
			if a == nil {
				continue
			}
			aligning++
			name := subtaskName(op.ID, s.Index)
			laggard, isStall := stalled[name]
			elapsed := fmt.Sprintf("%8s", millis(a.ElapsedMS))
			if a.Unaligned {
				elapsed = fmt.Sprintf("%8s", "⇢ "+millis(a.ElapsedMS))
			}
			if isStall {
				elapsed = alarmStyle.Render(fmt.Sprintf("%8s", "▲ "+millis(a.ElapsedMS)))
			}
			prefix := fmt.Sprintf("%-*s %s %8s  ", nameW, ansi.Truncate(name, nameW, "…"),
				elapsed, count(float64(a.BufferedRecords)))
			var chans []string
			for i := range a.Channels {
				c := &a.Channels[i]
				var e string
				switch {
				case c.Ended:
					e = "■ " + c.From + " ended"
				case c.Arrived:
					e = okStyle.Render("✓") + " " + c.From + " +" + millis(c.AtMS-a.StartedMS)
				default:
					e = "… " + c.From + " " + count(float64(c.Queued+queued[c.From])) + " queued"
					if c == laggard {
						e = badStyle.Render(e + " ◀")
					}
				}
				chans = append(chans, e)
			}
			lines = append(lines, wrap(prefix, chans, w)...)
		}
	}
	if aligning == 0 {
		lines = append(lines, dimStyle.Render("no subtask is waiting for barriers"))
	}
	return lines
}

// wrap lays out items after prefix, continuing on indented lines when
// they do not fit in w cells.
func wrap(prefix string, items []string, w int) []string {
	indent := strings.Repeat(" ", ansi.StringWidth(prefix))
	var lines []string
	line := prefix
	n := 0
	for _, it := range items {
		if n > 0 && ansi.StringWidth(line)+2+ansi.StringWidth(it) > w {
			lines = append(lines, line)
			line, n = indent, 0
		}
		if n > 0 {
			line += "  "
		}
		line += it
		n++
	}
	return append(lines, line)
}

// historyLength is the most outcomes api.Status.History holds;
// historyWidth the cells of a row of the history table.
const historyLength, historyWidth = 32, 83

// historyPanel shows the sparklines and the table of checkpoint outcomes,
// newest first, in h lines.
func (m *Model) historyPanel(w, h int) []string {
	hist := m.st.History
	var durations, alignments []int64
	var longest, widest int64
	for _, c := range hist {
		if c.Status == "completed" {
			durations = append(durations, c.DurationMS)
			alignments = append(alignments, c.AlignmentMS)
			longest, widest = max(longest, c.DurationMS), max(widest, c.AlignmentMS)
		}
	}
	sparkW := max(w-24, 8)
	lines := []string{
		fmt.Sprintf("duration  %-*s max %s", min(sparkW, historyLength), sparkline(durations, sparkW), millis(longest)),
		fmt.Sprintf("alignment %-*s max %s", min(sparkW, historyLength), sparkline(alignments, sparkW), millis(widest)),
	}
	row := "%-5s %-9s %-8s %6s %6s %6s %5s %6s %8s %6s %-5s"
	lines = append(lines, dimStyle.Render(fmt.Sprintf(row, "ID", "STATUS", "TRIGGER", "E2E", "ALIGN", "DELAY", "SYNC", "ASYNC", "SIZE", "IN-FL", "UPL")))
	for i := len(hist) - 1; i >= 0 && len(lines) < h; i-- {
		c := hist[i]
		at := "-"
		if c.TriggeredUnixMS != 0 {
			at = time.UnixMilli(c.TriggeredUnixMS).In(m.opts.Location).Format("15:04:05")
		}
		if c.Status != "completed" {
			line := fmt.Sprintf("%-5d %-9s %-8s %6s  %s", c.ID, "FAILED", at, millis(c.DurationMS), c.Cause)
			lines = append(lines, badStyle.Render(ansi.Truncate(line, w, "…")))
			continue
		}
		upload := uploadState(c.Upload)
		status := c.Status
		switch {
		case c.Late: // more than half the interval: said first
			status = "LATE"
		case c.TimedOut:
			status = "timed out"
		case c.Unaligned:
			status = "unaligned"
		}
		line := fmt.Sprintf(row, fmt.Sprint(c.ID), status, at, millis(c.DurationMS), millis(c.AlignmentMS),
			millis(c.StartDelayMS), millis(c.SyncMS), millis(c.AsyncMS), size(c), bytes(c.InFlightBytes), upload)
		if c.Late {
			line = warnStyle.Render(line)
		}
		lines = append(lines, line)
	}
	if len(hist) == 0 {
		lines = append(lines, dimStyle.Render("no checkpoint has completed or failed in this run yet"))
	}
	return lines
}

// uploadState abbreviates a remote upload state to the UPL column.
func uploadState(s string) string {
	switch s {
	case "":
		return "off"
	case "uploaded":
		return "done"
	case "pending":
		return "pend"
	case "failed":
		return "FAIL"
	case "skipped":
		return "skip"
	}
	return s
}

// sentence is s, which may be longer than a line, on lines of at most w
// cells: broken between words, and a word longer than a line (a path)
// across lines, rather than cut.
func sentence(s string, w int) []string {
	var words []string
	line := ""
	for _, word := range strings.Split(s, " ") {
		switch {
		case line == "":
			line = word
		case ansi.StringWidth(line)+1+ansi.StringWidth(word) <= w:
			line += " " + word
		default:
			words, line = append(words, line), word
		}
	}
	var lines []string
	for _, l := range append(words, line) {
		lines = append(lines, strings.Split(ansi.Hardwrap(l, w, true), "\n")...)
	}
	return lines
}

// fit makes lines exactly h lines of at most w cells.
func fit(lines []string, w, h int) []string {
	out := make([]string, h)
	for i := range out {
		if i < len(lines) {
			out[i] = ansi.Truncate(lines[i], w, "…")
		}
	}
	return out
}

// pad fills s with spaces to w cells.
func pad(s string, w int) string {
	return s + strings.Repeat(" ", max(w-ansi.StringWidth(s), 0))
}
