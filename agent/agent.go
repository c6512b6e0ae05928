package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/agent/config"
	"github.com/cairn-edge/cairn/agent/savepoint"
	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/localrecovery"
	"github.com/cairn-edge/cairn/mqttio"
	"github.com/cairn-edge/cairn/runtime"
)

// StopTimeout bounds the final checkpoint of a stop or a reload; then the
// agent goes on without it (the last completed checkpoint stands).
const StopTimeout = 10 * time.Second

// Options are how the agent is run.
type Options struct {
	// DataDir overrides the config's agent.data_dir.
	DataDir string
	Logger  *slog.Logger
	// LogLevel, if set, is the level of Logger's handler: the agent sets
	// it to the config's agent.log_level when it starts and when a reload
	// applies a new config.
	LogLevel *slog.LevelVar
	// Reload, if set, receives when the pipeline file should be read again
	// (SIGHUP). Changes to the file are watched in any case.
	Reload <-chan struct{}
	// FromSavepoint, if set, is a savepoint file to start from instead of
	// the local checkpoints. State of operators the pipeline no longer has
	// is refused unless AllowDroppedState.
	FromSavepoint     string
	AllowDroppedState bool
	// AcceptStateLoss starts the pipeline with what state can be
	// restored, empty if none, where the data directory shows that state
	// was lost (localrecovery.Sources.AcceptStateLoss); without it such a
	// start is refused.
	AcceptStateLoss bool
	// Build says which cairn runs, for the metric cairn_build_info.
	Build BuildInfo
	// ControlGroup, if set, is a group (a name or a number) whose members
	// may use the control socket: the socket is made the group's, mode
	// 0660, instead of 0600. The agent's user must be root or a member of
	// the group. The group must also be able to search the data
	// directory, which the agent does not change: it warns at start when
	// the group cannot.
	ControlGroup string
	// GovernProcessors lets the agent run on one processor while its load
	// is light and on all of them otherwise (procs.go): for a process of
	// its own, such as `cairn run`. GOMAXPROCS, if set, decides instead.
	GovernProcessors bool
}

// BuildInfo says which cairn runs.
type BuildInfo struct {
	// Version is what `cairn version` prints; Commit is the VCS revision
	// the binary was built from, "" when unknown.
	Version, Commit string
}

// LogsPath is the ingest logs' directory under a data directory.
func LogsPath(dataDir string) string { return filepath.Join(dataDir, "ingest") }

// openLogs opens the ingest logs in dataDir, first moving those of an
// earlier cairn's single bbolt file (ingest.db) into them.
func openLogs(dataDir string, log *slog.Logger) (*mqttio.Logs, error) {
	opts := mqttio.LogOptions{Logger: log}
	old := filepath.Join(dataDir, "ingest.db")
	migrated, err := mqttio.MigrateBoltLogs(old, LogsPath(dataDir), opts)
	if err != nil {
		return nil, err
	}
	if migrated {
		log.Info("ingest log moved to segment files; every message keeps its offset", "from", old, "to", LogsPath(dataDir))
	}
	return mqttio.OpenLogs(LogsPath(dataDir), opts)
}

// StorePath is the checkpoint store's file under a data directory.
func StorePath(dataDir string) string { return filepath.Join(dataDir, "checkpoints.db") }

// HighWaterPath is the file beside the store that keeps the highest
// checkpoint id taken (localrecovery.Options.HighWater).
func HighWaterPath(dataDir string) string { return filepath.Join(dataDir, "checkpoint-id") }

