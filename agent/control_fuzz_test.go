package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/agent/config"
	"github.com/cairn-edge/cairn/broker"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
	"github.com/cairn-edge/cairn/localrecovery"
)

// fuzzPipeline is the smallest real pipeline: a simulated fleet, keyed
// windows and counts, checkpoints in a real store, taken on request only.
const fuzzPipeline = `
checkpoints:
  interval: 1h
sources:
  - id: fleet
    simulator: {devices: 20, rate: 2000}
operators:
  - id: per-device
    type: window
    inputs: [fleet]
    key_by: key
    parallelism: 2
    window: {kind: tumbling, size: 100ms}
    aggregate: avg
  - id: total
    type: count
    inputs: [per-device]
    key_by: key
`

// startControl runs fuzzPipeline through the agent's own incarnation loop
// and returns its state and its control API handler.
func startControl(tb testing.TB) (*state, http.Handler) {
	dir := tb.TempDir()
	cfg, errs := config.Parse("fuzz.yaml", []byte(fuzzPipeline), func(string) (string, bool) { return "", false })
	if len(errs) > 0 {
		tb.Fatal(errs)
	}
	log := slog.New(slog.DiscardHandler)
	store, err := localrecovery.Open(StorePath(dir), localrecovery.Options{Retain: 3, Logger: log})
	if err != nil {
		tb.Fatal(err)
	}
	ctl := &state{pipeline: "fuzz.yaml", host: "fuzz"}
	a := &Agent{path: "fuzz.yaml", cfg: cfg, log: log, dataDir: dir, clientID: "cairn-fuzz", brokers: map[string]*broker.Server{}, store: store,
		state: ctl, metrics: &exporter{state: ctl, checkpoints: newCheckpointMetrics()}, api: &controlAPI{state: ctl, log: log}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := a.runIncarnation(ctx, cfg, nil)
		done <- err
	}()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("the pipeline failed: %v", err)
		}
		store.Close()
	})
	testwait.For(tb, 10*time.Second, "the pipeline to start", func() bool { return ctl.current.Load() != nil })
	// The pipeline serves every request but a stop, which would end it
	// for the inputs after: a stop that passes the handler's checks is
	// answered as one whose final checkpoint failed.
	stops := make(chan stopRequest)
	go func() {
		for {
			select {
			case req := <-stops:
				req.reply <- stopReply{err: errors.New("the fuzzed pipeline does not stop")}
			case <-ctx.Done():
				return
			}
		}
	}()
	return ctl, (&controlAPI{state: ctl, log: log, stops: stops}).handler()
}

// flushRecorder records a response; a flush ends the request, so that the
// event stream answers with one event.
type flushRecorder struct {
	*httptest.ResponseRecorder
	cancel context.CancelFunc
}

func (f flushRecorder) Flush() {
	f.ResponseRecorder.Flush()
	f.cancel()
}

// FuzzControlAPI sends arbitrary requests (method, target, body) to the
// control API of a running pipeline, as the HTTP server would hand them
// over. The agent must never panic, and must always answer with a valid
// status code and a JSON body: an api.Error with a message for a failure,
// the endpoint's own type for a success (an event of the status stream,
// the status, the checkpoint list, a completed checkpoint or a written
// savepoint). Seeds: testdata/fuzz/FuzzControlAPI.
func FuzzControlAPI(f *testing.F) {
	for _, seed := range []struct{ method, target, body string }{
		{"GET", "/status", ""},
		{"GET", "/status?x=1", ""},
		{"GET", "/events", ""},
		{"GET", "/checkpoints", ""},
		{"POST", "/checkpoint", "{}"},
		{"POST", "/savepoint", ""},
		{"POST", "/savepoint?name=before-upgrade&force=1", ""},
		{"POST", "/savepoint?name=..%2Fcheckpoints.db", ""},
		{"POST", "/savepoint?name=checkpoints.db&force=1", ""},
		{"POST", "/stop?savepoint=1&path=/tmp/checkpoints.db", ""},
		{"DELETE", "/status", ""},
		{"GET", "/nope", ""},
		{"GET", "//status/../status", ""},
		{"HEAD", "/checkpoints/", "x"},
	} {
		f.Add(seed.method, seed.target, []byte(seed.body))
	}
	ctl, h := startControl(f)
	var served atomic.Int64
	f.Cleanup(func() { f.Logf("%d requests reached the handler", served.Load()) })
	f.Fuzz(func(t *testing.T, method, target string, body []byte) {
		raw := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: cairn\r\nContent-Length: %d\r\n\r\n", method, target, len(body))
		req, err := http.ReadRequest(bufio.NewReader(io.MultiReader(strings.NewReader(raw), bytes.NewReader(body))))
		if err != nil {
			return // the server answers 400 itself; the handler never sees it
		}
		served.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req = req.WithContext(ctx)
		rec := flushRecorder{httptest.NewRecorder(), cancel}
		h.ServeHTTP(rec, req)

		res := rec.Result()
		got, _ := io.ReadAll(res.Body)
		if res.StatusCode < 100 || res.StatusCode > 599 {
			t.Fatalf("%s %s: status %d", method, target, res.StatusCode)
		}
		ct := res.Header.Get("Content-Type")
		if res.StatusCode != http.StatusOK {
			var e api.Error
			if ct != "application/json" || strictDecode(got, &e) != nil || e.Error == "" {
				t.Fatalf("%s %q: %d %s with %q, want an api.Error in JSON", method, target, res.StatusCode, ct, got)
			}
			return
		}
		var ok bool
		switch path := req.URL.Path; {
		case ct == "text/event-stream":
			var st api.Status
			event, found := strings.CutPrefix(string(got), "data: ")
			ok = found && strings.HasSuffix(event, "\n\n") && strictDecode([]byte(event), &st) == nil && st.State != ""
		case ct != "application/json":
		case path == "/status":
			var st api.Status
			ok = strictDecode(got, &st) == nil && st.Agent == "fuzz" && st.State == "running"
		case path == "/checkpoints":
			var list []api.CheckpointInfo
			ok = strictDecode(got, &list) == nil && list != nil
		case path == "/checkpoint" || path == "/savepoint":
			var cr api.CheckpointResponse
			ok = strictDecode(got, &cr) == nil && cr.ID > 0
			if ok && path == "/savepoint" {
				_, err := os.Stat(cr.Path)
				ok = err == nil && filepath.Dir(cr.Path) == ctl.current.Load().savepoints
				os.Remove(cr.Path)
			}
		}
		if !ok {
			t.Fatalf("%s %q (path %q): 200 %s with %q, not the endpoint's type", method, target, req.URL.Path, ct, got)
		}
	})
}

// strictDecode decodes one JSON value, refusing unknown fields and
// trailing data.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data")
	}
	return nil
}
