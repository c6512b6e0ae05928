package tui

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
)

// What can be wrong with a gateway, worst first: the fleet view sorts
// gateways by their worst problem, then by its weight (how long a stall,
// how many failures, ...), then by name.
const (
	tierOffline   = iota // its status topic says offline, or its agent stopped
	tierSilent           // online, but no status for three intervals
	tierFailing          // checkpoints failing, or one in flight far too long
	tierStarting         // starting, restoring or stopping
	tierLate             // checkpoints taking more than half the interval
	tierStalled          // an alignment of --stall or more
	tierHeld             // the input held
	tierAttention        // a broker down, a change of the file refused, memory near its limit
	tierLag              // ingest lag of --lag or more
	tierDead             // dead letters or rejected records
	tierWear             // writing --wear or more a day
	tierNoStatus         // online, but no status (a cairn that publishes none)
	tierOK
)

// problem is one thing wrong with a gateway.
type problem struct {
	tier   int
	weight int64 // within a tier, the larger the worse
	text   string
}

// rank is a gateway's problems, worst first, and its state as the table
// shows it.
type rank struct {
	problems []problem
	state    string
}

func (r rank) tier() int {
	if len(r.problems) == 0 {
		return tierOK
	}
	return r.problems[0].tier
}

// silentAfter is how many status intervals without a status make an
// online gateway silent, and silentSlack what is added for the broker's
// and the clocks' delays.
const (
	silentAfter = 3
	silentSlack = 5 * time.Second
)

// rankAll ranks every gateway at the clock's time, worst first: what is
// wrong with a gateway changes with the time too (a status that stopped
// coming, a stall that is over).
func (f *Fleet) rankAll() { f.rank(nil) }

// rank works out anew what is wrong with the gateways in changed (all,
// when nil) and ranks every gateway, worst first.
func (f *Fleet) rank(changed map[*gateway]bool) {
	f.now = f.opts.Now()
	f.ranked = f.ranked[:0]
	for _, g := range f.gateways {
		if changed == nil || changed[g] {
			g.rank = f.rankOf(g)
		}
		f.ranked = append(f.ranked, g)
	}
	slices.SortFunc(f.ranked, func(a, b *gateway) int {
		ta, tb := a.rank.tier(), b.rank.tier()
		if ta != tb {
			return cmp.Compare(ta, tb)
		}
		if ta != tierOK {
			if c := cmp.Compare(b.rank.problems[0].weight, a.rank.problems[0].weight); c != 0 {
				return c
			}
		}
		return cmp.Compare(a.id, b.id)
	})
	// The cursor stays on the worst gateway until the user moves it; then
	// it follows the gateway moved to, while the filter shows it.
	if rows := f.rows(); len(rows) > 0 && (!f.moved || !slices.ContainsFunc(rows, func(g *gateway) bool { return g.id == f.selected })) {
		f.selected, f.moved = rows[0].id, false
	}
}

