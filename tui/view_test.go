package tui

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/cairn-edge/cairn/agent/api"
)

// model returns a UI that has seen statuses, at a terminal size, without a
// connection: the view is a function of what it was given.
func model(w, h int, statuses ...api.Status) *Model {
	m := New(api.NewClient("/run/cairn-test/cairn.sock"), Options{Stall: time.Second, Location: time.UTC})
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	for _, st := range statuses {
		m.Update(statusMsg(st))
	}
	return m
}

// press presses keys on m, a UI's model: tab, enter, esc, down, end, or
// the text of any other.
func press(m interface {
	Update(tea.Msg) (tea.Model, tea.Cmd)
}, keys ...string) {
	for _, k := range keys {
		var msg tea.KeyPressMsg
		switch k {
		case "tab":
			msg = tea.KeyPressMsg{Code: tea.KeyTab}
		case "enter":
			msg = tea.KeyPressMsg{Code: tea.KeyEnter}
		case "esc":
			msg = tea.KeyPressMsg{Code: tea.KeyEscape}
		case "down":
			msg = tea.KeyPressMsg{Code: tea.KeyDown}
		case "end":
			msg = tea.KeyPressMsg{Code: tea.KeyEnd}
		default:
			msg = tea.KeyPressMsg{Code: []rune(k)[0], Text: k}
		}
		m.Update(msg)
	}
}

// screen renders m as the terminal shows it without colour.
func screen(t *testing.T, m *Model) string {
	t.Helper()
	return terminalShows(t, m.render(), m.width, m.height)
}

// terminalShows is what a terminal w cells wide and h lines high shows
// of a UI's rendering out, without colour, checking that out fills it
// exactly and never overflows a line.
func terminalShows(t *testing.T, out string, w, h int) string {
	t.Helper()
	out = ansi.Strip(out)
	lines := strings.Split(out, "\n")
	if len(lines) != h {
		t.Errorf("%d lines on a %d-line terminal", len(lines), h)
	}
	for i, l := range lines {
		if lw := ansi.StringWidth(l); lw > w {
			t.Errorf("line %d is %d cells on a %d-cell terminal: %q", i+1, lw, w, l)
		}
	}
	return out
}

