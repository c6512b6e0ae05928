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
	queues    [][]string // per channel: record names, "|N|" barriers, "eos"
	processed []string
	now       time.Duration
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
	if m.h.Blocked(c) {
		return name + ": blocked, " + m.queues[c][0] + " waits"
	}
	e := m.queues[c][0]
	m.queues[c] = m.queues[c][1:]
	m.h.Tick(m.now)
	switch {
	case e == "eos":
		m.h.Step(Event{Kind: InputEnded, Channel: c})
		return name + ": end of stream" + m.actions()
	case strings.HasPrefix(e, "|"):
		id, err := strconv.ParseUint(strings.Trim(e, "|"), 10, 64)
		if err != nil {
			t.Fatalf("bad barrier %q", e)
		}
		m.h.Step(Event{Kind: BarrierArrived, Channel: c, Barrier: graph.Barrier{ID: id}})
		return fmt.Sprintf("%s: barrier %d", name, id) + m.actions()
	default:
		m.processed = append(m.processed, e)
		return name + ": process " + e
	}
}

// actions formats the handler's pending actions, carrying out snapshots.
func (m *subtaskModel) actions() string {
	var out []string
	for _, a := range m.h.Ready() {
		switch a.Kind {
		case Block, Unblock:
			out = append(out, fmt.Sprintf("%s %s", a.Kind, m.names[a.Channel]))
		case Snapshot:
			s := fmt.Sprintf("snapshot %d {%s}", a.ID, strings.Join(m.processed, " "))
			if a.Alignment > 0 {
				s += fmt.Sprintf(" aligned in %v", a.Alignment)
			}
			out = append(out, s)
		case Forward:
			out = append(out, fmt.Sprintf("forward barrier %d", a.ID))
		case Decline:
			out = append(out, fmt.Sprintf("decline %d: %s", a.ID, a.Reason))
		}
	}
	if len(out) == 0 {
		return " → no action"
	}
	return " → " + strings.Join(out, ", ")
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
				m = &subtaskModel{}
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
				return fmt.Sprintf("%s subtask with %d inputs\n%s\n", md, len(m.names), strings.Join(out, "\n"))
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
			case "drain":
				// Deliver round-robin until nothing can move.
				var out []string
				for moved := true; moved; {
					moved = false
					for c := range m.names {
						if len(m.queues[c]) > 0 && !m.h.Blocked(c) {
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
				return ""
			case "abort":
				var id uint64
				d.ScanArgs(t, "id", &id)
				m.h.Step(Event{Kind: CheckpointAborted, ID: id})
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
				return fmt.Sprintf("aligning %d since %v\n%s\n", a.ID, a.Started, strings.Join(out, "\n"))
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
	})
}