// rankOf is what is wrong with g now.
func (f *Fleet) rankOf(g *gateway) rank {
	var r rank
	add := func(tier int, weight int64, format string, args ...any) {
		r.problems = append(r.problems, problem{tier, weight, fmt.Sprintf(format, args...)})
	}
	st := g.status
	switch {
	case g.down && st != nil && st.State == "stopped":
		r.state = "STOPPED"
		add(tierOffline, 0, "stopped at %s", f.clock(g.statusAt))
	case g.down:
		r.state = "OFFLINE"
		if g.downAt.IsZero() {
			add(tierOffline, 0, "offline (the broker's last word)")
		} else {
			add(tierOffline, f.now.Sub(g.downAt).Milliseconds(), "offline since %s", f.clock(g.downAt))
		}
	case st == nil:
		r.state = "online"
		if g.bad != "" {
			add(tierNoStatus, 0, "%s", g.bad)
		} else {
			add(tierNoStatus, 0, "no status: is its cairn older, without one?")
		}
		return r
	default:
		r.state = st.State
		interval := time.Duration(st.IntervalMS) * time.Millisecond
		if age := f.now.Sub(g.statusAt); age > silentAfter*interval+silentSlack {
			r.state = "SILENT"
			add(tierSilent, age.Milliseconds(), "no status for %s (one every %s)", millis(age.Milliseconds()), millis(st.IntervalMS))
		}
	}
	if st == nil {
		return r
	}
	c := st.Checkpoints
	if c.RecentFailed > 0 {
		text := fmt.Sprintf("failed: %d recent checkpoints", c.RecentFailed)
		if l := c.LastFailed; l != nil {
			text = fmt.Sprintf("failed: #%d %s %s ago", l.ID, l.Cause, ago(time.Duration(l.AgeMS)*time.Millisecond))
			if c.RecentFailed > 1 {
				text += fmt.Sprintf(" (%d)", c.RecentFailed)
			}
		}
		add(tierFailing, int64(c.RecentFailed), "%s", text)
	}
	if c.IntervalMS > 0 && c.InFlightMS > 3*c.IntervalMS {
		add(tierFailing, c.InFlightMS, "failing: a checkpoint in flight for %s", millis(c.InFlightMS))
	}
	if st.State != "running" && st.State != "stopped" {
		add(tierStarting, 0, "%s", st.State)
	}
	if c.RecentLate > 0 {
		text := fmt.Sprintf("late: %d recent checkpoints", c.RecentLate)
		if l := c.Last; l != nil && l.Late {
			text = fmt.Sprintf("late: #%d took %s of %s", l.ID, millis(l.DurationMS), millis(c.IntervalMS))
			if c.RecentLate > 1 {
				text += fmt.Sprintf(" (%d)", c.RecentLate)
			}
		}
		add(tierLate, int64(c.RecentLate), "%s", text)
	}
	if s := f.stallOf(g); s != nil {
		if s.Ended {
			add(tierStalled, s.DurationMS, "▲ %s waited %s for %s", s.Subtask, millis(s.DurationMS), s.WaitsFor)
		} else {
			add(tierStalled, s.DurationMS, "▲ %s waits %s for %s", s.Subtask, millis(s.DurationMS), s.WaitsFor)
		}
	}
	if h := st.InputHeld; h != nil {
		if h.Reason == "disk" {
			add(tierHeld, math.MaxInt64, "input NOT acknowledged: %s", h.Detail)
		} else {
			add(tierHeld, st.OutputBacklog, "input held: %s", h.Reason)
		}
	}
	if st.IngestLost > 0 {
		add(tierAttention, st.IngestLost, "ingest log damaged: %d messages lost", st.IngestLost)
	}
	for _, b := range st.Brokers {
		if !b.Up {
			add(tierAttention, 0, "broker %s down (%d of %d clients)", b.Name, b.Connected, b.Clients)
		}
	}
	if st.ConfigRejected {
		add(tierAttention, 0, "a change of its pipeline file was refused")
	}
	if m := st.Memory; m.Limit > 0 && m.HeapLive >= m.Limit-m.Limit/10 {
		add(tierAttention, 0, "memory near its limit: heap %s of %s", bytes(m.HeapLive), bytes(m.Limit))
	}
	if st.IngestLag >= f.opts.Lag {
		add(tierLag, st.IngestLag, "lag %s messages", count(float64(st.IngestLag)))
	}
	if n := st.DeadLetters + st.Rejected; n > 0 {
		var parts []string
		if st.DeadLetters > 0 {
			parts = append(parts, fmt.Sprintf("%d dead letters", st.DeadLetters))
		}
		if st.BadTime > 0 {
			parts = append(parts, fmt.Sprintf("%d with a bad device clock", st.BadTime))
		}
		if st.Rejected > 0 {
			parts = append(parts, fmt.Sprintf("%d rejected", st.Rejected))
		}
		add(tierDead, n, "%s", strings.Join(parts, ", "))
	}
	if st.DiskPerDay >= f.opts.Wear {
		add(tierWear, st.DiskPerDay, "writes %s a day", bytes(st.DiskPerDay))
	}
	for i := 1; i < len(r.problems); i++ { // a few: by insertion, stable
		for j := i; j > 0 && r.problems[j].tier < r.problems[j-1].tier; j-- {
			r.problems[j], r.problems[j-1] = r.problems[j-1], r.problems[j]
		}
	}
	return r
}

// stallOf is g's stall of --stall or more: the one its newest status
// tells of, or the longest it told of within two status intervals or two
// checkpoint intervals (the longer), so that a gateway that stalls at
// every checkpoint stays stalled between checkpoints rather than
// flicker; nil when there is none.
func (f *Fleet) stallOf(g *gateway) *api.GatewayStall {
	st := g.status
	if s := st.Stall; s != nil && time.Duration(s.DurationMS)*time.Millisecond >= f.opts.Stall {
		return s
	}
	hold := 2 * time.Duration(max(st.IntervalMS, st.Checkpoints.IntervalMS)) * time.Millisecond
	var worst *api.GatewayStall
	for i := range g.stalls {
		s := &g.stalls[i]
		if f.now.Sub(s.at) <= hold && time.Duration(s.DurationMS)*time.Millisecond >= f.opts.Stall && (worst == nil || s.DurationMS > worst.DurationMS) {
			worst = &s.GatewayStall
		}
	}
	if worst != nil && !worst.Ended {
		ended := *worst // what was in progress then is no more, as far as the newest status says
		ended.Ended = true
		worst = &ended
	}
	return worst
}

// clock is t as the view shows a time of day.
func (f *Fleet) clock(t time.Time) string { return t.In(f.opts.Location).Format("15:04:05") }

// counts are the header's: how many gateways, up, down, stalled,
// failing and late.
type fleetCounts struct{ all, up, down, stalled, failing, late int }

func (f *Fleet) counts() fleetCounts {
	var c fleetCounts
	for _, g := range f.ranked {
		c.all++
		switch g.rank.tier() {
		case tierOffline, tierSilent:
			c.down++
		default:
			c.up++
		}
		has := func(tier int) bool {
			return slices.ContainsFunc(g.rank.problems, func(p problem) bool { return p.tier == tier })
		}
		if has(tierStalled) {
			c.stalled++
		}
		if has(tierFailing) {
			c.failing++
		}
		if has(tierLate) {
			c.late++
		}
	}
	return c
}

// age is how old g's newest word is: its status's, or its status
// topic's.
func (f *Fleet) age(g *gateway) (time.Duration, bool) {
	switch {
	case g.status != nil:
		return max(f.now.Sub(g.statusAt), 0), true
	case !g.downAt.IsZero():
		return max(f.now.Sub(g.downAt), 0), true
	}
	return 0, false
}

// checkpointAge is how long ago g's last checkpoint completed, now.
func (f *Fleet) checkpointAge(g *gateway) (time.Duration, bool) {
	if g.status == nil || g.status.Checkpoints.Last == nil {
		return 0, false
	}
	return max(f.now.Sub(g.statusAt)+time.Duration(g.status.Checkpoints.Last.AgeMS)*time.Millisecond, 0), true
}