// TestView compares views of fixed statuses with golden files (rewrite
// them with -update), at 80x24 and on a wide terminal.
func TestView(t *testing.T) {
	noAgent, refused := noAgent(t), refused(t)
	for _, tc := range []struct {
		name string
		m    func() *Model
		want []string // must be on screen, golden or not
	}{
		{"narrow-graph", func() *Model { return model(80, 24, skewedBefore, skewedNow) },
			[]string{"▲ STALL drift/0 waits 1.6s for score/0 (backlog 515)", "fleet", "97% ▲", "· up 1m31s · mem 44MB"}},
		{"narrow-checkpoint", func() *Model {
			m := model(80, 24, skewedBefore, skewedNow)
			press(m, "tab")
			return m
		}, []string{"[Checkpoint]", "… score/0 515 queued ◀", "✓ reference/0 +0ms", "acked 3/6"}},
		{"narrow-history", func() *Model {
			m := model(80, 24, skewedBefore, skewedNow)
			press(m, "tab", "tab")
			return m
		}, []string{"[History]", "41    LATE      11:07:44   1.2s", "FAILED", "expired"}},
		{"wide", func() *Model { return model(150, 40, skewedBefore, skewedNow) },
			[]string{"── Graph", "── Checkpoint", "── History", "… score/0 515 queued ◀"}},
		{"filter", func() *Model {
			m := model(80, 24, skewedBefore, skewedNow)
			press(m, "/", "d", "r", "i", "f", "t", "enter")
			return m
		}, []string{"filter drift (esc clears)"}},
		{"help", func() *Model {
			m := model(80, 24, skewedBefore, skewedNow)
			press(m, "?")
			return m
		}, []string{"checkpoint", "▲ STALL: a subtask aligning for 1.0s or more"}},
		{"reconnecting", func() *Model {
			m := model(80, 24, skewedNow)
			m.Update(lostAt(1_795_000_070, 3, noAgent))
			return m
		}, []string{"unreachable since 11:07:50 · last seen running",
			"⟳ reconnecting, attempt 3: agent not running: no control socket at\n/run/cairn-test/cairn.sock"}},
		{"reconnecting-wide", func() *Model {
			m := model(120, 30, skewedNow)
			m.Update(lostAt(1_795_000_070, 5, noAgent))
			return m
		}, []string{"⟳ reconnecting, attempt 5: agent not running: no control socket at /run/cairn-test/cairn.sock\n"}},
		{"not-running", func() *Model {
			m := model(80, 24)
			m.Update(lostAt(1_795_000_070, 5, noAgent))
			return m
		}, []string{"connecting to /run/cairn-test/cairn.sock…", "⟳ reconnecting, attempt 5: agent not running: no control socket at\n"}},
		{"not-running-wide", func() *Model {
			m := model(120, 30)
			m.Update(lostAt(1_795_000_070, 5, noAgent))
			return m
		}, []string{"⟳ reconnecting, attempt 5: agent not running: no control socket at /run/cairn-test/cairn.sock\n"}},
		{"unreachable-wide", func() *Model {
			m := model(120, 30, crowdedStatus(90, 10), crowdedStatus(91, 11))
			m.Update(lostAt(1_795_000_070, 1, errors.New("the agent closed the status stream")))
			m.Update(lostAt(1_795_000_072, 2, refused))
			return m
		}, []string{"unreachable since 11:07:50 · last seen running", "⟳ reconnecting, attempt 2: agent not running: nothing listens on cairn.sock"}},
		{"crowded-wide", func() *Model { return model(120, 30, crowdedStatus(90, 10), crowdedStatus(91, 11)) },
			[]string{"hot-per-site", "+4 more · ↑/↓ scroll", "↑/↓ scroll • / filter"}},
		{"crowded-wide-scrolled", func() *Model {
			m := model(120, 30, crowdedStatus(90, 10), crowdedStatus(91, 11))
			press(m, "j", "j")
			return m
		}, []string{"2 above · +2 more · ↑/↓ scroll"}},
		{"long-names-wide", func() *Model {
			long := map[string]string{"fleet": "fleet-temperature-and-humidity", "reference": "reference-fleet",
				"score": "score-anomalies-isolation-forest", "drift-out": "drift-out-to-site"}
			return model(120, 30, renamed(skewedBefore, long), renamed(skewedNow, long))
		}, []string{"reference-fleet  ", "drift-out-to-site ", "fleet-temperatur… ", "score-anomalies-… "}},
		{"connecting", func() *Model { return model(80, 24) }, []string{"connecting to /run/cairn-test/cairn.sock"}},
		{"tiny", func() *Model { return model(30, 8, skewedBefore, skewedNow) }, nil},
		{"input-held", func() *Model {
			held := skewedNow
			held.InputHeld, held.OutputBacklogBytes = true, 33_900_000
			return model(80, 24, skewedBefore, held)
		}, []string{"input held: the sinks hold 32MB their brokers have not taken"}},
		{"ingest-trouble", func() *Model {
			trouble := skewedNow
			trouble.Ingest = api.Ingest{DamagedRecords: 2, LostMessages: 102, NotAcknowledgingSinceUnixMS: 1_795_000_044_000,
				NotAcknowledgingReason: "appending to ingest log fleet/0: write data/ingest/log-fleet%2F0/00000000000000000001.seg: no space left on device"}
			return model(100, 24, skewedBefore, trouble)
		}, []string{"input NOT acknowledged since 11:07:24: appending to ingest log fleet/0: write\ndata/ingest/log-fleet%2F0/00000000000000000001.seg: no space left on device\n",
			"ingest log damaged: 102 messages lost in 2 ranges, dead letters of their sources"}},
		{"broker-down", func() *Model {
			down := skewedNow
			down.Brokers = []api.Broker{{ID: "local", Connected: true, Clients: 2, ConnectedClients: 2},
				{ID: "plant", Clients: 2, SinceUnixMS: 1_795_000_004_000, LastError: "dial tcp 10.0.0.9:1883: connect: connection refused"}}
			return model(100, 24, skewedBefore, down)
		}, []string{"broker plant NOT CONNECTED (0 of 2 clients) since 11:06:44: dial tcp 10.0.0.9:1883: connect:\nconnection refused\n", "brokers 1/2 up"}},
		{"narrow-stalls", func() *Model {
			m := model(80, 24, skewedBefore, skewedNow)
			m.opts.Stall = 500 * time.Millisecond
			press(m, "tab", "tab", "tab")
			return m
		}, []string{"[Stalls]", "11:07:45 #41     drift/0          score/0             1.1s    1.0k  aligned",
			"11:07:42 #40     drift/0          score/0              59s     48k  abandoned", "timed out"}},
		{"no-stalls", func() *Model {
			calm := skewedNow
			calm.Stalls = nil
			m := model(80, 24, skewedBefore, calm)
			press(m, "tab", "tab", "tab")
			return m
		}, []string{"no subtask aligned for 1.0s or more in the recent checkpoints\n"}},
		{"no-stalls-wide", func() *Model {
			calm := skewedNow
			calm.Stalls = nil
			return model(120, 30, skewedBefore, calm)
		}, []string{"│ no subtask aligned for 1.0s or\n", "│ more in the recent checkpoints\n"}},
		{"stall-held", func() *Model { return model(80, 24, skewedBefore, settled(skewedNow, 2*time.Second)) },
			[]string{"▲ STALL drift/0 waited 1.1s for score/0 (backlog 1.0k) · #41 · ended 2.0s ago",
				"no checkpoint in flight · last ✓ #41 in 1.2s LATE, 72KB Δ"}},
		{"memory-near-limit", func() *Model {
			near := skewedNow
			near.Memory.HeapLive = 91 << 20
			return model(80, 24, skewedBefore, near)
		}, []string{"memory near its limit: heap 91MB live of 96MB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := screen(t, tc.m())
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("the screen lacks %q:\n%s", w, out)
				}
			}
			golden.RequireEqual(t, out)
		})
	}
}

