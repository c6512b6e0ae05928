package tui

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// fakeAgent is a stand-in for the agent (the real one is driven by the
// end-to-end test in cmd/cairn): it serves the control API's wire protocol
// on a real unix socket, streaming the statuses the test pushes.
type fakeAgent struct {
	srv         *http.Server
	statuses    chan api.Status
	checkpoints atomic.Int64
}

func startFakeAgent(t *testing.T, sock string) *fakeAgent {
	t.Helper()
	os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	a := &fakeAgent{statuses: make(chan api.Status, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for {
			select {
			case st := <-a.statuses:
				data, _ := json.Marshal(st)
				fmt.Fprintf(w, "data: %s\n\n", data)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	})
	mux.HandleFunc("POST /checkpoint", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(api.CheckpointResponse{ID: uint64(42 + a.checkpoints.Add(1))})
	})
	mux.HandleFunc("POST /savepoint", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusConflict)
		json.NewEncoder(w).Encode(api.Error{Error: "the pipeline is restarting"})
	})
	a.srv = &http.Server{Handler: mux}
	go a.srv.Serve(l)
	t.Cleanup(func() { a.srv.Close() })
	return a
}

// watched is a UI under test, publishing every frame it renders.
type watched struct {
	tea.Model
	frame atomic.Pointer[string]
}

func watch(m tea.Model) *watched { return &watched{Model: m} }

func (w *watched) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	_, cmd := w.Model.Update(msg) // the UIs update themselves in place
	return w, cmd
}

func (w *watched) View() tea.View {
	v := w.Model.View()
	s := ansi.Strip(v.Content)
	w.frame.Store(&s)
	return v
}

// await waits until the rendered screen contains every one of texts.
func (w *watched) await(t *testing.T, texts ...string) string {
	t.Helper()
	var screen, missing string
	if !testwait.Poll(10*time.Second, func() bool {
		screen, missing = "", ""
		if p := w.frame.Load(); p != nil {
			screen = *p
		}
		for _, s := range texts {
			if !strings.Contains(screen, s) {
				missing = s
				break
			}
		}
		return missing == ""
	}) {
		t.Fatalf("the screen never showed %q; last frame:\n%s", missing, screen)
	}
	return screen
}

// TestProgramFollowsTheAgent runs the program as `cairn top` does, with its
// input, output and renderer, against an agent on a unix socket: statuses
// show up, c takes a checkpoint, a refused savepoint is reported, the agent
// going away is shown, and a restarted agent is picked up with what it
// restored.
func TestProgramFollowsTheAgent(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "cairn.sock")
	agent := startFakeAgent(t, sock)
	agent.statuses <- skewedBefore
	agent.statuses <- skewedNow

	ui := watch(New(api.NewClient(sock), Options{Stall: time.Second, Location: time.UTC}))
	tm := teatest.NewTestModel(t, ui, teatest.WithInitialTermSize(80, 24))
	ui.await(t, "gw-07", "up 1m31s", "▲ STALL drift/0 waits 1.6s for score/0")

	tm.Type("c")
	ui.await(t, "» checkpoint 43 completed")
	if n := agent.checkpoints.Load(); n != 1 {
		t.Fatalf("the agent got %d checkpoint requests, want 1", n)
	}
	tm.Type("s")
	ui.await(t, "! savepoint failed: the pipeline is restarting")

	agent.srv.Close()
	screen := ui.await(t, "unreachable since ", "· last seen running", "⟳ reconnecting, attempt")
	if strings.Contains(screen, "up 1m31s") {
		t.Fatalf("the header still says how long the agent is up after it went away:\n%s", screen)
	}

	restarted := skewedStatus(2, 1)
	restarted.RestoredFrom = &api.Restored{ID: 43, Source: "local"}
	agent = startFakeAgent(t, sock)
	agent.statuses <- restarted
	screen = ui.await(t, "» reconnected: the agent restarted and restored local checkpoint 43", "restored local #43", "up 2s")
	if strings.Contains(screen, "unreachable") {
		t.Fatalf("still shown as unreachable after reconnecting:\n%s", screen)
	}

	tm.Type("q")
	tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
}

// sgrColor matches a select-graphic-rendition sequence that sets a colour.
var sgrColor = regexp.MustCompile(`\x1b\[[0-9;]*(3[0-9]|4[0-9]|9[0-7]|10[0-7])(;[0-9;]*)?m`)

