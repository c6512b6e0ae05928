package agent

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/agent/config"
	"github.com/cairn-edge/cairn/agent/savepoint"
	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/ingest"
	"github.com/cairn-edge/cairn/mqttio"
	"github.com/cairn-edge/cairn/runtime"
	"golang.org/x/net/netutil"
)

// SocketPath is the control socket under a data directory.
func SocketPath(dataDir string) string { return filepath.Join(dataDir, "cairn.sock") }

// completions lets callers wait for a checkpoint to complete.
type completions struct {
	mu      sync.Mutex
	last    uint64
	aborted map[uint64]string // newer than last: why they were aborted
	stop    error             // set when the job stopped
	waiters []chan struct{}
}

func (c *completions) completed(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = max(c.last, id)
	for a := range c.aborted {
		if a <= c.last {
			delete(c.aborted, a)
		}
	}
	c.wakeLocked()
}

// abort records that checkpoint id will not complete, and why.
func (c *completions) abort(id uint64, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id <= c.last {
		return
	}
	if c.aborted == nil {
		c.aborted = make(map[uint64]string)
	}
	c.aborted[id] = why
	c.wakeLocked()
}

// stopped records that the job stopped (err nil: it was asked to).
func (c *completions) stopped(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		err = errors.New("the pipeline stopped")
	}
	c.stop = err
	c.wakeLocked()
}

func (c *completions) wakeLocked() {
	for _, w := range c.waiters {
		close(w)
	}
	c.waiters = nil
}

// completedAny reports whether a checkpoint completed.
func (c *completions) completedAny() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last > 0
}

// wait returns when checkpoint id (or a later one) completed, or with an
// error when it was aborted or the job stopped first.
func (c *completions) wait(ctx context.Context, id uint64) error {
	for {
		c.mu.Lock()
		if c.last >= id {
			c.mu.Unlock()
			return nil
		}
		if why, ok := c.aborted[id]; ok {
			c.mu.Unlock()
			return fmt.Errorf("checkpoint %d was aborted: %s", id, why)
		}
		if err := c.stop; err != nil {
			c.mu.Unlock()
			return err
		}
		w := make(chan struct{})
		c.waiters = append(c.waiters, w)
		c.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// incarnation is one run of a graph: the agent starts a new one on reload.
type incarnation struct {
	job            *runtime.Job
	mode           string
	restoring      bool // Options.Restore had candidates
	sources        []*mqttio.SourceMetrics
	brokers        map[string]*mqttio.BrokerState // by name in the config
	sinks          map[string]*mqttio.SinkMetrics // by sink id
	late           map[string]*atomic.Int64
	backlog        *mqttio.Backlog
	completions    *completions
	restoredSource string // recovery.Choice.Source
	store          checkpoint.Store
	savepoints     string // directory for savepoint files
	// retainedSavepoints is how many of them are kept (the newest).
	retainedSavepoints int
	// carried are the final counts of the incarnations before this one,
	// which the metrics add this one's to.
	carried counts
	// interval is checkpoints.interval; lateCheckpoints counts the
	// completed checkpoints that took more than half of it (isLate).
	interval        time.Duration
	lateCheckpoints *atomic.Int64
}

// control serves the control API of the agent, across reloads.
type control struct {
	pipeline string
	host     string
	log      *slog.Logger
	stopping atomic.Bool
	// restoring is set from when recovery reads the state of the next
	// incarnation until it is set: the status says "restoring" meanwhile,
	// as it does until that incarnation's job has restored.
	restoring atomic.Bool
	current   atomic.Pointer[incarnation]
	// remote is set when remote upload is on.
	remote *remoteSide
	// wear counts what the agent writes to its data directory.
	wear *wear
	// stops receives the stops asked for through the API (POST /stop).
	stops chan stopRequest
	// logs holds the ingest logs and the dead letters, in dataDir.
	logs    *ingest.Logs
	dataDir string
	// build says which cairn this is, and checkpointMetrics (required:
	// every incarnation reports to it) what their checkpoints did, for the
	// metrics.
	build             BuildInfo
	checkpointMetrics *checkpointMetrics
	// stalls are the alignments that ended, of every incarnation.
	stalls *stalls

	mu          sync.Mutex
	configError string // why the last change of the file was not applied
}

func (c *control) set(inc incarnation) {
	c.current.Store(&inc)
	c.restoring.Store(false)
}

func (c *control) setConfigError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.configError = ""
	if err != nil {
		c.configError = err.Error()
	}
}

// handler is the control API.
func (c *control) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) { reply(w, http.StatusOK, c.status()) })
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

