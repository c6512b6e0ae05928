package tui

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// fleetWide is the width from which the table shows dead letters, memory
// and disk wear too.
const fleetWide = 110

// View renders the fleet view in the alternate screen.
func (f *Fleet) View() tea.View {
	v := tea.NewView(f.render())
	v.AltScreen = true
	v.WindowTitle = "cairn top --fleet"
	return v
}

// render draws the whole screen: exactly f.height lines of at most f.width
// cells.
func (f *Fleet) render() string {
	w, h := max(f.width, 20), max(f.height, 5)
	top := f.header(w)
	bodyH := max(h-len(top)-1, 1)
	var body []string
	switch {
	case f.showHelp:
		body = f.helpLines()
	case f.detail != "":
		body = f.scrolled(f.detailLines(w), bodyH)
	default:
		body = f.table(w, bodyH)
	}
	lines := append(top, fit(body, w, bodyH)...)
	lines = append(lines, f.footer())
	return strings.Join(fit(lines, w, h), "\n")
}

// header is the title line, the counters line and, while the broker is
// not reached, why.
func (f *Fleet) header(w int) []string {
	title := titleStyle.Render("cairn top --fleet") + "  " + f.opts.Source
	c := f.counts()
	down := fmt.Sprintf("%d down", c.down)
	if c.down > 0 {
		down = badStyle.Render(down)
	}
	gateways := fmt.Sprintf("%d gateways", c.all)
	if c.all == 1 {
		gateways = "1 gateway"
	}
	counters := fmt.Sprintf("%s · %d up · %s", gateways, c.up, down)
	for _, n := range []struct {
		n    int
		what string
	}{{c.failing, "failing"}, {c.late, "late"}, {c.stalled, "stalled"}} {
		if n.n > 0 {
			counters += " · " + warnStyle.Render(fmt.Sprintf("%d %s", n.n, n.what))
		}
	}
	if f.bad > 0 {
		if bad := fmt.Sprintf(" · %d unreadable", f.bad); ansi.StringWidth(counters+bad) <= w {
			counters += bad
		}
	}
	lines := []string{title, counters}
	switch {
	case f.link.Up:
	case !f.linked && f.link.Err == "":
		lines = append(lines, warnStyle.Render("⟳ connecting to the broker…"))
	case !f.linked:
		lines = append(lines, warnStyle.Render("⟳ connecting to the broker")+": "+f.link.Err)
	default:
		line := warnStyle.Render("⟳ broker unreachable") + fmt.Sprintf(" since %s: %s", f.clock(f.downSince), f.link.Err)
		if note := " · showing the last statuses received"; ansi.StringWidth(line+note) <= w {
			line += note
		}
		lines = append(lines, line)
	}
	return lines
}

// scrolled is the lines of the detail from f.detailTop on that fit in h,
// the last saying how many more there are when they do not all fit.
func (f *Fleet) scrolled(lines []string, h int) []string {
	if len(lines) <= h {
		f.detailTop = 0
		return lines
	}
	f.detailTop = min(f.detailTop, len(lines)-(h-1))
	out := slices.Clone(lines[f.detailTop : f.detailTop+h-1])
	var more []string
	if f.detailTop > 0 {
		more = append(more, fmt.Sprintf("%d above", f.detailTop))
	}
	if below := len(lines) - f.detailTop - (h - 1); below > 0 {
		more = append(more, fmt.Sprintf("+%d more", below))
	}
	return append(out, strings.Join(more, " · ")+dimStyle.Render(" · ↑/↓ scroll"))
}

// tableHeight is the lines of the table, its column heads included.
func (f *Fleet) tableHeight() int {
	w, h := max(f.width, 20), max(f.height, 5)
	return max(h-len(f.header(w))-1, 1)
}

// fleetColumns are the table's columns besides the gateway's name and
// what is wrong: the cursor, STATE, CKPT, LAG, SEEN and the gaps; and,
// wide, DEAD, MEM and DISK/d.
const fleetColumns, fleetWideColumns = 2 + 9 + 6 + 6 + 6 + 2, 6 + 7 + 8

