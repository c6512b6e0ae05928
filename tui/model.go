package tui

import (
	"context"
	"errors"
	"fmt"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/progress"
	tea "charm.land/bubbletea/v2"

	"github.com/cairn-edge/cairn/agent/api"
)

// Options tune the UI.
type Options struct {
	// Stall is the alignment time from which an aligning subtask is
	// highlighted and its laggard input named; default 1s.
	Stall time.Duration
	// Location is the time zone of the history's trigger times; default
	// time.Local.
	Location *time.Location
}

func (o *Options) defaults() {
	if o.Stall <= 0 {
		o.Stall = time.Second
	}
	if o.Location == nil {
		o.Location = time.Local
	}
}

// Panels, in tab order.
const (
	graphPanel = iota
	checkpointPanel
	historyPanel
	stallsPanel
	panelCount
)

var panelNames = [panelCount]string{"Graph", "Checkpoint", "History", "Stalls"}

// Messages from the agent's status stream and from commands.
type (
	// statusMsg is a status from the stream.
	statusMsg api.Status
	// lostMsg says the stream broke (or could not start), when and why:
	// the UI reconnects.
	lostMsg struct {
		err     error
		attempt int
		at      time.Time
	}
	// doneMsg is the answer to a checkpoint or savepoint request.
	doneMsg struct {
		kind string
		resp api.CheckpointResponse
		err  error
	}
)

// keyMap is the UI's keys, shown by the help.
type keyMap struct {
	Checkpoint, Savepoint, Next, Prev, Scroll, Filter, Help, Quit key.Binding
}

func (k keyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Checkpoint, k.Savepoint, k.Next, k.Scroll, k.Filter, k.Help, k.Quit}
}

func (k keyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{{k.Checkpoint, k.Savepoint}, {k.Next, k.Prev, k.Scroll, k.Filter}, {k.Help, k.Quit}}
}

var keys = keyMap{
	Checkpoint: key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "checkpoint")),
	Savepoint:  key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "savepoint")),
	Next:       key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "panel")),
	Prev:       key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift+tab", "previous panel")),
	Scroll:     key.NewBinding(key.WithKeys("up", "down", "k", "j", "pgup", "pgdown", "home", "end"), key.WithHelp("↑/↓", "scroll")),
	Filter:     key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
	Help:       key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
	Quit:       key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
}

// rate is a subtask's throughput and backpressure between two statuses.
type rate struct {
	in, out      float64 // records per second
	backpressure float64 // share of the time spent waiting for room downstream
}

// Model is the UI's state. Its View is a function of the statuses it was
// given, the terminal size and the keys pressed, so it can be tested from
// fixed statuses.
type Model struct {
	client *api.Client
	ctx    context.Context
	cancel context.CancelFunc
	events chan tea.Msg
	opts   Options

	width, height int
	st            *api.Status  // newest status, nil before the first
	samples       []api.Status // the statuses of the rate window, oldest first
	rates         map[string]rate
	connected     bool
	lost          *lostMsg  // why the stream broke, while reconnecting
	lostSince     time.Time // when it broke, while reconnecting

	// scroll is the first operator row the graph panel shows when they do
	// not all fit; the view keeps it within the rows (graphWindow).
	scroll int

	panel int
	// filter narrows the operators shown to those whose id contains it.
	filter   filterLine
	help     help.Model
	showHelp bool
	bar      progress.Model

	busy  string // the request in progress: "checkpoint" or "savepoint"
	flash string // the outcome of the last request or event
	alarm bool   // flash is bad news
}

// New returns the UI of the agent behind client.
func New(client *api.Client, opts Options) *Model {
	opts.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Model{
		client: client, ctx: ctx, cancel: cancel, events: make(chan tea.Msg, 1), opts: opts,
		width: 80, height: 24, rates: map[string]rate{},
		help: help.New(),
		bar: progress.New(progress.WithFillCharacters('█', '░'), progress.WithoutPercentage(),
			progress.WithColors(colorOK)),
	}
}

// Init starts following the agent's status stream.
func (m *Model) Init() tea.Cmd {
	go follow(m.ctx, m.client, m.events)
	return m.next
}

// next waits for the stream's next message.
func (m *Model) next() tea.Msg {
	select {
	case msg := <-m.events:
		return msg
	case <-m.ctx.Done():
		return nil
	}
}

