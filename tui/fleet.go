package tui

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/cairn-edge/cairn/agent/api"
)

// FleetOptions tune the fleet view.
type FleetOptions struct {
	// Source says where the statuses come from, for the header: the
	// broker (no password in it) and the status topics' filter, Topic.
	Source, Topic string
	// Stall is the alignment from which a gateway counts as stalled;
	// default 1s.
	Stall time.Duration
	// Lag is the ingest lag, in messages, from which a gateway counts as
	// lagging; default 1,000.
	Lag int64
	// Wear is the bytes a day written to flash from which a gateway
	// counts as wearing it; default 1 GiB.
	Wear int64
	// Location is the time zone of the times shown; default time.Local.
	Location *time.Location
	// Now is the clock; default time.Now.
	Now func() time.Time
}

func (o *FleetOptions) defaults() {
	if o.Stall <= 0 {
		o.Stall = time.Second
	}
	if o.Lag <= 0 {
		o.Lag = 1000
	}
	if o.Wear <= 0 {
		o.Wear = 1 << 30
	}
	if o.Location == nil {
		o.Location = time.Local
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Messages of the fleet view.
type (
	// fleetBatch is what came from the broker since the last batch: a
	// batch a redraw, however many gateways publish.
	fleetBatch []any // api.FleetMessage or api.FleetLink
	// fleetTick ages what is shown: a status's age, a gateway gone silent.
	fleetTick time.Time
)

// A batch is what comes within fleetLinger of its first message, at
// most fleetBatchMax messages: a redraw a batch, ten a second at most
// whatever the fleet's size, and one between batches of a broker that
// sends faster than the view takes them.
const (
	fleetLinger   = 100 * time.Millisecond
	fleetBatchMax = 2048
)

// gateway is what the view knows of one gateway, from its messages.
type gateway struct {
	id string
	// down: its status topic says offline (its last will, or its agent
	// stopped), and no status came after; downAt when that came (zero
	// for a retained one: the broker does not say when).
	down   bool
	downAt time.Time
	online bool // its status topic said online
	// status is its newest status, statusAt when it was made on the
	// view's clock: when it came, or for a retained one as long before
	// that as its own time (the gateway's clock) says, but never later.
	// It keeps the monotonic reading of when the status came, so that
	// its age is measured on the monotonic clock from then: a step of the
	// view's wall clock moves no age.
	status   *api.GatewayStatus
	statusAt time.Time
	bad      string // why its last status could not be read
	// history and failures are the checkpoints its statuses told of,
	// oldest first, each with when it completed or was triggered; stalls
	// the stalls, each with when it was seen.
	history  []seenCheckpoint
	failures []seenFailure
	stalls   []seenStall

	rank rank // its problems as of the last ranking
}

type seenCheckpoint struct {
	api.GatewayCheckpoint
	at time.Time
}

type seenFailure struct {
	api.GatewayFailure
	at time.Time
}

type seenStall struct {
	api.GatewayStall
	at time.Time // when it ended, or was seen in progress
}

// fleetKept is how many checkpoints, failures and stalls of a gateway the
// view keeps: as many as the agent's own history.
const fleetKept = historyLength

// Fleet is the fleet view: every gateway's status from the broker, worst
// first. Its View is a function of the messages it was given, the clock,
// the terminal size and the keys pressed, so it is tested from fixed
// messages.
type Fleet struct {
	opts   FleetOptions
	ctx    context.Context
	cancel context.CancelFunc
	events chan any

	width, height int
	gateways      map[string]*gateway
	ranked        []*gateway // worst first, as of the last ranking
	now           time.Time  // the clock at the last ranking

	link      api.FleetLink // the newest word on the connection
	linked    bool          // connected once at least
	downSince time.Time     // when the connection was lost, while it is

	selected  string // the gateway under the cursor
	moved     bool   // the user moved the cursor: it follows that gateway; else it stays on the first row
	top       int    // the first row shown
	detail    string // the gateway shown in detail, "" for the table
	detailTop int    // the first line of the detail shown
	filter    filterLine
	showHelp  bool
	bad       int // messages that were not a status
}

// NewFleet returns a fleet view; Message and Link feed it.
func NewFleet(opts FleetOptions) *Fleet {
	opts.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fleet{opts: opts, ctx: ctx, cancel: cancel, events: make(chan any, fleetBatchMax),
		width: 80, height: 24, gateways: map[string]*gateway{}}
	f.now = opts.Now()
	return f
}

// Message hands the view a message of a status topic; it waits while the
// view is behind, and returns at once once it has quit.
func (f *Fleet) Message(m api.FleetMessage) { f.send(m) }

// Link hands the view a change of its connection to the broker.
func (f *Fleet) Link(l api.FleetLink) { f.send(l) }

func (f *Fleet) send(ev any) {
	select {
	case f.events <- ev:
	case <-f.ctx.Done():
	}
}

// RunFleet shows the fleet view on the terminal until the user quits.
func RunFleet(f *Fleet) error {
	defer f.cancel()
	_, err := tea.NewProgram(f, tea.WithFPS(10)).Run()
	return err
}

// Init starts following the broker's messages and the clock.
func (f *Fleet) Init() tea.Cmd { return tea.Batch(f.next, f.tick()) }

// next waits for the broker's next message and takes those that come
// within fleetLinger of it.
func (f *Fleet) next() tea.Msg {
	var batch fleetBatch
	select {
	case ev := <-f.events:
		batch = append(batch, ev)
	case <-f.ctx.Done():
		return nil
	}
	linger := time.NewTimer(fleetLinger)
	defer linger.Stop()
	for len(batch) < fleetBatchMax {
		select {
		case ev := <-f.events:
			batch = append(batch, ev)
		case <-linger.C:
			return batch
		case <-f.ctx.Done():
			return nil
		}
	}
	return batch
}

func (f *Fleet) tick() tea.Cmd {
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return fleetTick(t) })
}