// listener is an open listener of the agent's and what it serves.
type listener struct {
	l       net.Listener
	handler http.Handler
	socket  string // a unix socket's file, removed when serving ends
}

// serve serves l until ctx is done.
func (s listener) serve(ctx context.Context) error {
	if s.socket != "" {
		defer os.Remove(s.socket)
	}
	return serveHTTP(ctx, s.l, s.handler)
}

// listen opens every listener of the agent: the control socket at path
// (mode 0600, or 0660 and group gid when gid is not negative), and the
// metrics and TCP control API listeners when cfg asks for them. They are
// open when it returns, before the pipeline starts, so that a client that
// has seen the agent start finds them, and an address in use fails the
// start; on failure none is left open.
func (c *control) listen(path string, gid int, cfg config.Agent) (ls []listener, err error) {
	defer func() {
		if err != nil {
			for _, s := range ls {
				s.l.Close()
			}
			ls = nil
		}
	}()
	s, err := c.listenSocket(path, gid)
	if err != nil {
		return nil, err
	}
	ls = append(ls, s)
	if cfg.Metrics != "" {
		s, err := c.listenMetrics(cfg.Metrics)
		if err != nil {
			return ls, err
		}
		ls = append(ls, s)
	}
	if cfg.API != "" {
		token, err := readToken(cfg.APITokenFile)
		if err != nil {
			return ls, fmt.Errorf("agent.api_token_file: %w", err)
		}
		s, err := c.listenTCP(cfg.API, token)
		if err != nil {
			return ls, err
		}
		ls = append(ls, s)
	}
	return ls, nil
}

// listenSocket opens the control socket at path.
func (c *control) listenSocket(path string, gid int) (listener, error) {
	os.Remove(path) // a stale socket of a killed agent
	l, err := net.Listen("unix", path)
	if err != nil {
		return listener{}, fmt.Errorf("control socket: %w", err)
	}
	mode := os.FileMode(0o600)
	if gid >= 0 {
		// The group first, then its access: never the other way round.
		if err := os.Chown(path, -1, gid); err != nil {
			l.Close()
			return listener{}, fmt.Errorf("control socket: %w (the agent's user must be root or a member of the control group)", err)
		}
		mode = 0o660
	}
	if err := os.Chmod(path, mode); err != nil {
		l.Close()
		return listener{}, err
	}
	return listener{l: l, handler: c.handler(), socket: path}, nil
}

// lookupGroup returns the id of group, a name or a number.
func lookupGroup(group string) (int, error) {
	if gid, err := strconv.Atoi(group); err == nil && gid >= 0 {
		return gid, nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return 0, fmt.Errorf("control group: %w", err)
	}
	return strconv.Atoi(g.Gid)
}

// warnIfUnreachable warns when members of the control group (gid) cannot
// reach the socket: when the data directory, or a directory above it,
// lets neither the group nor others search it.
func warnIfUnreachable(dataDir, group string, gid int, log *slog.Logger) {
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return
	}
	for {
		st, err := os.Stat(dir)
		if err != nil {
			return
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		perm := st.Mode().Perm()
		if ok && perm&0o001 == 0 && (int(sys.Gid) != gid || perm&0o010 == 0) {
			log.Warn("members of the control group cannot reach the control socket: chgrp the directory to the group and chmod g+x it",
				"group", group, "dir", dir, "mode", perm.String(), "dir_gid", sys.Gid)
			return
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return
		}
		dir = parent
	}
}

// minTokenBytes is the shortest token the TCP control API takes: 16
// random bytes' worth of guessing, written as hex or base64.
const minTokenBytes = 16