// TestStallHeldAFewSeconds: a stall that ended stays in the header for
// stallHold, on the agent's clock, the longest of those first; then it
// goes. One under the threshold never shows, and one in progress goes
// before those that ended.
func TestStallHeldAFewSeconds(t *testing.T) {
	for _, tc := range []struct {
		ago   time.Duration // after #41's end; #40's was 3105ms before
		stall time.Duration
		want  string // "": no stall shown
	}{
		{0, time.Second, "waited 59s for score/0 (backlog 48k) · #40 · ended 3.1s ago"}, // 3105ms
		{stallHold - 3105*time.Millisecond, time.Second, "#40 · ended 5.0s ago"},
		{stallHold - 3104*time.Millisecond, time.Second, "waited 1.1s for score/0 (backlog 1.0k) · #41 · ended 1.9s ago"},
		{stallHold, time.Second, "#41 · ended 5.0s ago"},
		{stallHold + time.Millisecond, time.Second, ""},
		{time.Second, 2 * time.Second, "#40 · ended 4.1s ago"}, // #41's 1.1s is under the threshold
	} {
		m := model(80, 24, settled(skewedNow, tc.ago))
		m.opts.Stall = tc.stall
		out := screen(t, m)
		if tc.want == "" && strings.Contains(out, "STALL") || tc.want != "" && !strings.Contains(out, "▲ STALL drift/0 ") || !strings.Contains(out, tc.want) {
			t.Errorf("%v after #41's end, threshold %v: want %q:\n%s", tc.ago, tc.stall, tc.want, out)
		}
	}
	m := model(80, 24, skewedNow) // drift/0 aligning 1.6s; #41's ended 0.8s before
	if out := screen(t, m); !strings.Contains(out, "▲ STALL drift/0 waits 1.6s") || strings.Contains(out, "ended") {
		t.Errorf("the stall in progress should show, not the one that ended:\n%s", out)
	}
}

