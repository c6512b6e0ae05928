package checkpoint

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/cairn-edge/cairn/graph"
)

// subtaskModel is one subtask under test: named input channels with queued
// elements, a Handler, and what the subtask processed and snapshotted. It
// plays the runtime's part: a blocked channel is not read.
type subtaskModel struct {
	h         *Handler
	names     []string
	queues    [][]string // per channel: record names, "|N|" barriers ("|Nu|" unaligned), "eos"
	processed []string
	now       time.Duration
	// blocked is what the handler's Block and Unblock actions said, as an
	// executor applies them.
	blocked []bool

	// The records in front of the barrier that last arrived on each
	// channel: those it overtook, still queued.
	arrived   map[uint64][]bool // per checkpoint, per channel
	overtaken [][]string
	capture   *captureModel
}

// captureModel is the channel state of an unaligned snapshot: per channel,
// the records after the snapshot and before the channel's barrier.
type captureModel struct {
	id    uint64
	open  []bool
	state [][]string
}

// parseBarrier reads "|N|", "|Nu|" (a barrier forwarded unaligned) or
// "|Ns|" (a savepoint's).
func parseBarrier(t *testing.T, e string) graph.Barrier {
	body := strings.Trim(e, "|")
	b := graph.Barrier{Unaligned: strings.HasSuffix(body, "u"), Aligned: strings.HasSuffix(body, "s")}
	id, err := strconv.ParseUint(strings.TrimRight(body, "us"), 10, 64)
	if err != nil {
		t.Fatalf("bad barrier %q", e)
	}
	b.ID = id
	return b
}

// barrier hands barrier b to the subtask on channel c, with the records it
// overtook (none when it came in order).
func (m *subtaskModel) barrier(c int, b graph.Barrier, overtook []string) string {
	m.h.Tick(m.now)
	if m.arrived[b.ID] == nil {
		m.arrived[b.ID] = make([]bool, len(m.names))
	}
	m.arrived[b.ID][c] = true
	m.overtaken[c] = overtook
	if cm := m.capture; cm != nil && cm.id == b.ID && cm.open[c] {
		cm.open[c] = false
		cm.state[c] = append(cm.state[c], overtook...)
	}
	m.h.Step(Event{Kind: BarrierArrived, Channel: c, Barrier: b})
	desc := fmt.Sprintf("%s: barrier %d", m.names[c], b.ID)
	if len(overtook) > 0 {
		desc += " overtakes " + strings.Join(overtook, " ")
	}
	return desc + m.actions()
}

// overtake delivers the first barrier queued on channel c ahead of the
// records in front of it, as an unaligned barrier travels.
func (m *subtaskModel) overtake(t *testing.T, c int) string {
	for i, e := range m.queues[c] {
		if strings.HasPrefix(e, "|") {
			overtook := slices.Clone(m.queues[c][:i])
			m.queues[c] = slices.Delete(m.queues[c], i, i+1)
			return m.barrier(c, parseBarrier(t, e), overtook)
		}
	}
	return m.names[c] + ": no barrier queued"
}

func (m *subtaskModel) channel(t *testing.T, name string) int {
	i := slices.Index(m.names, name)
	if i < 0 {
		t.Fatalf("no channel %q", name)
	}
	return i
}

// deliver hands the head of channel c to the subtask and describes what
// happened.
func (m *subtaskModel) deliver(t *testing.T, c int) string {
	name := m.names[c]
	if len(m.queues[c]) == 0 {
		return name + ": empty"
	}
	if m.blocked[c] {
		return name + ": blocked, " + m.queues[c][0] + " waits"
	}
	e := m.queues[c][0]
	m.queues[c] = m.queues[c][1:]
	switch {
	case e == "eos":
		m.h.Tick(m.now)
		if cm := m.capture; cm != nil {
			cm.open[c] = false
		}
		m.h.Step(Event{Kind: InputEnded, Channel: c})
		return name + ": end of stream" + m.actions()
	case strings.HasPrefix(e, "|"):
		return m.barrier(c, parseBarrier(t, e), nil)
	default:
		m.processed = append(m.processed, e)
		if cm := m.capture; cm != nil && cm.open[c] {
			cm.state[c] = append(cm.state[c], e)
			return name + ": process " + e + " (channel state)"
		}
		return name + ": process " + e
	}
}

// actions formats the handler's pending actions, carrying out snapshots.
func (m *subtaskModel) actions() string {
	var out []string
	for _, a := range m.h.Ready() {
		switch a.Kind {
		case Block, Unblock:
			m.blocked[a.Channel] = a.Kind == Block
			out = append(out, fmt.Sprintf("%s %s", a.Kind, m.names[a.Channel]))
		case Snapshot:
			s := fmt.Sprintf("snapshot %d {%s}", a.ID, strings.Join(m.processed, " "))
			switch {
			case a.TimedOut:
				s += fmt.Sprintf(" unaligned after %v", a.Alignment)
			case a.Unaligned:
				s += " unaligned"
			case a.Alignment > 0:
				s += fmt.Sprintf(" aligned in %v", a.Alignment)
			}
			if a.Unaligned {
				m.startCapture(a.ID)
			}
			out = append(out, s)
		case Forward:
			if a.Barrier.Unaligned {
				out = append(out, fmt.Sprintf("forward barrier %d ahead of queued records", a.ID))
			} else {
				out = append(out, fmt.Sprintf("forward barrier %d", a.ID))
			}
		case Captured:
			out = append(out, m.endCapture(a.ID))
		case Decline:
			if a.Overtaken {
				if m.capture != nil && m.capture.id == a.ID {
					m.capture = nil
				}
				out = append(out, fmt.Sprintf("give up %d, overtaken by %d", a.ID, a.Barrier.ID))
			} else {
				out = append(out, fmt.Sprintf("decline %d: %s", a.ID, a.Reason))
			}
		}
	}
	if len(out) == 0 {
		return " → no action"
	}
	return " → " + strings.Join(out, ", ")
}