// readToken reads the control API's token from path, which only its owner
// (and group) may read: a token others can read, or one short enough to
// guess, lets anyone on the network control the agent.
func readToken(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.Mode().Perm()&0o004 != 0 {
		return "", fmt.Errorf("%s may be read by every user (mode %v): chmod o-r it", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(b))
	if len(token) < minTokenBytes {
		return "", fmt.Errorf("the token in %s has %d characters, fewer than %d: make one with `openssl rand -hex 16`", path, len(token), minTokenBytes)
	}
	return token, nil
}

// listenTCP opens the control API on a TCP address, for callers that send
// the bearer token.
func (c *control) listenTCP(addr, token string) (listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return listener{}, fmt.Errorf("control listener: %w", err)
	}
	c.log.Info("control API listening", "addr", l.Addr().String())
	api := c.handler()
	want := []byte("Bearer " + token)
	return listener{l: l, handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("Connection", "close") // nothing more is served on it
			reply(w, http.StatusUnauthorized, apiError("a bearer token is required"))
			return
		}
		api.ServeHTTP(w, r)
	})}, nil
}

// What one listener of the agent's (the control socket, the TCP control
// API, the metrics) holds at most: maxConnections connections at once (more
// wait in the kernel's accept queue, costing the agent no descriptor),
// none that sends no request header within 5 s or stays idle for
// idleTimeout, headers of maxHeaderBytes. A flood of connections, from a
// scanner or an attacker on the plant network, so cannot take the file
// descriptors and memory the agent's broker connections and files need.
const (
	maxConnections = 32
	idleTimeout    = 10 * time.Second
	maxHeaderBytes = 16 << 10
)