// Update handles a message.
func (f *Fleet) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		f.width, f.height = msg.Width, msg.Height
	case fleetBatch:
		changed := make(map[*gateway]bool)
		for _, ev := range msg {
			switch ev := ev.(type) {
			case api.FleetMessage:
				changed[f.take(ev)] = true
			case api.FleetLink:
				f.linkChanged(ev)
			}
		}
		f.rank(changed)
		return f, f.next
	case fleetTick:
		f.rankAll()
		return f, f.tick()
	case tea.KeyPressMsg:
		return f, f.key(msg)
	}
	return f, nil
}

// linkChanged notes the connection going up or down.
func (f *Fleet) linkChanged(l api.FleetLink) {
	switch {
	case l.Up:
		f.linked, f.downSince = true, time.Time{}
	case f.link.Up || f.downSince.IsZero():
		f.downSince = l.At
	}
	f.link = l
}

// take applies a message of a gateway's status topics, and returns the
// gateway's.
func (f *Fleet) take(m api.FleetMessage) *gateway {
	g := f.gateways[m.Gateway]
	if g == nil {
		g = &gateway{id: m.Gateway}
		f.gateways[m.Gateway] = g
	}
	if !m.JSON {
		switch strings.TrimSpace(string(m.Payload)) {
		case "offline":
			// Every MQTT client of an agent carries the will, and a
			// broker publishes each when that client's keepalive runs
			// out: the first says when the gateway went down, the
			// others are the same news.
			if !g.down || g.downAt.IsZero() {
				g.downAt = m.At
				if m.Retained {
					g.downAt = time.Time{} // it may have come long ago
				}
			}
			g.down, g.online = true, false
		case "online":
			g.down, g.online = false, true
		default:
			f.bad++
		}
		return g
	}
	var st api.GatewayStatus
	if err := json.Unmarshal(m.Payload, &st); err != nil {
		g.bad = "its status is no JSON the view reads: " + err.Error()
		f.bad++
		return g
	}
	g.bad = ""
	at := m.At
	if m.Retained {
		// When the gateway made it, as far as its clock says: a retained
		// status may be as old as the gateway that went away.
		if made := time.UnixMilli(st.Time); made.Before(at) {
			at = at.Add(made.Sub(at))
		}
	} else if g.down {
		g.down = false // a live status: its agent is up again
	}
	if st.State == "stopped" {
		g.down, g.downAt = true, at
	}
	g.status, g.statusAt = &st, at
	g.remember(st, at)
	return g
}

// remember adds the checkpoints, failure and stall st tells of to g's.
func (g *gateway) remember(st api.GatewayStatus, at time.Time) {
	c := st.Checkpoints
	if l := c.Last; l != nil && !slices.ContainsFunc(g.history, func(h seenCheckpoint) bool { return h.ID == l.ID }) {
		g.history = keep(append(g.history, seenCheckpoint{*l, at.Add(-time.Duration(l.AgeMS) * time.Millisecond)}))
	}
	if l := c.LastFailed; l != nil && !slices.ContainsFunc(g.failures, func(h seenFailure) bool { return h.ID == l.ID }) {
		g.failures = keep(append(g.failures, seenFailure{*l, at.Add(-time.Duration(l.AgeMS) * time.Millisecond)}))
	}
	if s := st.Stall; s != nil {
		seen := seenStall{*s, at.Add(-time.Duration(s.EndedAgoMS) * time.Millisecond)}
		i := slices.IndexFunc(g.stalls, func(h seenStall) bool { return h.Checkpoint == s.Checkpoint && h.Subtask == s.Subtask })
		switch {
		case i < 0:
			g.stalls = keep(append(g.stalls, seen))
		case s.DurationMS >= g.stalls[i].DurationMS: // the same, later on, or ended
			g.stalls[i] = seen
		}
	}
}

