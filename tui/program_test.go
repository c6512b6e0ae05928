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
	"github.com/cairn-edge/cairn/internal/testwait"
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

// watched is the UI under test, publishing every frame it renders.
type watched struct {
	*Model
	frame atomic.Pointer[string]
}

func watch(m *Model) *watched { return &watched{Model: m} }

func (w *watched) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	_, cmd := w.Model.Update(msg)
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
