package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-edge/cairn/agent/config"
	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/localrecovery"
	"github.com/cairn-edge/cairn/mqttio"
	"github.com/cairn-edge/cairn/runtime"
)

// StopTimeout bounds the final checkpoint of a stop; then the agent stops
// without it (the last completed checkpoint stands).
const StopTimeout = 10 * time.Second

// Options are how the agent is run.
type Options struct {
	// DataDir overrides the config's agent.data_dir.
	DataDir string
	Logger  *slog.Logger
}

// StorePath is the checkpoint store under a data directory.
func StorePath(dataDir string) string { return filepath.Join(dataDir, "checkpoints.db") }

// Run runs the pipeline of the config file at path until ctx is done, then
// takes a final checkpoint and stops. It restores the newest intact
// checkpoint in the data directory first.
func Run(ctx context.Context, path string, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	dataDir := cfg.Agent.DataDir
	if opts.DataDir != "" {
		dataDir = opts.DataDir
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	d := &deps{clientID: "cairn", brokers: make(map[string]string)}
	if host, err := os.Hostname(); err == nil {
		d.clientID = "cairn-" + host
	}
	for name, b := range cfg.Brokers {
		if !b.Embedded {
			continue
		}
		br, err := mqttio.StartBroker(b.Listen, log)
		if err != nil {
			return fmt.Errorf("broker %q: %w", name, err)
		}
		defer br.Close()
		d.brokers[name] = br.URL()
		log.Info("embedded MQTT broker listening", "broker", name, "url", br.URL())
	}
	store, err := localrecovery.Open(StorePath(dataDir), localrecovery.Options{Retain: cfg.Checkpoints.Retained, Logger: log})
	if err != nil {
		return err
	}
	defer store.Close()
	if d.logs, err = mqttio.OpenLogDB(filepath.Join(dataDir, "ingest.db")); err != nil {
		return err
	}
	defer d.logs.Close()
	topo, err := build(cfg, d)
	if err != nil {
		return err
	}
	restore, err := store.Completed()
	if err != nil {
		return err
	}
	mode, _ := checkpoint.ParseMode(cfg.Checkpoints.Mode)
	done := new(completions)
	job, err := runtime.New(topo, runtime.Options{
		Checkpoints: checkpoint.Config{Mode: mode, Interval: cfg.Checkpoints.Interval, MinPause: cfg.Checkpoints.MinPause,
			Timeout: cfg.Checkpoints.Timeout, MaxConcurrent: cfg.Checkpoints.MaxConcurrent, TolerableFailures: *cfg.Checkpoints.TolerableFailures},
		Store: store, Restore: restore, Incremental: cfg.Checkpoints.Incremental, MaxChain: cfg.Checkpoints.MaxChain, Logger: log,
		OnComplete: func(m *checkpoint.Manifest) {
			log.Info("checkpoint complete", "id", m.ID, "duration", m.Duration)
			done.completed(m.ID)
		},
	})
	if err != nil {
		return err
	}
	jobCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- job.Run(jobCtx) }()
	ctl := &control{job: job, pipeline: path, host: d.clientID, mode: mode.String(), restoring: len(restore) > 0,
		sources: d.sources, completions: done, log: log}
	ctlCtx, stopControl := context.WithCancel(context.Background())
	defer stopControl()
	served := make(chan error, 1)
	go func() { served <- ctl.serve(ctlCtx, SocketPath(dataDir)) }()
	log.Info("pipeline running", "config", path, "data_dir", dataDir, "mode", mode.String(), "control", SocketPath(dataDir))
	select {
	case err := <-ran:
		return err
	case err := <-served:
		cancel()
		<-ran
		return err
	case <-ctx.Done():
	}
	ctl.stopping.Store(true)
	finalCheckpoint(job, done, log)
	cancel()
	return <-ran
}

// finalCheckpoint takes a checkpoint before a stop and waits for it, at
// most StopTimeout.
func finalCheckpoint(job *runtime.Job, done *completions, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
	defer cancel()
	id, err := job.TriggerCheckpoint(ctx)
	if err != nil {
		log.Warn("no final checkpoint", "err", err)
		return
	}
	if err := done.wait(ctx, id); err != nil {
		log.Warn("final checkpoint did not complete in time; the last completed one stands", "id", id, "waited", StopTimeout)
		return
	}
	log.Info("final checkpoint complete", "id", id)
}

// Checkpoints lists the completed checkpoints in the store of a stopped
// agent's data directory, newest first.
func Checkpoints(dataDir string) ([]*checkpoint.Manifest, error) {
	if _, err := os.Stat(StorePath(dataDir)); err != nil {
		return nil, fmt.Errorf("no checkpoint store in %s: %w", dataDir, err)
	}
	store, err := localrecovery.Open(StorePath(dataDir), localrecovery.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	return store.Completed()
}