func serveHTTP(ctx context.Context, l net.Listener, h http.Handler) error {
	l = netutil.LimitListener(l, maxConnections)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes,
		ErrorLog: log.New(io.Discard, "", 0)} // a caller's broken request is its own business, not the agent's log
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func apiError(msg string) api.Error { return api.Error{Error: msg} }

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func (c *control) checkpoint(w http.ResponseWriter, r *http.Request) {
	inc := c.current.Load()
	if inc == nil {
		reply(w, http.StatusServiceUnavailable, api.Error{Error: "the pipeline is starting"})
		return
	}
	if r.URL.Path == "/savepoint" {
		resp, err := c.takeSavepoint(r.Context(), inc, "")
		if err != nil {
			reply(w, http.StatusConflict, api.Error{Error: err.Error()})
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
	if err := inc.completions.wait(ctx, id); err != nil {
		reply(w, http.StatusGatewayTimeout, api.Error{Error: fmt.Sprintf("checkpoint %d did not complete: %v", id, err)})
		return
	}
	reply(w, http.StatusOK, api.CheckpointResponse{ID: id})
}

// takeSavepoint takes a savepoint of inc's job (a checkpoint aligned in
// every mode) and writes it to path, or, if "", to the data directory's
// savepoints, of which it keeps agent.retained_savepoints.
func (c *control) takeSavepoint(ctx context.Context, inc *incarnation, path string) (api.CheckpointResponse, error) {
	id, err := inc.job.TriggerSavepoint(ctx)
	if err != nil {
		return api.CheckpointResponse{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := inc.completions.wait(ctx, id); err != nil {
		return api.CheckpointResponse{}, fmt.Errorf("checkpoint %d did not complete: %w", id, err)
	}
	m := inc.job.Status().LastCompleted
	if m == nil || m.ID < id {
		return api.CheckpointResponse{}, errors.New("the completed checkpoint is not known")
	}
	prune := path == ""
	if prune {
		path = filepath.Join(inc.savepoints, savepoint.FileName(m.ID))
	}
	if err := savepoint.Write(path, m, inc.store); err != nil {
		return api.CheckpointResponse{}, err
	}
	c.log.Info("savepoint written", "id", m.ID, "path", path)
	if prune {
		removed, err := savepoint.Prune(inc.savepoints, inc.retainedSavepoints)
		if len(removed) > 0 {
			c.log.Info("older savepoints deleted (agent.retained_savepoints)", "deleted", strings.Join(removed, " "), "kept", inc.retainedSavepoints)
		}
		if err != nil {
			c.log.Warn("older savepoints not deleted", "err", err)
		}
	}
	return api.CheckpointResponse{ID: m.ID, Path: path}, nil
}

// events streams the status as server-sent events, ten a second at most.
func (c *control) events(w http.ResponseWriter, r *http.Request) {
	flusher := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		data, _ := json.Marshal(c.status())
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

// status builds the API's Status from the job's.
func (c *control) status() api.Status {
	now := time.Now()
	out := api.Status{Agent: c.host, Pipeline: c.pipeline, State: "starting", Memory: memoryNow()}
	if c.wear != nil {
		out.Disk = c.wear.status(time.Now())
	}
	c.mu.Lock()
	out.ConfigError = c.configError
	c.mu.Unlock()
	if c.logs != nil {
		out.Ingest = ingestStatus(c.logs.Health(), c.dataDir)
		kept, _ := c.logs.DeadLetterCounts()
		out.DeadLetterCauses = make(map[string]int64)
		for _, cause := range ingest.Causes {
			out.DeadLetterCauses[cause] = kept[cause]
			out.DeadLetters += kept[cause]
		}
	}
	inc := c.current.Load()
	if inc == nil {
		if c.restoring.Load() {
			out.State = "restoring"
		}
		c.observe(&out, nil, runtime.Status{}, now)
		return out
	}
	st := inc.job.Status()
	out.Mode, out.State, out.UptimeSeconds = inc.mode, "running", st.Uptime.Seconds()
	out.Checkpoints = api.Checkpoints{Completed: st.Completed, Failed: st.Failed, InProgress: len(st.Pending)}
	switch {
	case c.stopping.Load():
		out.State = "stopping"
	case c.restoring.Load(), inc.restoring && st.RestoredFrom == nil:
		out.State = "restoring"
	}
	if m := st.LastCompleted; m != nil {
		info := CheckpointInfo(m)
		c.uploadState(&info)
		out.Checkpoints.LastCompleted = &info
	}
	if m := st.RestoredFrom; m != nil {
		out.RestoredFrom = &api.Restored{ID: m.ID, Source: inc.restoredSource}
	}
	for _, p := range st.Pending {
		out.InFlight = append(out.InFlight, api.InFlight{ID: p.ID, ElapsedMS: (st.Uptime - p.Triggered).Milliseconds(), Acked: len(p.Acked), Total: len(st.Tasks)})
	}
	byOp := make(map[string]int)
	for _, t := range st.Tasks {
		i, ok := byOp[t.ID.Operator]
		if !ok {
			i = len(out.Operators)
			byOp[t.ID.Operator] = i
			out.Operators = append(out.Operators, api.Operator{ID: t.ID.Operator})
			if l := inc.late[t.ID.Operator]; l != nil {
				out.Operators[i].LateRecords = l.Load()
			}
			if m := inc.sinks[t.ID.Operator]; m != nil {
				out.Operators[i].Sink = &api.SinkCounts{Staged: m.Staged.Load(), Published: m.Published.Load(), Unencodable: m.Unencodable.Load(),
					ReplayStableIDs: m.Unordered.Load() == 0, Renumbered: m.Renumbered.Load()}
			}
		}
		op := &out.Operators[i]
		op.Parallelism++
		sub := api.Subtask{Index: t.ID.Subtask, RecordsIn: t.RecordsIn, RecordsOut: t.RecordsOut, Rejected: t.Rejected, BackpressureMS: t.Backpressure.Milliseconds()}
		for _, q := range t.Queued {
			sub.Queued += q
		}
		if a := t.Alignment; a.ID != 0 {
			al := &api.Alignment{CheckpointID: a.ID, StartedMS: a.Started.Milliseconds(),
				ElapsedMS: (st.Uptime - a.Started).Milliseconds(), BufferedRecords: t.Buffered, Unaligned: a.Unaligned, Blocking: a.Blocking}
			for ch, at := range a.Arrived {
				al.Channels = append(al.Channels, api.Channel{
					From: t.Upstream[ch].String(), Arrived: at >= 0, AtMS: max(0, at.Milliseconds()),
					Ended: a.Ended[ch], Queued: t.Queued[ch],
				})
			}
			sub.Alignment = al
		}
		op.Subtasks = append(op.Subtasks, sub)
	}
	for _, o := range st.History {
		info := api.CheckpointInfo{ID: o.ID, Status: "failed", Cause: o.Reason.String()}
		if o.Cause != "" {
			info.Cause += ": " + o.Cause
		}
		if o.Manifest != nil {
			info = CheckpointInfo(o.Manifest)
			c.uploadState(&info)
		}
		info.TriggeredUnixMS = st.Started.Add(o.Triggered).UnixMilli()
		info.DurationMS = o.Duration.Milliseconds()
		out.History = append(out.History, info)
	}
	for _, name := range slices.Sorted(maps.Keys(inc.brokers)) {
		b := inc.brokers[name].Status()
		ab := api.Broker{ID: name, Connected: b.Connected == b.Clients, Clients: b.Clients, ConnectedClients: b.Connected,
			SinceUnixMS: b.Since.UnixMilli(), LastError: b.LastError}
		if !b.LastErrorAt.IsZero() {
			ab.LastErrorUnixMS = b.LastErrorAt.UnixMilli()
		}
		out.Brokers = append(out.Brokers, ab)
	}
	out.OutputBacklogBytes, out.InputHeld = inc.backlog.Bytes()
	for _, m := range inc.sources {
		out.IngestLag += m.Lag.Load()
		out.IngestFailures += m.AppendFailures.Load()
	}
	c.observe(&out, inc, st, now)
	return out
}

// ingestStatus is the ingest logs' health h as the control API says it,
// with the paths of the data directory's files relative to it: data_dir
// may take something from the environment, which the agent shows nowhere.
func ingestStatus(h ingest.Health, dataDir string) api.Ingest {
	relative := func(s string) string {
		if dataDir == "" {
			return s
		}
		return strings.ReplaceAll(s, strings.TrimSuffix(dataDir, "/")+"/", "")
	}
	out := api.Ingest{DamagedRecords: h.DamagedRecords, LostMessages: h.LostMessages, LastDamage: relative(h.LastDamage),
		NotAcknowledgingReason: relative(h.RefusingError)}
	if !h.RefusingSince.IsZero() {
		out.NotAcknowledgingSinceUnixMS = h.RefusingSince.UnixMilli()
	}
	return out
}

// CheckpointInfo summarises a completed checkpoint for the control API.
func CheckpointInfo(m *checkpoint.Manifest) api.CheckpointInfo {
	info := api.CheckpointInfo{ID: m.ID, Status: "completed", DurationMS: m.Duration.Milliseconds(), SameAs: m.SameAs, Mode: m.Mode.String()}
	for _, a := range m.Subtasks {
		info.SizeBytes += a.Stats.StateSize
		info.AlignmentMS = max(info.AlignmentMS, a.Stats.Alignment.Milliseconds())
		info.StartDelayMS = max(info.StartDelayMS, a.Stats.StartDelay.Milliseconds())
		info.SyncMS = max(info.SyncMS, a.Stats.Sync.Milliseconds())
		info.AsyncMS = max(info.AsyncMS, a.Stats.Async.Milliseconds())
		info.Incremental = info.Incremental || len(a.Base) > 0
		info.Unaligned = info.Unaligned || a.Stats.Unaligned
		info.TimedOut = info.TimedOut || a.Stats.TimedOut
		info.InFlightBytes += a.Stats.InFlightBytes
	}
	return info
}

// checkpoints lists the retained completed checkpoints.
func (c *control) checkpoints(w http.ResponseWriter, r *http.Request) {
	inc := c.current.Load()
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
			info.Damage = damage(inc.store, m)
		}
		c.uploadState(&info)
		out = append(out, info)
	}
	reply(w, http.StatusOK, out)
}