// startCapture begins the channel state of unaligned snapshot id: channels
// whose barrier arrived hold what it overtook; the others collect until
// their barrier comes.
func (m *subtaskModel) startCapture(id uint64) {
	cm := &captureModel{id: id, open: make([]bool, len(m.names)), state: make([][]string, len(m.names))}
	ended := m.h.Alignment().Ended
	for c := range m.names {
		switch {
		case m.arrived[id] != nil && m.arrived[id][c]:
			cm.state[c] = slices.Clone(m.overtaken[c])
		case !ended[c]:
			cm.open[c] = true
		}
	}
	m.capture = cm
}

func (m *subtaskModel) endCapture(id uint64) string {
	cm := m.capture
	m.capture = nil
	if cm == nil || cm.id != id {
		return fmt.Sprintf("captured %d without a capture", id)
	}
	var parts []string
	for c, recs := range cm.state {
		parts = append(parts, fmt.Sprintf("%s{%s}", m.names[c], strings.Join(recs, " ")))
	}
	return fmt.Sprintf("channel state %d: %s", id, strings.Join(parts, " "))
}

func TestHandlerScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/handler", func(t *testing.T, path string) {
		var m *subtaskModel
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "subtask":
				var mode string
				d.ScanArgs(t, "mode", &mode)
				md, err := ParseMode(mode)
				if err != nil {
					t.Fatal(err)
				}
				var timeout time.Duration
				if d.HasArg("timeout") {
					var v string
					d.ScanArgs(t, "timeout", &v)
					if timeout, err = time.ParseDuration(v); err != nil {
						t.Fatal(err)
					}
				}
				m = &subtaskModel{arrived: make(map[uint64][]bool)}
				var out []string
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					name, elems, ok := strings.Cut(line, ":")
					if !ok {
						t.Fatalf("want 'channel: elements', got %q", line)
					}
					m.names = append(m.names, strings.TrimSpace(name))
					m.queues = append(m.queues, strings.Fields(elems))
					out = append(out, fmt.Sprintf("input %s: %s", strings.TrimSpace(name), strings.Join(strings.Fields(elems), " ")))
				}
				m.h = NewHandler(md, len(m.names))
				m.h.SetAlignmentTimeout(timeout)
				m.overtaken = make([][]string, len(m.names))
				m.blocked = make([]bool, len(m.names))
				header := fmt.Sprintf("%s subtask with %d inputs", md, len(m.names))
				if timeout > 0 {
					header += fmt.Sprintf(", alignment timeout %v", timeout)
				}
				return fmt.Sprintf("%s\n%s\n", header, strings.Join(out, "\n"))
			case "deliver":
				var out []string
				for _, arg := range d.CmdArgs {
					c := m.channel(t, arg.Key)
					n := 1
					if len(arg.Vals) > 0 {
						var err error
						if n, err = strconv.Atoi(arg.Vals[0]); err != nil {
							t.Fatal(err)
						}
					}
					for range n {
						out = append(out, m.deliver(t, c))
					}
				}
				return strings.Join(out, "\n") + "\n"
			case "overtake":
				var out []string
				for _, arg := range d.CmdArgs {
					out = append(out, m.overtake(t, m.channel(t, arg.Key)))
				}
				return strings.Join(out, "\n") + "\n"
			case "drain":
				// Deliver round-robin until nothing can move.
				var out []string
				for moved := true; moved; {
					moved = false
					for c := range m.names {
						if len(m.queues[c]) > 0 && !m.blocked[c] {
							out = append(out, m.deliver(t, c))
							moved = true
						}
					}
				}
				return strings.Join(out, "\n") + "\n"
			case "tick":
				var dur string
				d.ScanArgs(t, "at", &dur)
				at, err := time.ParseDuration(dur)
				if err != nil {
					t.Fatal(err)
				}
				m.now = at
				m.h.Tick(at)
				if acts := m.actions(); acts != " → no action" {
					return fmt.Sprintf("tick %v%s\n", at, acts)
				}
				return ""
			case "abort":
				var id uint64
				d.ScanArgs(t, "id", &id)
				m.h.Step(Event{Kind: CheckpointAborted, ID: id})
				if m.capture != nil && m.capture.id == id {
					m.capture = nil
				}
				return fmt.Sprintf("abort %d", id) + m.actions() + "\n"
			case "processed":
				return strings.Join(m.processed, " ") + "\n"
			case "alignment":
				a := m.h.Alignment()
				if a.ID == 0 {
					return "not aligning\n"
				}
				var out []string
				for c, at := range a.Arrived {
					switch {
					case a.Ended[c]:
						out = append(out, m.names[c]+": ended")
					case at < 0:
						out = append(out, m.names[c]+": pending")
					default:
						out = append(out, fmt.Sprintf("%s: arrived at %v", m.names[c], at))
					}
				}
				what := "aligning"
				if a.Unaligned {
					what = "capturing channel state of"
				}
				return fmt.Sprintf("%s %d since %v\n%s\n", what, a.ID, a.Started, strings.Join(out, "\n"))
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
	})
}
