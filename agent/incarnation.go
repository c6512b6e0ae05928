package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-edge/cairn/agent/config"
	"github.com/cairn-edge/cairn/agent/savepoint"
	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/localrecovery"
	"github.com/cairn-edge/cairn/mqttio"
	"github.com/cairn-edge/cairn/runtime"
)

// incarnation is one run of a graph: the agent starts a new one on reload.
type incarnation struct {
	job            *runtime.Job
	mode           string
	restoring      bool                             // Options.Restore had candidates
	sources        map[string]*mqttio.SourceMetrics // by source id
	brokers        map[string]*mqttio.BrokerState   // by name in the config
	sinks          map[string]*mqttio.SinkMetrics   // by sink id
	late           map[string]*atomic.Int64
	unmatched      map[string]*atomic.Int64 // by lookup join
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

// runIncarnation runs one graph until the agent stops (nil config) or a
// valid new config replaces it; completed reports whether a checkpoint
// completed meanwhile. It tells the service manager (notify) when the
// graph runs, reloads or stops, and pings its watchdog from its loop.
func (a *Agent) runIncarnation(ctx context.Context, cfg *config.Config, from *savepoint.Savepoint) (next *config.Config, completed bool, err error) {
	store, st, notify, log := a.store, a.state, a.notify, a.log
	notify.Status("restoring the pipeline's state")
	backlog := mqttio.NewBacklog(cfg.Agent.MaxOutputBacklogBytes, func(held bool, bytes int64) {
		if held {
			log.Warn("output backlog over agent.max_output_backlog: sources hold until the brokers take it",
				"bytes", bytes, "limit", cfg.Agent.MaxOutputBacklog)
		} else {
			log.Info("output backlog drained: sources read again", "bytes", bytes)
		}
	})
	g, err := a.deps().build(cfg, backlog)
	if err != nil {
		return nil, false, err
	}
	for name, br := range a.brokers {
		br.SetAgentTopics(agentTopics(cfg)) // a reload's sinks, say
		br.SetReads(sourceReads(cfg, name))
	}
	sources := localrecovery.Sources{Local: store, AcceptStateLoss: a.opts.AcceptStateLoss, Logger: log}
	if from != nil {
		sources.Savepoint = &localrecovery.Candidate{Manifest: from.Manifest, Store: from}
	} else if rem := a.remote; rem != nil {
		sources.Own, sources.From = rem.own, rem.restore
	}
	st.restoring.Store(true) // until st.set
	restore, err := localrecovery.Choose(sources)
	if err != nil {
		return nil, false, nothingRestored(err)
	}
	if err := a.rebuiltFromLog(len(restore.Candidates) > 0); err != nil {
		return nil, false, err
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
	clockFloor, maxFuture := cfg.ClockBounds()
	job, err := runtime.New(g.topo, runtime.Options{
		ClockFloor: clockFloor, MaxFuture: maxFuture,
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
		OnRejected: newRejections(cfg, a.logs.StoreRejected, log).handle,
		OnAligned:  func(al runtime.Aligned) { st.stalls.aligned(jobStart, al) },
		OnComplete: func(m *checkpoint.Manifest) {
			said.onComplete(m, interval, time.Now())
			a.metrics.checkpoints.completed(m, interval)
			if isLate(interval, m.Duration) {
				lateCheckpoints.Add(1)
			}
			if a.remote != nil && m.SameAs == 0 { // one that changed nothing was uploaded as SameAs
				a.remote.uploads.Upload(m) // before a stop waiting for m goes on to close the uploader
			}
			done.completed(m)
		},
		OnAbort: func(ab checkpoint.Abort) {
			said.onAbort(ab)
			a.metrics.checkpoints.aborted(ab)
			done.abort(ab.ID, ab.Reason.String()+": "+ab.Cause)
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
	st.set(incarnation{job: job, mode: mode.String(), restoring: len(restore.Candidates) > 0, sources: g.sources, late: g.late, unmatched: g.unmatched, backlog: backlog,
		brokers: g.brokerStates, sinks: g.sinks, completions: done, restoredSource: restore.Source, store: store, savepoints: filepath.Join(a.dataDir, "savepoints"), retainedSavepoints: cfg.Agent.RetainedSavepoints,
		interval: interval, lateCheckpoints: lateCheckpoints,
		carried: a.metrics.counts()}) // the incarnation before, if any, has stopped: its counts are final
	log.Info("pipeline running", "config", st.pipeline, "mode", mode.String())
	running := fmt.Sprintf("running %s (%s)", st.pipeline, mode)
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
		case err := <-a.fatal:
			cancel()
			<-ran
			return nil, false, err
		case <-ctx.Done():
			st.stopping.Store(true)
			notify.Stopping("stopping: taking a final checkpoint")
			return nil, false, stop()
		case req := <-a.api.stops:
			st.stopping.Store(true)
			notify.Stopping("stopping as asked: taking a final checkpoint")
			resp, err := a.stopWith(ctx, st.current.Load(), req, holding.Store)
			if err != nil {
				req.reply <- stopReply{err: err}
				continue
			}
			cancel()
			err = <-ran
			if resp.Path != "" {
				log.Info("stopped as asked", "savepoint", resp.Path)
			} else {
				log.Info("stopped as asked")
			}
			req.reply <- stopReply{resp: resp, err: err}
			req.awaitAnswered() // the agent ends next: not before the caller has its answer
			return nil, false, err
		case <-a.changes:
		case <-a.opts.Reload:
		}
		next, err = config.Load(a.path)
		if err != nil {
			log.Error("pipeline file changed but is invalid; the running pipeline goes on", "errors", err.Error())
			st.setConfigError(err)
			notify.Status("%s; the changed file is not applied: see the log", running)
			continue
		}
		if _, err := a.deps().build(next, nil); err != nil {
			log.Error("pipeline file changed but its graph cannot be built; the running pipeline goes on", "err", err)
			st.setConfigError(err)
			notify.Status("%s; the changed file is not applied: see the log", running)
			continue
		}
		if why := unappliable(cfg, next); why != "" {
			err := fmt.Errorf("%s changed: restart cairn to apply", why)
			log.Error("pipeline file changed in a way that cannot be applied live; the running pipeline goes on", "err", err)
			st.setConfigError(err)
			notify.Status("%s; the changed file is not applied: see the log", running)
			continue
		}
		st.setConfigError(nil)
		log.Info("pipeline file changed; stopping with a checkpoint to restart the new graph")
		notify.Reloading("reloading: taking a final checkpoint, then starting the changed pipeline")
		if err := stop(); err != nil {
			return nil, false, err
		}
		return next, done.completedAny(), nil
	}
}

// rebuiltFromLog says, once, when the agent starts with nothing restored
// on a data directory whose store showed nothing of checkpoints taken
// (no store of cairn's, no id mark) but which holds ingest logs: where
// every log holds everything from its first offset, 1, the pipeline's
// state is rebuilt by replaying them, which a warning and the status
// (api.Status.Rebuilt) say. Where a log was truncated at its front, the
// state of what it lost is gone: its source refuses the start as for a
// lost store, unless the loss is accepted (mqttio's checkOffset).
func (a *Agent) rebuiltFromLog(restored bool) error {
	fresh := a.freshStore
	a.freshStore = false
	if !fresh || restored {
		return nil
	}
	fronts, err := a.logs.Fronts()
	if err != nil || len(fronts) == 0 {
		return err
	}
	for _, first := range fronts {
		if first > 1 {
			return nil
		}
	}
	why := fmt.Sprintf("no checkpoint store and no checkpoint id mark in %s, but ingest logs that hold every message from offset 1: "+
		"the pipeline's state was rebuilt by replaying them", a.dataDir)
	a.log.Warn("no checkpoint store and no checkpoint id mark, but an ingest log that holds every message from offset 1: "+
		"the pipeline's state is rebuilt by replaying it", "data_dir", a.dataDir, "logs", len(fronts))
	a.state.setRebuilt(why)
	return nil
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
			if b.Anonymous != nil {
				an := *b.Anonymous
				an.Pos = config.Pos{}
				bb.Anonymous = &an
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
// most StopTimeout; it returns its id, 0 when none completed (the log
// says why).
func finalCheckpoint(job *runtime.Job, done *completions, log *slog.Logger) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
	defer cancel()
	id, err := job.TriggerFinal(ctx) // a savepoint (a reload may change parallelism), and the last checkpoint
	if err != nil {
		log.Warn("no final checkpoint", "err", err)
		return 0
	}
	if _, err := done.wait(ctx, id); err != nil {
		log.Warn("the final checkpoint did not complete; the last completed one stands", "final", id, "err", err)
		return 0
	}
	log.Info("final checkpoint complete", "id", id)
	return id
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

// completions lets callers wait for a checkpoint to complete.
type completions struct {
	mu      sync.Mutex
	last    *checkpoint.Manifest // the newest completed
	aborted map[uint64]string    // newer than last: why they were aborted
	stop    error                // set when the job stopped
	waiters []chan struct{}
}

func (c *completions) completed(m *checkpoint.Manifest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil || m.ID > c.last.ID {
		c.last = m
	}
	for a := range c.aborted {
		if a <= c.last.ID {
			delete(c.aborted, a)
		}
	}
	c.wakeLocked()
}

// abort records that checkpoint id will not complete, and why.
func (c *completions) abort(id uint64, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil && id <= c.last.ID {
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
	return c.last != nil
}

// wait returns the newest completed checkpoint when checkpoint id (or a
// later one) completed, or an error when it was aborted or the job
// stopped first. The job's Status may not show it yet: OnComplete, which
// tells c, comes first.
func (c *completions) wait(ctx context.Context, id uint64) (*checkpoint.Manifest, error) {
	for {
		c.mu.Lock()
		if last := c.last; last != nil && last.ID >= id {
			c.mu.Unlock()
			return last, nil
		}
		if why, ok := c.aborted[id]; ok {
			c.mu.Unlock()
			return nil, fmt.Errorf("checkpoint %d was aborted: %s", id, why)
		}
		if err := c.stop; err != nil {
			c.mu.Unlock()
			return nil, err
		}
		w := make(chan struct{})
		c.waiters = append(c.waiters, w)
		c.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
