package agent

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/agent/config"
	"github.com/cairn-edge/cairn/agent/savepoint"
	"github.com/cairn-edge/cairn/broker"
	"github.com/cairn-edge/cairn/ingest"
	"github.com/cairn-edge/cairn/localrecovery"
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
	a, err := newAgent(path, opts)
	if err != nil {
		return err
	}
	defer a.shutdown()
	if err := a.start(ctx); err != nil {
		return err
	}
	return a.run(ctx)
}

// Agent is one run of the daemon. What it starts are its fields, started
// in one place (start) in the order they are listed, and stopped in one
// place (shutdown) in the reverse order. The job runs in an incarnation
// (runIncarnation), which owns it: it starts the job, and stops it before
// it returns; state.current is the running one, for what reads it.
type Agent struct {
	// What it is given.
	path string // the pipeline file
	opts Options
	cfg  *config.Config // as it was when the agent started
	log  *slog.Logger

	// What start resolves: the data directory, the control socket's group
	// (-1: none), the base of every MQTT client id.
	dataDir    string
	controlGID int
	clientID   string

	// What start starts, in this order.
	stopProcs func()                    // the governor of GOMAXPROCS
	unlock    func() error              // the data directory's lock
	brokers   map[string]*broker.Server // the embedded brokers, by name
	store     *localrecovery.Store
	// freshStore says the store showed nothing of checkpoints taken
	// (localrecovery.Store.Fresh), until the first incarnation looked
	// at the ingest logs (rebuiltFromLog).
	freshStore bool
	remote     *remoteSide // nil: remote storage is off
	logs       *ingest.Logs
	changes    <-chan struct{} // the pipeline file's changes
	stopWatch  func()
	state      *state // what the status says, across incarnations
	metrics    *exporter
	api        *controlAPI
	// stopServing stops the wear sampler, the data directory's watcher
	// and the listeners' servers.
	stopServing context.CancelFunc
	fleet       *fleetStatus // nil: no broker has a status topic
	// fatal receives what ends the agent: a server's failure, the data
	// directory's loss.
	fatal     chan error
	listeners []listener // the control socket, and the metrics and TCP control API

	notify *notifier // run's, for the incarnations
}

// newAgent reads the pipeline file at path; it starts nothing.
func newAgent(path string, opts Options) (*Agent, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	return &Agent{path: path, opts: opts, cfg: cfg, log: log, controlGID: -1}, nil
}

// start starts what the agent runs the pipeline with, in order: the
// processor governor, the data directory's lock, the embedded brokers,
// the checkpoint store, the remote uploads, the ingest logs, the watcher
// of the pipeline file, the fleet status, the wear sampler, the watcher
// of the data directory and the listeners. What it started before a
// failure is the shutdown's to stop.
func (a *Agent) start(ctx context.Context) error {
	cfg, opts, log := a.cfg, a.opts, a.log
	var err error
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
		a.stopProcs = func() { stopProcs(); <-procsDone }
	}
	a.dataDir = cfg.Agent.DataDir
	if opts.DataDir != "" {
		a.dataDir = opts.DataDir
	}
	dataDir := a.dataDir
	if opts.ControlGroup != "" {
		if a.controlGID, err = lookupGroup(opts.ControlGroup); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	if a.unlock, err = lockDataDir(dataDir); err != nil {
		return err
	}
	warnIfShared(dataDir, log)
	if a.controlGID >= 0 {
		warnIfUnreachable(dataDir, opts.ControlGroup, a.controlGID, log)
	}
	a.clientID = "cairn"
	if host, err := os.Hostname(); err == nil {
		a.clientID = "cairn-" + host
	}
	if err := a.startBrokers(); err != nil {
		return err
	}
	if a.store, err = localrecovery.Open(StorePath(dataDir), localrecovery.Options{Retain: cfg.Checkpoints.Retained, HighWater: HighWaterPath(dataDir), Logger: log}); err != nil {
		return err
	}
	a.freshStore = a.store.Fresh()
	if a.remote, err = openRemote(cfg.Remote, a.store, log); err != nil {
		return err
	}
	if a.logs, err = ingest.Open(dataDir, ingest.LogOptions{Logger: log}); err != nil {
		return err
	}
	if a.changes, a.stopWatch, err = watch(a.path, log); err != nil {
		return err
	}
	a.state = &state{pipeline: a.path, host: a.clientID, remote: a.remote, logs: a.logs, dataDir: dataDir, embedded: a.brokers,
		wear:   newWear(wearFile{"ingest", a.logs.Wear}, wearFile{"checkpoints", a.store.Wear}),
		stalls: newStalls()}
	a.metrics = &exporter{state: a.state, build: opts.Build, checkpoints: newCheckpointMetrics()}
	a.api = &controlAPI{state: a.state, log: log, stops: make(chan stopRequest)}
	serveCtx, stopServing := context.WithCancel(context.Background())
	a.stopServing = stopServing
	if a.fleet, err = startFleetStatus(cfg, a.deps(), a.state, opts.Build.Version); err != nil {
		return err
	}
	go a.state.wear.run(serveCtx)
	a.fatal = make(chan error, 4)
	ids, err := identify(dataDir)
	if err != nil {
		return err
	}
	go ids.watch(serveCtx, cfg.Checkpoints.Interval, a.fatal)
	if a.listeners, err = a.listen(); err != nil {
		return err
	}
	for _, l := range a.listeners {
		go func() { a.fatal <- l.serve(serveCtx) }()
	}
	return nil
}