// Run runs the pipeline of the config file at path until ctx is done, then
// takes a final checkpoint and stops. It restores the newest intact
// checkpoint in the data directory first. When the file changes (or Reload
// fires) it validates it: a valid change is applied by a final checkpoint
// and a restart of the new graph from it, operators keeping their state by
// id; an invalid one is reported and the running pipeline goes on.
func Run(ctx context.Context, path string, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	if opts.LogLevel != nil {
		opts.LogLevel.Set(cfg.Agent.Level)
	}
	if n := cfg.Agent.MemoryLimitBytes; n > 0 {
		debug.SetMemoryLimit(n)
		log.Info("memory limit set", "limit", cfg.Agent.MemoryLimit)
	}
	if opts.GovernProcessors {
		procsCtx, stopProcs := context.WithCancel(ctx)
		procsDone := make(chan struct{})
		go func() {
			defer close(procsDone)
			governProcs(procsCtx, os.Getenv("GOMAXPROCS") != "", log)
		}()
		defer func() { stopProcs(); <-procsDone }()
	}
	dataDir := cfg.Agent.DataDir
	if opts.DataDir != "" {
		dataDir = opts.DataDir
	}
	controlGID := -1 // the socket's group: none
	if opts.ControlGroup != "" {
		if controlGID, err = lookupGroup(opts.ControlGroup); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	unlock, err := lockDataDir(dataDir)
	if err != nil {
		return err
	}
	defer unlock()
	warnIfShared(dataDir, log)
	if controlGID >= 0 {
		warnIfUnreachable(dataDir, opts.ControlGroup, controlGID, log)
	}
	d := &deps{clientID: "cairn", brokers: make(map[string]*mqttio.Broker), log: log, acceptStateLoss: opts.AcceptStateLoss}
	if host, err := os.Hostname(); err == nil {
		d.clientID = "cairn-" + host
	}
	defer d.closeBrokers()
	if err := d.startBrokers(cfg); err != nil {
		return err
	}
	store, err := localrecovery.Open(StorePath(dataDir), localrecovery.Options{Retain: cfg.Checkpoints.Retained, HighWater: HighWaterPath(dataDir), Logger: log})
	if err != nil {
		return err
	}
	defer store.Close()
	rem, err := openRemote(cfg.Remote, store, log)
	if err != nil {
		return err
	}
	if rem != nil {
		defer rem.close()
	}
	if d.logs, err = openLogs(dataDir, log); err != nil {
		return err
	}
	defer d.logs.Close()

	changes, stopWatch, err := watch(path, log)
	if err != nil {
		return err
	}
	defer stopWatch()
	ctl := &control{pipeline: path, host: d.clientID, log: log, remote: rem, logs: d.logs, dataDir: dataDir, stops: make(chan stopRequest),
		wear:  newWear(wearFile{"ingest", d.logs.Wear}, wearFile{"checkpoints", store.Wear}),
		build: opts.Build, checkpointMetrics: newCheckpointMetrics(), stalls: newStalls()}
	ctlCtx, stopControl := context.WithCancel(context.Background())
	defer stopControl()
	fleet, err := startFleetStatus(cfg, d, ctl)
	if err != nil {
		return err
	}
	if fleet != nil {
		defer fleet.close() // once the pipeline stopped: its last status says "stopped"
	}
	go ctl.wear.run(ctlCtx)
	// fatal receives what ends the agent: a server's failure, the data
	// directory's loss.
	fatal := make(chan error, 4)
	ids, err := identify(dataDir)
	if err != nil {
		return err
	}
	go ids.watch(ctlCtx, cfg.Checkpoints.Interval, fatal)
	listeners, err := ctl.listen(SocketPath(dataDir), controlGID, cfg.Agent)
	if err != nil {
		return err
	}
	for _, l := range listeners {
		go func() { fatal <- l.serve(ctlCtx) }()
	}

	from, err := startingSavepoint(opts, cfg, log)
	if err != nil {
		return err
	}
	if from != nil {
		if from, err = savepointOnce(opts.FromSavepoint, from, dataDir, store, log); err != nil {
			return err
		}
		if from != nil {
			log.Info("starting from a savepoint", "path", opts.FromSavepoint, "checkpoint", from.Manifest.ID)
		}
	}
	notify := newNotifier(log)
	for {
		next, completed, err := runIncarnation(ctx, cfg, d, store, from, ctl, changes, opts.Reload, fatal, notify, log)
		if err != nil || next == nil {
			return err
		}
		cfg = next
		if opts.LogLevel != nil {
			opts.LogLevel.Set(cfg.Agent.Level)
		}
		if completed {
			from = nil // the local store now holds newer state than the savepoint
		}
	}
}

// startBrokers starts the embedded brokers of cfg; closeBrokers closes
// those started, also after a failure.
func (d *deps) startBrokers(cfg *config.Config) error {
	for name, b := range cfg.Brokers {
		if !b.Embedded {
			continue
		}
		bc, err := brokerConfig(b, d.clientID)
		if err != nil {
			return fmt.Errorf("broker %q: %w", name, err)
		}
		br, err := mqttio.StartBroker(bc, d.log)
		if err != nil {
			return fmt.Errorf("broker %q: %w", name, err)
		}
		d.brokers[name] = br
		d.log.Info("embedded MQTT broker listening", "broker", name, "url", br.URL(), "users", len(bc.Users), "anonymous", bc.AllowAnonymous)
		if bc.AllowAnonymous && !b.ListensLocally() {
			d.log.Warn("the embedded broker lets in anonymous clients from the network (allow_anonymous: true)", "broker", name, "listen", b.Listen)
		}
	}
	return nil
}

func (d *deps) closeBrokers() {
	for _, br := range d.brokers {
		br.Close()
	}
}

// startingSavepoint reads the savepoint opts names, if any, refusing one
// with state of operators cfg lacks unless opts allow dropping it.
func startingSavepoint(opts Options, cfg *config.Config, log *slog.Logger) (*savepoint.Savepoint, error) {
	if opts.FromSavepoint == "" {
		return nil, nil
	}
	from, err := savepoint.Read(opts.FromSavepoint)
	if err != nil {
		return nil, err
	}
	if dropped := missing(from.Manifest.Operators(), cfg); len(dropped) > 0 && !opts.AllowDroppedState {
		return nil, fmt.Errorf("savepoint %s holds state of operators the pipeline does not have: %s (start with --allow-dropped-state to drop it)",
			opts.FromSavepoint, strings.Join(dropped, ", "))
	}
	return from, nil
}

// missing returns the operators of ids that cfg does not have.
func missing(ids []string, cfg *config.Config) []string {
	have := make(map[string]bool)
	for _, s := range cfg.Sources {
		have[s.ID] = true
	}
	for _, o := range cfg.Operators {
		have[o.ID] = true
	}
	for _, s := range cfg.Sinks {
		have[s.ID] = true
	}
	var out []string
	for _, id := range ids {
		if !have[id] {
			out = append(out, id)
		}
	}
	return out
}

// runIncarnation runs one graph until the agent stops (nil config) or a
// valid new config replaces it; completed reports whether a checkpoint
// completed meanwhile. It tells the service manager (notify) when the
// graph runs, reloads or stops, and pings its watchdog from its loop.
func runIncarnation(ctx context.Context, cfg *config.Config, d *deps, store *localrecovery.Store, from *savepoint.Savepoint,
	ctl *control, changes, reload <-chan struct{}, fatal <-chan error, notify *notifier, log *slog.Logger) (next *config.Config, completed bool, err error) {
	notify.Status("restoring the pipeline's state")
	backlog := mqttio.NewBacklog(cfg.Agent.MaxOutputBacklogBytes, func(held bool, bytes int64) {
		if held {
			log.Warn("output backlog over agent.max_output_backlog: sources hold until the brokers take it",
				"bytes", bytes, "limit", cfg.Agent.MaxOutputBacklog)
		} else {
			log.Info("output backlog drained: sources read again", "bytes", bytes)
		}
	})
	g, err := d.build(cfg, backlog)
	if err != nil {
		return nil, false, err
	}
	sources := localrecovery.Sources{Local: store, AcceptStateLoss: d.acceptStateLoss, Logger: log}
	if from != nil {
		sources.Savepoint = &localrecovery.Candidate{Manifest: from.Manifest, Store: from}
	} else if rem := ctl.remote; rem != nil {
		sources.Own, sources.From = rem.own, rem.restore
	}
	ctl.restoring.Store(true) // until ctl.set
	restore, err := localrecovery.Choose(sources)
	if err != nil {
		return nil, false, nothingRestored(err)
	}
	mode, _ := checkpoint.ParseMode(cfg.Checkpoints.Mode)
	done := new(completions)
	// holding, once set, holds the sources: a stop or a reload takes its
	// final checkpoint of what they read so far, which the sinks then
	// publish whole before the job ends.
	var holding atomic.Bool
	said := &checkpointLog{log: log, lateLog: lateLog{every: cfg.Agent.LogSummaryInterval}}
	interval := cfg.Checkpoints.Interval
	lateCheckpoints := new(atomic.Int64)
	var jobStart time.Time // set before the job runs, read as its subtasks report
	job, err := runtime.New(g.topo, runtime.Options{
		Checkpoints: checkpoint.Config{Mode: mode, Interval: cfg.Checkpoints.Interval, MinPause: cfg.Checkpoints.MinPause,
			Timeout: cfg.Checkpoints.Timeout, MaxConcurrent: cfg.Checkpoints.MaxConcurrent, TolerableFailures: *cfg.Checkpoints.TolerableFailures,
			AlignmentTimeout: cfg.Checkpoints.AlignmentTimeout},
		Store: store, Restore: restore.Candidates, Incremental: cfg.Checkpoints.Incremental, MaxChain: cfg.Checkpoints.MaxChain, Logger: log,
		Hold: func() <-chan struct{} {
			if holding.Load() {
				return holdForever
			}
			return backlog.Hold()
		},
		OnRejected: newRejections(cfg, d.logs.StoreRejected, log).handle,
		OnAligned:  func(a runtime.Aligned) { ctl.stalls.aligned(jobStart, a) },
		OnComplete: func(m *checkpoint.Manifest) {
			said.onComplete(m, interval, time.Now())
			ctl.checkpointMetrics.completed(m, interval)
			if isLate(interval, m.Duration) {
				lateCheckpoints.Add(1)
			}
			if ctl.remote != nil && m.SameAs == 0 { // one that changed nothing was uploaded as SameAs
				ctl.remote.uploads.Upload(m) // before a stop waiting for m goes on to close the uploader
			}
			done.completed(m.ID)
		},
		OnAbort: func(a checkpoint.Abort) {
			said.onAbort(a)
			ctl.checkpointMetrics.aborted(a)
			done.abort(a.ID, a.Reason.String()+": "+a.Cause)
		},
	})
	if err != nil {
		return nil, false, err
	}
	jobStart = job.Status().Started
	if len(restore.Candidates) > 0 {
		reportDropped(restore.Candidates[0].Manifest, cfg, log)
	}
	jobCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	summarized := make(chan struct{})
	go func() {
		defer close(summarized)
		said.summarize(jobCtx, cfg.Agent.LogSummaryInterval)
	}()
	defer func() { cancel(); <-summarized }() // the last summary before the agent goes on or stops
	go func() {
		err := job.Run(jobCtx)
		done.stopped(err)
		ran <- err
	}()
	ctl.set(incarnation{job: job, mode: mode.String(), restoring: len(restore.Candidates) > 0, sources: g.sources, late: g.late, backlog: backlog,
		brokers: g.brokerStates, sinks: g.sinks, completions: done, restoredSource: restore.Source, store: store, savepoints: filepath.Join(ctl.dataDir, "savepoints"), retainedSavepoints: cfg.Agent.RetainedSavepoints,
		interval: interval, lateCheckpoints: lateCheckpoints,
		carried: ctl.counts()}) // the incarnation before, if any, has stopped: its counts are final
	log.Info("pipeline running", "config", ctl.pipeline, "mode", mode.String())
	running := fmt.Sprintf("running %s (%s)", ctl.pipeline, mode)
	notify.Ready(running)
	var ping <-chan time.Time // the watchdog's, when systemd wants pings
	if every := notify.Watchdog(); every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		ping = t.C
	}
	stop := func() error {
		holding.Store(true)
		finalCheckpoint(job, done, log)
		drainOutput(backlog, log)
		cancel()
		return <-ran
	}
	for {
		select {
		case <-ping:
			notify.Ping()
			continue
		case err := <-ran:
			return nil, false, nothingRestored(err)
		case err := <-fatal:
			cancel()
			<-ran
			return nil, false, err
		case <-ctx.Done():
			ctl.stopping.Store(true)
			notify.Stopping("stopping: taking a final checkpoint")
			return nil, false, stop()
		case req := <-ctl.stops:
			ctl.stopping.Store(true)
			notify.Stopping("stopping as asked: taking a final checkpoint")
			resp, err := ctl.stopWith(ctx, ctl.current.Load(), req, holding.Store)
			if err != nil {
				req.reply <- stopReply{err: err}
				continue
			}
			cancel()
			err = <-ran
			log.Info("stopped as asked", "savepoint", resp.Path)
			req.reply <- stopReply{resp: resp, err: err}
			return nil, false, err
		case <-changes:
		case <-reload:
		}
		next, err = config.Load(ctl.pipeline)
		if err != nil {
			log.Error("pipeline file changed but is invalid; the running pipeline goes on", "errors", err.Error())
			ctl.setConfigError(err)
			notify.Status("%s; the changed file is not applied: see the log", running)
			continue
		}
		if _, err := d.build(next, nil); err != nil {
			log.Error("pipeline file changed but its graph cannot be built; the running pipeline goes on", "err", err)
			ctl.setConfigError(err)
			notify.Status("%s; the changed file is not applied: see the log", running)
			continue
		}
		if why := unappliable(cfg, next); why != "" {
			err := fmt.Errorf("%s changed: restart cairn to apply", why)
			log.Error("pipeline file changed in a way that cannot be applied live; the running pipeline goes on", "err", err)
			ctl.setConfigError(err)
			notify.Status("%s; the changed file is not applied: see the log", running)
			continue
		}
		ctl.setConfigError(nil)
		log.Info("pipeline file changed; stopping with a checkpoint to restart the new graph")
		notify.Reloading("reloading: taking a final checkpoint, then starting the changed pipeline")
		if err := stop(); err != nil {
			return nil, false, err
		}
		return next, done.completedAny(), nil
	}
}