// keep is the newest fleetKept of s.
func keep[T any](s []T) []T {
	if len(s) > fleetKept {
		return slices.Delete(s, 0, len(s)-fleetKept)
	}
	return s
}

// fleetKeys are the fleet view's keys, shown by its help.
type fleetKeys struct {
	Up, Down, Open, Back, Filter, Help, Quit key.Binding
}

func (k fleetKeys) ShortHelp() []key.Binding {
	return []key.Binding{k.Up, k.Open, k.Filter, k.Help, k.Quit}
}

func (k fleetKeys) FullHelp() [][]key.Binding {
	return [][]key.Binding{{k.Up, k.Down}, {k.Open, k.Back, k.Filter}, {k.Help, k.Quit}}
}

var fleetKeyMap = fleetKeys{
	Up:     key.NewBinding(key.WithKeys("up", "k", "pgup", "home"), key.WithHelp("↑/↓", "move")),
	Down:   key.NewBinding(key.WithKeys("down", "j", "pgdown", "end"), key.WithHelp("pgup/pgdn", "page")),
	Open:   key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "detail")),
	Back:   key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
	Filter: key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
	Help:   key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
	Quit:   key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
}

// key handles a key press.
func (f *Fleet) key(msg tea.KeyPressMsg) tea.Cmd {
	if f.filter.typing {
		f.filter.key(msg)
		f.top = 0
		f.rankAll() // the selection moves into what the filter lets through
		return nil
	}
	switch k := msg.String(); {
	case key.Matches(msg, fleetKeyMap.Quit):
		f.cancel()
		return tea.Quit
	case key.Matches(msg, fleetKeyMap.Help):
		f.showHelp = !f.showHelp
	case k == "esc":
		switch {
		case f.showHelp:
			f.showHelp = false
		case f.detail != "":
			f.detail = ""
		default:
			f.filter.text = nil
		}
		f.rankAll()
	case f.detail != "":
		if key.Matches(msg, fleetKeyMap.Up) || key.Matches(msg, fleetKeyMap.Down) {
			f.scrollDetail(k)
		}
	case key.Matches(msg, fleetKeyMap.Filter):
		f.filter.typing = true
	case key.Matches(msg, fleetKeyMap.Open):
		f.detail, f.detailTop = f.selected, 0
	case key.Matches(msg, fleetKeyMap.Up), key.Matches(msg, fleetKeyMap.Down):
		f.move(k)
	}
	return nil
}

// move moves the cursor by the key k: a row, a page, or to an end.
func (f *Fleet) move(k string) {
	rows := f.rows()
	if len(rows) == 0 {
		return
	}
	i := max(slices.IndexFunc(rows, func(g *gateway) bool { return g.id == f.selected }), 0)
	page := max(f.tableHeight()-1, 1)
	switch k {
	case "up", "k":
		i--
	case "down", "j":
		i++
	case "pgup":
		i -= page
	case "pgdown":
		i += page
	case "home":
		i = 0
	case "end":
		i = len(rows) - 1
	}
	f.selected, f.moved = rows[min(max(i, 0), len(rows)-1)].id, true
}

// scrollDetail moves the detail by the key k: a line, a page, or to an
// end; render keeps it within the lines.
func (f *Fleet) scrollDetail(k string) {
	page := max(f.tableHeight()-1, 1)
	switch k {
	case "up", "k":
		f.detailTop--
	case "down", "j":
		f.detailTop++
	case "pgup":
		f.detailTop -= page
	case "pgdown":
		f.detailTop += page
	case "home":
		f.detailTop = 0
	case "end":
		f.detailTop = 1 << 30
	}
	f.detailTop = max(f.detailTop, 0)
}

// rows are the ranked gateways the filter lets through.
func (f *Fleet) rows() []*gateway {
	flt := f.filter.lower()
	if flt == "" {
		return f.ranked
	}
	var out []*gateway
	for _, g := range f.ranked {
		if f.matches(g, flt) {
			out = append(out, g)
		}
	}
	return out
}

// matches reports whether the filter flt (lower case) is in g's name, its
// agent's, its state or what is wrong with it.
func (f *Fleet) matches(g *gateway, flt string) bool {
	text := g.id + " " + g.rank.state
	if g.status != nil {
		text += " " + g.status.Agent
	}
	for _, p := range g.rank.problems {
		text += " " + p.text
	}
	return strings.Contains(strings.ToLower(text), flt)
}