// shutdown stops what start started, in the reverse order: the fleet
// status last says the pipeline stopped, the listeners close, and the
// stores close once nothing writes to them; the lock goes last.
func (a *Agent) shutdown() {
	if a.fleet != nil {
		a.fleet.close() // once the pipeline stopped: its last status says "stopped"
	}
	if a.stopServing != nil {
		a.stopServing()
	}
	if a.stopWatch != nil {
		a.stopWatch()
	}
	if a.logs != nil {
		a.logs.Close()
	}
	if a.remote != nil {
		a.remote.close()
	}
	if a.store != nil {
		a.store.Close()
	}
	for _, br := range a.brokers {
		br.Close()
	}
	if a.unlock != nil {
		a.unlock()
	}
	if a.stopProcs != nil {
		a.stopProcs()
	}
}

// run runs the pipeline, from the savepoint the options name if any, an
// incarnation after another, until one stops the agent.
func (a *Agent) run(ctx context.Context) error {
	cfg, opts, log := a.cfg, a.opts, a.log
	from, err := startingSavepoint(opts, cfg, log)
	if err != nil {
		return err
	}
	if from != nil {
		if from, err = savepointOnce(opts.FromSavepoint, from, a.dataDir, a.store, log); err != nil {
			return err
		}
		if from != nil {
			log.Info("starting from a savepoint", "path", opts.FromSavepoint, "checkpoint", from.Manifest.ID)
		}
	}
	a.notify = newNotifier(log)
	for {
		next, completed, err := a.runIncarnation(ctx, cfg, from)
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

// deps are what the agent builds graphs with.
func (a *Agent) deps() *deps {
	return &deps{logs: a.logs, clientID: a.clientID, brokers: a.brokers, log: a.log, acceptStateLoss: a.opts.AcceptStateLoss}
}

// startBrokers starts the embedded brokers of the config, into a.brokers
// (those started before a failure too).
func (a *Agent) startBrokers() error {
	a.brokers = make(map[string]*broker.Server)
	for name, b := range a.cfg.Brokers {
		if !b.Embedded {
			continue
		}
		bc, err := brokerConfig(a.cfg, name, a.clientID)
		if err != nil {
			return fmt.Errorf("broker %q: %w", name, err)
		}
		br, err := broker.Start(bc, a.log)
		if err != nil {
			return fmt.Errorf("broker %q: %w", name, err)
		}
		a.brokers[name] = br
		a.log.Info("embedded MQTT broker listening", "broker", name, "url", br.URL(), "users", len(bc.Users), "anonymous", bc.AllowAnonymous)
		if bc.AllowAnonymous && !b.ListensLocally() {
			a.log.Warn("the embedded broker lets in anonymous clients from the network (allow_anonymous: true)", "broker", name, "listen", b.Listen)
		}
	}
	return nil
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