// nothingRestored names --accept-state-loss in err when no checkpoint
// could be restored (localrecovery.ErrNothingRestored).
func nothingRestored(err error) error {
	if errors.Is(err, localrecovery.ErrNothingRestored) {
		return fmt.Errorf("%w (cairn run --accept-state-loss starts with empty state anyway)", err)
	}
	return err
}

// unappliable names what changed that a reload cannot apply: the agent
// section (but for its log level and output backlog) and the brokers belong
// to the process.
func unappliable(old, next *config.Config) string {
	strip := func(c *config.Config) (config.Agent, map[string]config.Broker) {
		a := c.Agent
		a.Pos = config.Pos{}
		a.LogLevel, a.Level = "", 0 // applied by a reload
		a.MaxOutputBacklog, a.MaxOutputBacklogBytes = "", 0
		a.LogSummaryInterval, a.RetainedSavepoints = 0, 0
		bs := make(map[string]config.Broker)
		for k, b := range c.Brokers {
			bb := *b
			bb.Pos, bb.Users = config.Pos{}, nil
			if b.Limits != nil {
				l := *b.Limits
				l.Pos = config.Pos{}
				bb.Limits = &l
			}
			for _, u := range b.Users {
				uu := *u
				uu.Pos = config.Pos{}
				bb.Users = append(bb.Users, &uu)
			}
			bs[k] = bb
		}
		return a, bs
	}
	oa, ob := strip(old)
	na, nb := strip(next)
	switch {
	case oa != na:
		return "agent"
	case !reflect.DeepEqual(ob, nb):
		return "brokers"
	case old.Checkpoints.Retained != next.Checkpoints.Retained:
		return "checkpoints.retained"
	case !sameRemote(old.Remote, next.Remote):
		return "remote"
	}
	// A source's offsets cannot be redistributed over another parallelism.
	for _, s := range next.Sources {
		for _, o := range old.Sources {
			if o.ID == s.ID && o.Parallelism != s.Parallelism {
				return "the parallelism of source " + s.ID
			}
		}
	}
	return ""
}

