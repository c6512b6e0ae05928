package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/agent/savepoint"
)

// controlAPI serves the control API (package agent/api) over the agent's
// state, across reloads, and hands the stops asked for to the running
// incarnation.
type controlAPI struct {
	state *state
	log   *slog.Logger
	// stops receives the stops asked for through the API (POST /stop).
	stops chan stopRequest
}

// handler is the control API.
func (c *controlAPI) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) { reply(w, http.StatusOK, c.state.status()) })
	mux.HandleFunc("POST /checkpoint", c.checkpoint)
	mux.HandleFunc("POST /savepoint", c.checkpoint)
	mux.HandleFunc("POST /stop", c.stop)
	mux.HandleFunc("GET /events", c.events)
	mux.HandleFunc("GET /checkpoints", c.checkpoints)
	mux.HandleFunc("GET /deadletters", c.deadLetters)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(&jsonAnswers{ResponseWriter: w, r: r}, r)
	})
}

// jsonAnswers turns the answers the mux writes itself (no such endpoint,
// method not allowed, redirect to a clean path) into JSON api.Errors like
// every other answer; the endpoints' own answers pass through.
type jsonAnswers struct {
	http.ResponseWriter
	r       *http.Request
	swallow bool // the mux's text body is replaced
}

func (w *jsonAnswers) WriteHeader(code int) {
	switch ct := w.Header().Get("Content-Type"); {
	case w.swallow:
	case ct == "application/json" || ct == "text/event-stream":
		w.ResponseWriter.WriteHeader(code)
	default:
		w.swallow = true
		msg := fmt.Sprintf("%s %s: %s", w.r.Method, w.r.URL.Path, strings.ToLower(http.StatusText(code)))
		if allow := w.Header().Get("Allow"); allow != "" {
			msg += " (allowed: " + allow + ")"
		}
		if loc := w.Header().Get("Location"); loc != "" {
			msg += " (see " + loc + ")"
		}
		w.Header().Del("X-Content-Type-Options")
		reply(w.ResponseWriter, code, apiError(msg))
	}
}