// TestColoursDegradeWithTheTerminal renders to a terminal with colours and
// to one without: the first gets colour sequences for the stall, the
// second none, and both carry the stall's text marker.
func TestColoursDegradeWithTheTerminal(t *testing.T) {
	for _, tc := range []struct {
		profile colorprofile.Profile
		colours bool
	}{{colorprofile.ANSI, true}, {colorprofile.Ascii, false}} {
		t.Run(tc.profile.String(), func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "cairn.sock")
			agent := startFakeAgent(t, sock)
			agent.statuses <- skewedNow
			ui := watch(New(api.NewClient(sock), Options{Stall: time.Second, Location: time.UTC}))
			tm := teatest.NewTestModel(t, ui, teatest.WithInitialTermSize(80, 24),
				teatest.WithProgramOptions(tea.WithColorProfile(tc.profile)))
			ui.await(t, "▲ STALL")
			tm.Type("q")
			raw, err := io.ReadAll(tm.FinalOutput(t, teatest.WithFinalTimeout(5*time.Second)))
			if err != nil {
				t.Fatal(err)
			}
			out := string(raw)
			if got := sgrColor.MatchString(out); got != tc.colours {
				t.Fatalf("profile %s: colour sequences present = %v, want %v", tc.profile, got, tc.colours)
			}
			if !strings.Contains(out, "STALL") {
				t.Fatalf("profile %s: the stall marker is missing from the output", tc.profile)
			}
		})
	}
}

// TestFleetProgram runs the fleet view as `cairn top --fleet` does, with
// its input, output and renderer, fed as the broker would feed it, on a
// terminal with colours and on one without: the gateways show, a will
// puts one first, the broker going away and coming back is said, and
// colour sequences are written only where the terminal has colours,
// every highlight with its text marker either way.
func TestFleetProgram(t *testing.T) {
	for _, tc := range []struct {
		profile colorprofile.Profile
		colours bool
	}{{colorprofile.ANSI, true}, {colorprofile.Ascii, false}} {
		t.Run(tc.profile.String(), func(t *testing.T) {
			fleet := NewFleet(FleetOptions{Source: "tcp://broker:1883 gateways/+/status", Location: time.UTC})
			ui := watch(fleet)
			tm := teatest.NewTestModel(t, ui, teatest.WithInitialTermSize(80, 24),
				teatest.WithProgramOptions(tea.WithColorProfile(tc.profile)))
			ui.await(t, "⟳ connecting to the broker…")
			go func() {
				fleet.Link(api.FleetLink{Up: true, At: time.Now()})
				for i := 1; i <= 5; i++ {
					gw := fmt.Sprintf("gw-%03d", i)
					fleet.Message(presence(gw, "online", time.Now(), true))
					fleet.Message(status(gw, healthy(i, 0), time.Now(), false))
				}
			}()
			ui.await(t, "5 gateways · 5 up · 0 down", "gw-005  running")
			fleet.Message(presence("gw-004", "offline", time.Now(), false))
			screen := ui.await(t, "5 gateways · 4 up · 1 down")
			if !strings.Contains(firstFleetRow(screen), "gw-004  OFFLINE") {
				t.Fatalf("gw-004 is not first after its will:\n%s", screen)
			}
			fleet.Link(api.FleetLink{Err: "EOF", At: time.Now()})
			ui.await(t, "⟳ broker unreachable since", "showing the last statuses received")
			fleet.Link(api.FleetLink{Up: true, At: time.Now()})
			if !testwait.Poll(10*time.Second, func() bool { p := ui.frame.Load(); return p != nil && !strings.Contains(*p, "unreachable") }) {
				t.Fatalf("still unreachable after the link came back:\n%s", *ui.frame.Load())
			}
			tm.Type("q")
			raw, err := io.ReadAll(tm.FinalOutput(t, teatest.WithFinalTimeout(5*time.Second)))
			if err != nil {
				t.Fatal(err)
			}
			if got := sgrColor.MatchString(string(raw)); got != tc.colours {
				t.Fatalf("profile %s: colour sequences present = %v, want %v", tc.profile, got, tc.colours)
			}
			if !strings.Contains(string(raw), "OFFLINE") {
				t.Fatalf("profile %s: the offline marker is missing from the output", tc.profile)
			}
		})
	}
}

// firstFleetRow is the fleet table's first gateway row.
func firstFleetRow(screen string) string {
	lines := strings.Split(screen, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "  GATEWAY ") && i+1 < len(lines) {
			return lines[i+1]
		}
	}
	return ""
}