// reportDropped logs operators whose state the restored checkpoint holds
// but the new graph no longer has.
func reportDropped(m *checkpoint.Manifest, cfg *config.Config, log *slog.Logger) {
	for _, op := range missing(m.Operators(), cfg) {
		log.Warn("the restored checkpoint has state of an operator the pipeline no longer has; it is dropped", "operator", op, "checkpoint", m.ID)
	}
}

// finalCheckpoint takes a checkpoint before a stop and waits for it, at
// most StopTimeout.
func finalCheckpoint(job *runtime.Job, done *completions, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
	defer cancel()
	id, err := job.TriggerSavepoint(ctx) // aligned: a reload may change parallelism
	if err != nil {
		log.Warn("no final checkpoint", "err", err)
		return
	}
	if err := done.wait(ctx, id); err != nil {
		log.Warn("no final checkpoint; the last completed one stands", "id", id, "err", err)
		return
	}
	log.Info("final checkpoint complete", "id", id)
}

// holdForever holds the sources of a job that stops.
var holdForever = make(chan struct{})

// DrainTimeout bounds how long a stop waits, after its final checkpoint,
// for the brokers to acknowledge the output the sinks hold; what they do
// not is published at the next start.
const DrainTimeout = 5 * time.Second

// drainOutput waits, at most DrainTimeout, until the brokers acknowledged
// all the output the sinks hold: with the sources held and the final
// checkpoint complete, all of it is committed.
func drainOutput(backlog *mqttio.Backlog, log *slog.Logger) {
	select {
	case <-backlog.Empty():
	case <-time.After(DrainTimeout):
		bytes, _ := backlog.Bytes()
		log.Warn("stopping with output the brokers have not acknowledged; the next start publishes it", "bytes", bytes, "waited", DrainTimeout)
	}
}

// Checkpoints lists the completed checkpoints in the store of a stopped
// agent's data directory, newest first; with verify, each with the damage
// its state shows, if any. It only reads: storeDamage says what in the
// store's file does not verify, which `cairn run` sets aside when it
// starts.
func Checkpoints(dataDir string, verify bool) (infos []api.CheckpointInfo, storeDamage []string, err error) {
	// Read-only: a listing must not move, set aside or delete anything,
	// nor apply a retention the agent's config may not share, nor wait
	// for a running agent (which answers through its socket).
	store, err := localrecovery.Open(StorePath(dataDir), localrecovery.Options{Retain: math.MaxInt32, ReadOnly: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, nil, err
	}
	defer store.Close()
	ms, err := store.Completed()
	if err != nil {
		return nil, nil, err
	}
	infos = make([]api.CheckpointInfo, 0, len(ms))
	for _, m := range ms {
		info := CheckpointInfo(m)
		if verify {
			info.Damage = damage(store, m)
		}
		infos = append(infos, info)
	}
	return infos, store.Damage(), nil
}