func (w *jsonAnswers) Write(b []byte) (int, error) {
	if w.swallow {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (the event
// stream flushes through it).
func (w *jsonAnswers) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func apiError(msg string) api.Error { return api.Error{Error: msg} }

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func (c *controlAPI) checkpoint(w http.ResponseWriter, r *http.Request) {
	inc := c.state.current.Load()
	if inc == nil {
		reply(w, http.StatusServiceUnavailable, api.Error{Error: "the pipeline is starting"})
		return
	}
	if r.URL.Path == "/savepoint" {
		to, ok := savepointTarget(w, r, inc, true)
		if !ok {
			return
		}
		resp, err := takeSavepoint(r.Context(), inc, to, c.log)
		if err != nil {
			reply(w, savepointStatus(err), api.Error{Error: err.Error()})
			return
		}
		reply(w, http.StatusOK, resp)
		return
	}
	id, err := inc.job.TriggerCheckpoint(r.Context())
	if err != nil {
		reply(w, http.StatusConflict, api.Error{Error: err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Minute)
	defer cancel()
	if _, err := inc.completions.wait(ctx, id); err != nil {
		reply(w, http.StatusGatewayTimeout, api.Error{Error: fmt.Sprintf("checkpoint %d did not complete: %v", id, err)})
		return
	}
	reply(w, http.StatusOK, api.CheckpointResponse{ID: id})
}

// savepointDest is where a savepoint asked for is written: the file name
// in the incarnation's savepoints directory ("": the agent's numbering,
// savepoint.FileName), replacing an earlier savepoint of that name if
// force.
type savepointDest struct {
	name  string
	force bool
}

// savepointTarget reads the destination r asks for (name=NAME, force=1)
// and answers 400 for a name that is not a savepoint name or is the name
// of an entry the agent keeps (entries), and for the path= of earlier
// versions; with inc (nil: not known yet) it answers 409 for a name taken
// already, before any checkpoint is taken for it. Unless withSavepoint (a
// stop without one), name and force are refused.
func savepointTarget(w http.ResponseWriter, r *http.Request, inc *incarnation, withSavepoint bool) (savepointDest, bool) {
	q := r.URL.Query()
	to := savepointDest{name: q.Get("name")}
	var err error
	if f := q.Get("force"); f != "" {
		to.force, err = strconv.ParseBool(f)
		if err != nil {
			err = fmt.Errorf("force=%.16q: want 1 or 0", f)
		}
	}
	switch {
	case err != nil:
	case q.Has("path"):
		err = errors.New("path= is not taken: a savepoint is written only in the data directory's savepoints/; pass name=NAME, a plain file name, and copy the file elsewhere afterwards")
	case !withSavepoint && (to.name != "" || to.force):
		err = errors.New("name= and force= are for a stop with a savepoint: add savepoint=1")
	case to.name != "":
		err = checkSavepointName(to.name)
	}
	if err != nil {
		reply(w, http.StatusBadRequest, api.Error{Error: err.Error()})
		return to, false
	}
	if inc != nil && to.name != "" {
		if _, err := savepoint.Target(inc.savepoints, to.name, to.force); err != nil {
			reply(w, savepointStatus(err), api.Error{Error: err.Error()})
			return to, false
		}
	}
	return to, true
}

// checkSavepointName refuses what savepoint.CheckName refuses, and the
// names of the entries the agent keeps in its data directory, so that no
// savepoint is ever taken for one of them.
func checkSavepointName(name string) error {
	if err := savepoint.CheckName(name); err != nil {
		return err
	}
	if _, kept := entries[name]; kept {
		return fmt.Errorf("%q is %w: it is the name of an entry the agent keeps in its data directory; choose another", name, savepoint.ErrBadName)
	}
	return nil
}

// savepointStatus is the HTTP status of a savepoint that failed with err:
// 400 for a name refused, 409 otherwise.
func savepointStatus(err error) int {
	if errors.Is(err, savepoint.ErrBadName) {
		return http.StatusBadRequest
	}
	return http.StatusConflict
}

// takeSavepoint takes a savepoint of inc's job (a checkpoint aligned in
// every mode) and writes it as to says in the data directory's
// savepoints; of those of the agent's numbering it keeps
// agent.retained_savepoints.
func takeSavepoint(ctx context.Context, inc *incarnation, to savepointDest, log *slog.Logger) (api.CheckpointResponse, error) {
	id, err := inc.job.TriggerSavepoint(ctx)
	if err != nil {
		return api.CheckpointResponse{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	// The savepoint is the checkpoint that completed, as the wait has it:
	// the job's Status, published after, did not show it yet now and then
	// ("the completed checkpoint is not known", under qemu).
	m, err := inc.completions.wait(ctx, id)
	if err != nil {
		return api.CheckpointResponse{}, fmt.Errorf("checkpoint %d did not complete: %w", id, err)
	}
	path, err := savepoint.WriteIn(inc.savepoints, to.name, to.force, m, inc.store)
	if err != nil {
		return api.CheckpointResponse{}, err
	}
	log.Info("savepoint written", "id", m.ID, "path", path)
	if to.name == "" {
		removed, err := savepoint.Prune(inc.savepoints, inc.retainedSavepoints)
		if len(removed) > 0 {
			log.Info("older savepoints deleted (agent.retained_savepoints)", "deleted", strings.Join(removed, " "), "kept", inc.retainedSavepoints)
		}
		if err != nil {
			log.Warn("older savepoints not deleted", "err", err)
		}
	}
	return api.CheckpointResponse{ID: m.ID, Path: path}, nil
}

// events streams the status as server-sent events, ten a second at most.
func (c *controlAPI) events(w http.ResponseWriter, r *http.Request) {
	flusher := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		data, _ := json.Marshal(c.state.status())
		if _, err := fmt.Fprintf(w, "data: %s\n\n", data); err != nil {
			return
		}
		if err := flusher.Flush(); err != nil {
			return
		}
		select {
		case <-tick.C:
		case <-r.Context().Done():
			return
		}
	}
}

// checkpoints lists the retained completed checkpoints.
func (c *controlAPI) checkpoints(w http.ResponseWriter, r *http.Request) {
	inc := c.state.current.Load()
	if inc == nil {
		reply(w, http.StatusServiceUnavailable, api.Error{Error: "the pipeline is starting"})
		return
	}
	ms, err := inc.store.Completed()
	if err != nil {
		reply(w, http.StatusInternalServerError, api.Error{Error: err.Error()})
		return
	}
	out := make([]api.CheckpointInfo, 0, len(ms))
	verify := r.URL.Query().Get("verify") != ""
	for _, m := range ms {
		info := CheckpointInfo(m)
		if verify {
			if info.Damage = damage(inc.store, m); info.Damage != "" && !retained(inc.store, m.ID) {
				continue // retention dropped it while it was read: no damage, and no longer listed
			}
		}
		c.state.remote.uploadState(&info)
		out = append(out, info)
	}
	reply(w, http.StatusOK, out)
}