// follow sends the agent's statuses to events, reconnecting with a backoff
// whenever the stream breaks, until ctx is done.
func follow(ctx context.Context, c *api.Client, events chan<- tea.Msg) {
	send := func(msg tea.Msg) error {
		select {
		case events <- msg:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	backoff := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := c.Events(ctx, func(st api.Status) error {
			attempt, backoff = 1, 250*time.Millisecond
			return send(statusMsg(st))
		})
		if ctx.Err() != nil || send(lostMsg{err: err, attempt: attempt, at: time.Now()}) != nil {
			return
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// Update handles a message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case statusMsg:
		m.observe(api.Status(msg))
		return m, m.next
	case lostMsg:
		if m.connected || m.lost == nil {
			m.flash, m.alarm = "", false
			m.lostSince = msg.at
		}
		m.connected, m.lost = false, &msg
		return m, m.next
	case doneMsg:
		m.busy = ""
		switch {
		case msg.err != nil:
			m.flash, m.alarm = msg.kind+" failed: "+msg.err.Error(), true
		case msg.kind == "savepoint":
			m.flash, m.alarm = fmt.Sprintf("savepoint of checkpoint %d written to %s", msg.resp.ID, msg.resp.Path), false
		default:
			m.flash, m.alarm = fmt.Sprintf("checkpoint %d completed", msg.resp.ID), false
		}
	case tea.KeyPressMsg:
		return m, m.key(msg)
	}
	return m, nil
}

// rateWindow is how far back rates look, on the agent's clock: long
// enough to smooth the steps of counters that move a batch at a time.
const rateWindow = 1.0 // seconds

// observe takes a new status: rates are measured over the rate window on
// the agent's own clock, and a restart of the agent is announced.
func (m *Model) observe(st api.Status) {
	prev := m.st
	m.st, m.connected = &st, true
	if m.lost != nil {
		m.lost = nil
		m.flash, m.alarm = "reconnected: "+restartNote(prev, &st), false
	}
	if n := len(m.samples); n > 0 && st.UptimeSeconds < m.samples[n-1].UptimeSeconds {
		m.samples = nil // another run of the agent: its counters started over
	}
	m.samples = append(m.samples, st)
	base := 0 // the newest sample at least a window old, if any
	for i, s := range m.samples {
		if st.UptimeSeconds-s.UptimeSeconds >= rateWindow {
			base = i
		}
	}
	m.samples = m.samples[base:]
	m.rates = map[string]rate{}
	from := m.samples[0]
	if from.UptimeSeconds >= st.UptimeSeconds {
		return
	}
	dt := st.UptimeSeconds - from.UptimeSeconds
	before := map[string]api.Subtask{}
	for _, op := range from.Operators {
		for _, s := range op.Subtasks {
			before[subtaskName(op.ID, s.Index)] = published(op, s)
		}
	}
	for _, op := range st.Operators {
		for _, s := range op.Subtasks {
			name := subtaskName(op.ID, s.Index)
			s = published(op, s)
			b, ok := before[name]
			if !ok {
				continue
			}
			m.rates[name] = rate{
				in:           float64(s.RecordsIn-b.RecordsIn) / dt,
				out:          float64(s.RecordsOut-b.RecordsOut) / dt,
				backpressure: min(max(float64(s.BackpressureMS-b.BackpressureMS)/1000/dt, 0), 1),
			}
		}
	}
}

// published returns subtask s of op with, for a sink of one subtask,
// the messages its broker acknowledged as its records out: a sink emits
// no records downstream, and its output is what it publishes.
func published(op api.Operator, s api.Subtask) api.Subtask {
	if op.Sink != nil && len(op.Subtasks) == 1 {
		s.RecordsOut = op.Sink.Published
	}
	return s
}

// restartNote says whether the agent behind a reconnection is the same run
// and, if not, what it restored from.
func restartNote(prev, st *api.Status) string {
	if prev != nil && st.UptimeSeconds >= prev.UptimeSeconds {
		return "the agent kept running"
	}
	if r := st.RestoredFrom; r != nil {
		return fmt.Sprintf("the agent restarted and restored %s checkpoint %d", r.Source, r.ID)
	}
	return "the agent restarted from scratch"
}

func subtaskName(op string, index int) string { return fmt.Sprintf("%s/%d", op, index) }

// key handles a key press.
func (m *Model) key(msg tea.KeyPressMsg) tea.Cmd {
	if m.filter.typing {
		m.scroll = 0 // the rows change under it
		m.filter.key(msg)
		return nil
	}
	switch {
	case key.Matches(msg, keys.Quit):
		m.cancel()
		return tea.Quit
	case key.Matches(msg, keys.Help):
		m.showHelp = !m.showHelp
	case key.Matches(msg, keys.Next):
		m.panel = (m.panel + 1) % panelCount
	case key.Matches(msg, keys.Prev):
		m.panel = (m.panel + panelCount - 1) % panelCount
	case key.Matches(msg, keys.Filter):
		m.filter.typing = true
	case msg.String() == "esc":
		m.showHelp = false
		m.filter.text, m.scroll = nil, 0
	case key.Matches(msg, keys.Scroll):
		m.scrollGraph(msg.String())
	case key.Matches(msg, keys.Checkpoint):
		return m.request("checkpoint", m.client.Checkpoint)
	case key.Matches(msg, keys.Savepoint):
		return m.request("savepoint", func(ctx context.Context) (api.CheckpointResponse, error) {
			return m.client.Savepoint(ctx, "", false) // numbered, as cairn savepoint without --name
		})
	}
	return nil
}

// scrollGraph moves the operator list by the scroll key k: a row, a
// page, or to an end, within the rows the filter lets through.
func (m *Model) scrollGraph(k string) {
	if m.st == nil {
		return
	}
	rows, h := m.graphRows(), m.graphHeight()
	first, n := graphWindow(m.scroll, rows, h)
	switch k {
	case "up", "k":
		first--
	case "down", "j":
		first++
	case "pgup":
		first -= max(n, 1)
	case "pgdown":
		first += max(n, 1)
	case "home":
		first = 0
	case "end":
		first = rows
	}
	m.scroll, _ = graphWindow(first, rows, h)
}

// request asks the agent for a checkpoint or savepoint, one at a time.
func (m *Model) request(kind string, call func(context.Context) (api.CheckpointResponse, error)) tea.Cmd {
	if m.busy != "" {
		m.flash, m.alarm = "a "+m.busy+" is in progress", true
		return nil
	}
	if !m.connected {
		m.flash, m.alarm = "not connected to the agent", true
		return nil
	}
	m.busy, m.flash, m.alarm = kind, kind+" requested…", false
	ctx := m.ctx
	return func() tea.Msg {
		resp, err := call(ctx)
		var ae *api.AgentError
		if err != nil && !errors.As(err, &ae) && ctx.Err() != nil {
			return nil // quitting
		}
		return doneMsg{kind: kind, resp: resp, err: err}
	}
}