// table lists the gateways the filter lets through, worst first, in h
// lines of w cells, the selected one marked, scrolled to keep it in view.
func (f *Fleet) table(w, h int) []string {
	rows := f.rows()
	wide := w >= fleetWide
	cols := fleetColumns
	if wide {
		cols += fleetWideColumns
	}
	nameW := len("GATEWAY")
	for _, g := range rows {
		nameW = max(nameW, ansi.StringWidth(g.id))
	}
	nameW = min(nameW, max((w-cols)/3, len("GATEWAY")))
	whyW := max(w-cols-nameW, 10)
	line := func(cursor, name, state, why, ckpt, lag, seen, dead, mem, disk string) string {
		s := cursor + pad(ansi.Truncate(name, nameW, "…"), nameW) + " " + pad(state, 8) + " " +
			pad(ansi.Truncate(why, whyW, "…"), whyW) + fmt.Sprintf(" %5s %5s %5s", ckpt, lag, seen)
		if wide {
			s += fmt.Sprintf(" %5s %6s %7s", dead, mem, disk)
		}
		return s
	}
	lines := []string{dimStyle.Render(line("  ", "GATEWAY", "STATE", "WHY (worst first)", "CKPT", "LAG", "SEEN", "DEAD", "MEM", "DISK/d"))}
	if len(rows) == 0 {
		switch {
		case len(f.ranked) > 0:
			lines = append(lines, dimStyle.Render("no gateway matches the filter"))
		default:
			lines = append(lines, dimStyle.Render("no gateway's status yet"),
				dimStyle.Render("(does "+cmp.Or(f.opts.Topic, "the filter")+" match the gateways' status_topic?)"))
		}
		return lines
	}
	sel := max(slices.IndexFunc(rows, func(g *gateway) bool { return g.id == f.selected }), 0)
	n := max(h-1, 1) // rows shown: all that fit under the heads, or one fewer and a line saying how many are not
	if len(rows) > n {
		n = max(h-2, 1)
	}
	f.top = min(max(f.top, sel-n+1), sel)
	f.top = max(min(f.top, len(rows)-n), 0)
	for i := f.top; i < len(rows) && i < f.top+n; i++ {
		g := rows[i]
		why := whyOf(g.rank.problems, whyW)
		ckpt, lag, seen, dead, mem, disk := "-", "-", "-", "-", "-", "-"
		if d, ok := f.checkpointAge(g); ok {
			ckpt = ago(d)
		}
		if d, ok := f.age(g); ok {
			seen = ago(d)
		}
		if st := g.status; st != nil {
			lag = count(float64(st.IngestLag))
			dead = count(float64(st.DeadLetters + st.Rejected))
			if st.Memory.Resident > 0 {
				mem = bytes(st.Memory.Resident)
			}
			if st.DiskPerDay > 0 { // else not measured yet
				disk = bytes(st.DiskPerDay)
			}
		}
		cursor := "  "
		if i == sel {
			cursor = "› "
		}
		row := line(cursor, g.id, g.rank.state, why, ckpt, lag, seen, dead, mem, disk)
		switch t := g.rank.tier(); {
		case i == sel:
			row = tabStyle.Render(row)
		case t <= tierFailing:
			row = badStyle.Render(row)
		case t <= tierAttention:
			row = warnStyle.Render(row)
		}
		lines = append(lines, row)
	}
	if n < len(rows) {
		var more []string
		if f.top > 0 {
			more = append(more, fmt.Sprintf("%d above", f.top))
		}
		if below := len(rows) - f.top - n; below > 0 {
			more = append(more, fmt.Sprintf("+%d more", below))
		}
		lines = append(lines, strings.Join(more, " · ")+dimStyle.Render(" · ↑/↓ pgup/pgdn"))
	}
	return lines
}

// whyOf is what the WHY column says of problems in w cells: the worst,
// and the next ones while they fit, then how many more there are.
func whyOf(problems []problem, w int) string {
	if len(problems) == 0 {
		return ""
	}
	why, shown := problems[0].text, 1
	for _, p := range problems[1:] {
		more := fmt.Sprintf(" (+%d)", len(problems)-shown-1)
		if shown == len(problems)-1 {
			more = ""
		}
		if ansi.StringWidth(why+" · "+p.text+more) > w {
			break
		}
		why += " · " + p.text
		shown++
	}
	if shown < len(problems) {
		why += fmt.Sprintf(" (+%d)", len(problems)-shown)
	}
	return why
}

func (f *Fleet) footer() string {
	if f.filter.typing {
		return f.filter.prompt()
	}
	h := help.New()
	if f.detail != "" {
		return h.ShortHelpView([]key.Binding{fleetKeyMap.Back, key.NewBinding(key.WithKeys("up"), key.WithHelp("↑/↓", "scroll")), fleetKeyMap.Help, fleetKeyMap.Quit})
	}
	return f.filter.kept() + h.ShortHelpView(fleetKeyMap.ShortHelp())
}

func (f *Fleet) helpLines() []string {
	lines := strings.Split(help.New().FullHelpView(fleetKeyMap.FullHelp()), "\n")
	return append(lines, "",
		"Every gateway whose agent publishes its status to the broker (brokers.<name>.",
		"status_topic), worst first: OFFLINE (its last will, or stopped), SILENT (no",
		fmt.Sprintf("status for %d intervals), checkpoints failing, starting, LATE (over half the", silentAfter),
		fmt.Sprintf("interval), ▲ stalled (an alignment of %s or more), input held, a broker", millis(f.opts.Stall.Milliseconds())),
		fmt.Sprintf("down, lag of %s or more, dead letters, writing %s a day or more.", count(float64(f.opts.Lag)), bytes(f.opts.Wear)),
		"WHY: the worst of its problems (+N more) · CKPT: since its last checkpoint",
		"LAG: MQTT messages logged, not processed · SEEN: the age of its last status",
		"/ filters by name, state or problem · enter: the gateway's detail.")
}