// TestFilterHidesOperators checks that / narrows the graph to matching
// operators and esc brings them back.
func TestFilterHidesOperators(t *testing.T) {
	m := model(80, 24, skewedBefore, skewedNow)
	press(m, "/", "s", "c", "o", "enter")
	out := screen(t, m)
	if !strings.Contains(out, "score") || strings.Contains(out, "reference ") {
		t.Fatalf("filter sco shows the wrong operators:\n%s", out)
	}
	press(m, "esc")
	if out := screen(t, m); !strings.Contains(out, "reference ") {
		t.Fatalf("esc did not clear the filter:\n%s", out)
	}
}

// TestScrollReachesEveryOperator checks that the scroll keys bring every
// operator into the wide layout's graph panel, stop at its ends, and say
// how many are out of view; a filter starts the list over.
func TestScrollReachesEveryOperator(t *testing.T) {
	m := model(120, 30, crowdedStatus(90, 10), crowdedStatus(91, 11))
	for _, step := range []struct {
		keys         []string
		shows, lacks string
		marker       string
	}{
		{nil, "alarm ", "averages ", "+4 more · ↑/↓ scroll"},
		{[]string{"end"}, "site-rollup ", "score ", "4 above · ↑/↓ scroll"},
		{[]string{"down", "j", "pgdown"}, "site-rollup ", "score ", "4 above · ↑/↓ scroll"},
		{[]string{"k"}, "alarms ", "site-rollup ", "3 above · +1 more · ↑/↓ scroll"},
		{[]string{"pgup"}, "fleet ", "alerts ", "+4 more · ↑/↓ scroll"},
		{[]string{"up", "pgdown"}, "site-rollup ", "score ", "4 above · ↑/↓ scroll"},
		{[]string{"home"}, "fleet ", "averages ", "+4 more · ↑/↓ scroll"},
	} {
		press(m, step.keys...)
		out := screen(t, m)
		if !strings.Contains(out, step.shows) || strings.Contains(out, step.lacks) || !strings.Contains(out, step.marker) {
			t.Fatalf("after %v the graph should show %q, not %q, and %q:\n%s", step.keys, step.shows, step.lacks, step.marker, out)
		}
	}
	press(m, "end", "/", "a", "backspace", "enter")
	if out := screen(t, m); !strings.Contains(out, "fleet ") || !strings.Contains(out, "+4 more") {
		t.Fatalf("a filter should start the list over:\n%s", out)
	}
}

// TestUnreachableSince checks that the header says since when the agent
// is unreachable: from the first failed attempt, kept over the next ones,
// and anew after the agent came back and went away again.
func TestUnreachableSince(t *testing.T) {
	m := model(80, 24, skewedNow)
	m.Update(lostAt(1_795_000_070, 1, errors.New("the agent closed the status stream")))
	if out := screen(t, m); !strings.Contains(out, "attempt 1: the agent closed the status stream") {
		t.Fatalf("the first failure's reason is missing:\n%s", out)
	}
	m.Update(lostAt(1_795_000_075, 2, refused(t)))
	out := screen(t, m)
	for _, want := range []string{"unreachable since 11:07:50 · last seen running", "attempt 2: agent not running: nothing listens on cairn.sock"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the screen lacks %q:\n%s", want, out)
		}
	}
	for _, stale := range []string{"running · up", "mem 44MB", "in flight"} {
		if strings.Contains(out, stale) {
			t.Fatalf("an unreachable agent's header still says %q:\n%s", stale, out)
		}
	}
	m.Update(statusMsg(skewedNow))
	m.Update(lostAt(1_795_000_100, 1, noAgent(t)))
	if out := screen(t, m); !strings.Contains(out, "unreachable since 11:08:20") {
		t.Fatalf("lost again after a reconnection, the time is not the new one:\n%s", out)
	}
}

// TestRatesFollowTheAgentClock checks that rates come from counter
// differences over the agent's uptime, and that a restarted agent (uptime
// going back) shows no bogus rates.
func TestRatesFollowTheAgentClock(t *testing.T) {
	m := model(80, 24, skewedBefore, skewedNow)
	if r := m.rates["score/0"]; r.in != 2000 || r.out != 1990 {
		t.Fatalf("score/0 rates %+v, want 2000 in and 1990 out a second", r)
	}
	if r := m.rates["fleet/0"]; r.backpressure < 0.969 || r.backpressure > 0.971 {
		t.Fatalf("fleet/0 backpressure %v, want 0.97", r.backpressure)
	}
	// A sink's records out are the messages its broker acknowledged.
	withSink := func(st api.Status, published int64) api.Status {
		st.Operators = slices.Clone(st.Operators)
		for i := range st.Operators {
			if st.Operators[i].ID == "drift-out" {
				st.Operators[i].Sink = &api.SinkCounts{Published: published}
			}
		}
		return st
	}
	dt := skewedNow.UptimeSeconds - skewedBefore.UptimeSeconds
	sinks := model(80, 24, withSink(skewedBefore, 100), withSink(skewedNow, 100+int64(12*dt)))
	if r := sinks.rates["drift-out/0"]; r.out != 12 {
		t.Fatalf("drift-out/0 rates %+v, want the 12 a second its broker acknowledged out", r)
	}
	restarted := skewedStatus(2, 1)
	m.Update(statusMsg(restarted))
	if len(m.rates) != 0 {
		t.Fatalf("rates across an agent restart: %v", m.rates)
	}
}

// TestStallThreshold checks that only blocking alignments at or above
// the threshold are stalls, longest first, each naming its pending input
// with the most backlog; an unaligned capture blocks nothing and is not
// one.
func TestStallThreshold(t *testing.T) {
	st := skewedStatus(91, 11)
	a := *st.Operators[3].Subtasks[1].Alignment
	a.Unaligned, a.Blocking = false, true
	st.Operators = slices.Clone(st.Operators)
	st.Operators[3].Subtasks = slices.Clone(st.Operators[3].Subtasks)
	st.Operators[3].Subtasks[1].Alignment = &a
	m := model(80, 24, st)
	m.opts.Stall = 100 * time.Millisecond
	s := m.stalls()
	if len(s) != 2 || s[0].Subtask != "drift/0" || s[1].Subtask != "drift/1" {
		t.Fatalf("stalls at 100ms: %+v", s)
	}
	if s[1].Laggard.From != "reference/0" || s[1].Backlog != 1 {
		t.Fatalf("drift/1 waits on %+v (backlog %d), want reference/0 with 1", s[1].Laggard, s[1].Backlog)
	}
	m = model(80, 24, skewedNow) // drift/1 captures unaligned
	m.opts.Stall = 100 * time.Millisecond
	if s := m.stalls(); len(s) != 1 || s[0].Subtask != "drift/0" {
		t.Fatalf("stalls at 100ms with drift/1 unaligned: %+v", s)
	}
	m.opts.Stall = 2 * time.Second
	if s := m.stalls(); len(s) != 0 {
		t.Fatalf("stalls at 2s: %+v", s)
	}
}

// TestSizeOfACheckpointThatChangedNothing: the history's size column
// names the checkpoint one that stored nothing is the same as.
func TestSizeOfACheckpointThatChangedNothing(t *testing.T) {
	if got := size(api.CheckpointInfo{ID: 9, SameAs: 7, Incremental: true}); got != "= #7" {
		t.Fatalf("size %q, want = #7", got)
	}
	if got := size(api.CheckpointInfo{ID: 9, SizeBytes: 2048, Incremental: true}); got != "2.0KB Δ" {
		t.Fatalf("size %q", got)
	}
}
