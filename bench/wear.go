package bench

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/procfs"
	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
	"github.com/cairn-edge/cairn/mqttio"
)

// The wear targets (issue 15), for the reference load with default
// settings: bytes written at most 3 times the input's, at most 5 syncs a
// second, at most 60 µs of CPU per message, a PUBACK within the sync
// interval and 20 ms (p99); idle, at most 50 MB written a day; and under
// the busy load, at most 17 µs of CPU per message.
const (
	TargetWrittenVsInput      = 3
	TargetSyncsPerSec         = 5
	TargetCPUMicrosPerMessage = 60
	TargetAckP99Extra         = 20 * time.Millisecond
	TargetIdleBytesPerDay     = 50_000_000
	TargetBusyCPUMicros       = 17
	// The checkpoint store's target (issue 26): at most 150 MB a day
	// under the reference load.
	TargetCheckpointBytesPerDay = 150_000_000
)

// The targets of a broker's window learned (issue 30), with cairn's
// defaults: under the reference load at most the CPU per message of a
// bare paho subscriber of the same readings; under the busy load through
// a window of 1,000, at most 0.6 of it; through any window, a PUBACK
// within the sync interval and 50 ms (p99).
const (
	TargetReferenceVsBare = 1.0
	TargetBusyWideVsBare  = 0.6
	TargetBusyWide        = 1000
	TargetBusyAckP99Extra = 50 * time.Millisecond
)

// WearConfig sizes the wear scenario.
type WearConfig struct {
	// Binary is the cairn measured; required. Baseline, if set, is another
	// cairn (one built before a change, say) measured the same way in the
	// same run, before it.
	Binary   string
	Baseline string
	// BareSubscriber is the command line of a bare subscriber, to which
	// --broker URL --topic FILTER are added: a program that runs
	// BareSubscriber until SIGTERM, printing how many messages it has
	// received on each SIGUSR1 (cairn-bench bare-subscriber); required.
	BareSubscriber []string
	// Dir receives the brokers', pipelines' and agents' files; required.
	Dir string
	// The reference load: Devices devices sending a reading of about 100
	// bytes a second each, through a mosquitto with its default limits,
	// measured for Duration after a checkpoint; then no input for
	// IdleDuration. Defaults 50, 60 s and 60 s.
	Devices      int
	Duration     time.Duration
	IdleDuration time.Duration
	// The busy load: BusyRate readings a second over BusyDevices devices,
	// measured for BusyDuration, through a mosquitto with each of
	// BusyWindows as its max_inflight_messages in turn, and cairn with
	// its defaults; defaults 5000, 100, 20 s and 20, 100 and 1000.
	BusyRate     int
	BusyDevices  int
	BusyDuration time.Duration
	BusyWindows  []int
	// Rounds is how many times each load is measured, the baseline's
	// and the cairn's runs alternating (which goes first alternates
	// too); the figures are the rounds' medians. Default 1.
	Rounds int
}

func (c *WearConfig) setDefaults() {
	if c.Devices <= 0 {
		c.Devices = 50
	}
	if c.Duration <= 0 {
		c.Duration = time.Minute
	}
	if c.IdleDuration <= 0 {
		c.IdleDuration = time.Minute
	}
	if c.BusyRate <= 0 {
		c.BusyRate = 5000
	}
	if c.BusyDevices <= 0 {
		c.BusyDevices = 100
	}
	if c.BusyDuration <= 0 {
		c.BusyDuration = 20 * time.Second
	}
	if len(c.BusyWindows) == 0 {
		c.BusyWindows = []int{20, 100, 1000}
	}
	c.Rounds = max(c.Rounds, 1)
}

// WearFigures are what a `cairn run` process did over one measured
// window. WrittenBytes is the kernel's count (/proc/PID/io write_bytes)
// of what the agent's writes made it write back; the syncs are the
// agent's own counts; CPU is the process's user and system time.
type WearFigures struct {
	Seconds float64 `json:"seconds"`
	// AgentCounts says the agent counts its own writes and syncs (status
	// disk): without it, as in a cairn from before it did, the agent's
	// counts below are 0.
	AgentCounts         bool    `json:"agent_counts"`
	Messages            int64   `json:"messages"`
	InputBytes          int64   `json:"input_bytes"`
	WrittenBytes        int64   `json:"written_bytes"`
	WrittenPerMessage   float64 `json:"written_bytes_per_message"`
	WrittenVsInputRatio float64 `json:"written_vs_input_ratio"`
	WrittenPerDayBytes  int64   `json:"written_bytes_per_day"`
	// IngestWrittenBytes and CheckpointWrittenBytes are the agent's own
	// counts of the pages its ingest logs and checkpoint store wrote.
	IngestWrittenBytes     int64   `json:"ingest_written_bytes"`
	CheckpointWrittenBytes int64   `json:"checkpoint_written_bytes"`
	Syncs                  int64   `json:"syncs"`
	SyncsPerSec            float64 `json:"syncs_per_sec"`
	IngestSyncsPerSec      float64 `json:"ingest_syncs_per_sec"`
	CheckpointSyncsPerSec  float64 `json:"checkpoint_syncs_per_sec"`
	// Checkpoints completed in the window, and the checkpoint store's own
	// count of what it wrote and synced: a day, and a checkpoint.
	Checkpoints                    int64   `json:"checkpoints"`
	CheckpointWrittenPerDayBytes   int64   `json:"checkpoint_written_bytes_per_day"`
	CheckpointWrittenPerCheckpoint float64 `json:"checkpoint_written_bytes_per_checkpoint"`
	CheckpointSyncsPerCheckpoint   float64 `json:"checkpoint_syncs_per_checkpoint"`
	CPUMicrosPerMessage            float64 `json:"cpu_us_per_message"`
	CPUPercent                     float64 `json:"cpu_percent"`
	// AckP50MS and AckP99MS are the times from the broker sending a
	// reading to the agent's PUBACK for it, as the broker's side of the
	// wire sees them.
	AckP50MS float64 `json:"ack_p50_ms"`
	AckP99MS float64 `json:"ack_p99_ms"`
	// BareCPUMicrosPerMessage is the CPU per message of a bare paho
	// subscriber of the same readings, in a process of its own beside the
	// agent: the floor of receiving MQTT in Go at that rate; and
	// CPUVsBareRatio is the agent's over it.
	BareCPUMicrosPerMessage float64 `json:"bare_cpu_us_per_message,omitempty"`
	CPUVsBareRatio          float64 `json:"cpu_vs_bare_ratio,omitempty"`
	// Rounds is how many runs the figures are the medians of (each
	// figure its own), and the Min and Max fields the spread of the CPU
	// figures over them.
	Rounds                 int     `json:"rounds,omitempty"`
	CPUMicrosPerMessageMin float64 `json:"cpu_us_per_message_min,omitempty"`
	CPUMicrosPerMessageMax float64 `json:"cpu_us_per_message_max,omitempty"`
	CPUVsBareRatioMin      float64 `json:"cpu_vs_bare_ratio_min,omitempty"`
	CPUVsBareRatioMax      float64 `json:"cpu_vs_bare_ratio_max,omitempty"`
}

// WindowFigures are the busy load's figures through a broker of a window.
type WindowFigures struct {
	// Window is the broker's max_inflight_messages.
	Window int `json:"window"`
	WearFigures
}

// WearRun is one binary's figures under the three loads. Busy is the
// busy load through the widest of the windows; Windows, through each.
type WearRun struct {
	Binary    string          `json:"binary"`
	Reference WearFigures     `json:"reference"`
	Idle      WearFigures     `json:"idle"`
	Busy      WearFigures     `json:"busy"`
	Windows   []WindowFigures `json:"busy_windows,omitempty"`
}

// WearResult is the wear scenario's outcome: the measured cairn and,
// when asked, the baseline, measured in the same run, and the ratios of
// the two.
type WearResult struct {
	Devices  int      `json:"devices"`
	BusyRate int      `json:"busy_rate"`
	Cairn    WearRun  `json:"cairn"`
	Baseline *WearRun `json:"baseline,omitempty"`
	// BaselineVsCairn ratios: written per message, CPU per message (both
	// under the reference load), idle bytes a day, and busy CPU per
	// message.
	WrittenBaselineVsCairn float64 `json:"written_baseline_vs_cairn,omitempty"`
	CPUBaselineVsCairn     float64 `json:"cpu_baseline_vs_cairn,omitempty"`
	IdleBaselineVsCairn    float64 `json:"idle_baseline_vs_cairn,omitempty"`
	BusyCPUBaselineVsCairn float64 `json:"busy_cpu_baseline_vs_cairn,omitempty"`
	WithinTargets          bool    `json:"within_targets"`
}

func (*WearResult) Scenario() string { return "wear" }

func (r *WearResult) Rows() []Row {
	rows := []Row{{"reference load", fmt.Sprintf("%d devices, a reading of about %d bytes a second each, mosquitto's default limits", r.Devices, readingBytes)}}
	runs := []*WearRun{&r.Cairn}
	names := []string{"cairn"}
	if r.Baseline != nil {
		runs, names = append(runs, r.Baseline), append(names, "baseline")
	}
	for i, run := range runs {
		f, idle, busy := run.Reference, run.Idle, run.Busy
		counted, syncs, idleSyncs, busySyncs := uncounted, uncounted, uncounted, uncounted
		if f.AgentCounts {
			counted = fmt.Sprintf("%s B, %s B a message",
				num(ratio(float64(f.IngestWrittenBytes), float64(f.Messages))), num(ratio(float64(f.CheckpointWrittenBytes), float64(f.Messages))))
			syncs = fmt.Sprintf("%.2f (%.2f, %.2f) (target ≤ %d)", f.SyncsPerSec, f.IngestSyncsPerSec, f.CheckpointSyncsPerSec, TargetSyncsPerSec)
			idleSyncs = fmt.Sprintf("%.3f", idle.SyncsPerSec)
			busySyncs = fmt.Sprintf("%.1f (%.1f, %.1f)", busy.SyncsPerSec, busy.IngestSyncsPerSec, busy.CheckpointSyncsPerSec)
		}
		rows = append(rows,
			Row{names[i], run.Binary},
			Row{"  written per message", fmt.Sprintf("%s B, %.2f × the input (target ≤ %d)", num(f.WrittenPerMessage), f.WrittenVsInputRatio, TargetWrittenVsInput)},
			Row{"  written a day", mb(f.WrittenPerDayBytes)},
			Row{"  of it counted by the agent: ingest, checkpoints", counted},
			Row{"  syncs/s (ingest, checkpoints)", syncs},
			Row{"  checkpoint store: a day; a checkpoint", checkpointStore(f)},
			Row{"  CPU per message", fmt.Sprintf("%s µs, %.2f%% of a core (target ≤ %d µs); a bare paho subscriber %s µs",
				num(f.CPUMicrosPerMessage), f.CPUPercent, TargetCPUMicrosPerMessage, num(f.BareCPUMicrosPerMessage))},
			Row{"  CPU per message / bare paho's", fmt.Sprintf("%s (target ≤ %.1f)", cpuRatio(f), TargetReferenceVsBare)},
			Row{"  publish → PUBACK p50 / p99", fmt.Sprintf("%.1f / %.1f ms (target p99 ≤ %v)", f.AckP50MS, f.AckP99MS, mqttio.DefaultSyncInterval+TargetAckP99Extra)},
			Row{"  idle: written a day", fmt.Sprintf("%s (target ≤ %s), syncs/s %s", mb(idle.WrittenPerDayBytes), mb(TargetIdleBytesPerDay), idleSyncs)},
			Row{fmt.Sprintf("  busy (%d/s): CPU per message", r.BusyRate), fmt.Sprintf("%s µs (target ≤ %d); a bare paho subscriber %s µs",
				num(busy.CPUMicrosPerMessage), TargetBusyCPUMicros, num(busy.BareCPUMicrosPerMessage))},
			Row{"  busy: syncs/s (ingest, checkpoints)", busySyncs},
		)
		for _, w := range run.Windows {
			target := ""
			if w.Window == TargetBusyWide {
				target = fmt.Sprintf(" (target ≤ %.1f)", TargetBusyWideVsBare)
			}
			rows = append(rows,
				Row{fmt.Sprintf("  busy, window %d: CPU per message", w.Window), fmt.Sprintf("%s µs, %s × bare paho's%s", cpuMicros(w.WearFigures), cpuRatio(w.WearFigures), target)},
				Row{"    syncs/s (ingest, checkpoints)", fmt.Sprintf("%.1f (%.1f, %.1f)", w.SyncsPerSec, w.IngestSyncsPerSec, w.CheckpointSyncsPerSec)},
				Row{"    written per message", num(w.WrittenPerMessage) + " B"},
				Row{"    publish → PUBACK p50 / p99", fmt.Sprintf("%.1f / %.1f ms (target p99 ≤ %v)", w.AckP50MS, w.AckP99MS, mqttio.DefaultSyncInterval+TargetBusyAckP99Extra)},
			)
		}
	}
	if b := r.Baseline; b != nil {
		rows = append(rows, Row{"baseline / cairn", fmt.Sprintf("written %.1f×, CPU %.1f×, idle %.1f×, busy CPU %.1f×",
			r.WrittenBaselineVsCairn, r.CPUBaselineVsCairn, r.IdleBaselineVsCairn, r.BusyCPUBaselineVsCairn)})
		for i, w := range r.Cairn.Windows {
			if i < len(b.Windows) {
				bw := b.Windows[i]
				rows = append(rows, Row{fmt.Sprintf("  busy, window %d: CPU, syncs", w.Window), fmt.Sprintf("%.2f×, %.1f×",
					ratio(bw.CPUMicrosPerMessage, w.CPUMicrosPerMessage), ratio(bw.SyncsPerSec, w.SyncsPerSec))})
			}
		}
	}
	within := "yes"
	if !r.WithinTargets {
		within = "NO"
	}
	return append(rows, Row{"within targets", within})
}

// checkpointStore says what the checkpoint store wrote by its own count:
// a day, and a checkpoint (bytes and syncs).
func checkpointStore(f WearFigures) string {
	if !f.AgentCounts {
		return uncounted
	}
	return fmt.Sprintf("%s (target ≤ %s); %s B and %.1f syncs a checkpoint, %d checkpoints", mb(f.CheckpointWrittenPerDayBytes), mb(TargetCheckpointBytesPerDay),
		num(f.CheckpointWrittenPerCheckpoint), f.CheckpointSyncsPerCheckpoint, f.Checkpoints)
}

// cpuMicros shows the CPU per message, and its spread over the rounds.
func cpuMicros(f WearFigures) string {
	if f.Rounds > 1 {
		return fmt.Sprintf("%s (%s–%s)", num(f.CPUMicrosPerMessage), num(f.CPUMicrosPerMessageMin), num(f.CPUMicrosPerMessageMax))
	}
	return num(f.CPUMicrosPerMessage)
}

// cpuRatio shows the CPU per message over a bare subscriber's, and its
// spread over the rounds.
func cpuRatio(f WearFigures) string {
	if f.Rounds > 1 {
		return fmt.Sprintf("%.2f (%.2f–%.2f over %d rounds)", f.CPUVsBareRatio, f.CPUVsBareRatioMin, f.CPUVsBareRatioMax, f.Rounds)
	}
	return fmt.Sprintf("%.2f", f.CPUVsBareRatio)
}

// uncounted stands for the agent's own counts where it keeps none.
const uncounted = "not counted by this cairn"

// readingBytes is about the size of a reading's payload.
const readingBytes = 100

// Wear runs the wear scenario: Rounds times the reference load and idle,
// then the busy load through each window, for the baseline (if any) and
// the measured cairn in turn, and returns each figure's median.
func Wear(ctx context.Context, cfg WearConfig) (*WearResult, error) {
	cfg.setDefaults()
	if len(cfg.BareSubscriber) == 0 {
		return nil, errors.New("no bare subscriber to run beside the agent (WearConfig.BareSubscriber)")
	}
	type measured struct {
		name, binary string
		refs, idles  []WearFigures
		busy         [][]WearFigures // by window
	}
	runs := []*measured{{name: "cairn", binary: cfg.Binary}}
	if cfg.Baseline != "" {
		runs = append([]*measured{{name: "baseline", binary: cfg.Baseline}}, runs...)
	}
	for _, m := range runs {
		m.busy = make([][]WearFigures, len(cfg.BusyWindows))
	}
	for round := range cfg.Rounds {
		order := slices.Clone(runs)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		dir := func(m *measured, load string) string {
			return filepath.Join(cfg.Dir, m.name, fmt.Sprintf("%s-%d", load, round))
		}
		for _, m := range order {
			ref, idle, err := wearReference(ctx, cfg, m.binary, dir(m, "reference"))
			if err != nil {
				return nil, fmt.Errorf("%s %s: reference load: %w", m.name, m.binary, err)
			}
			m.refs, m.idles = append(m.refs, *ref), append(m.idles, *idle)
		}
		for i, window := range cfg.BusyWindows {
			for _, m := range order {
				busy, err := wearBusy(ctx, cfg, m.binary, dir(m, fmt.Sprintf("busy-%d", window)), window)
				if err != nil {
					return nil, fmt.Errorf("%s %s: busy load through a window of %d: %w", m.name, m.binary, window, err)
				}
				m.busy[i] = append(m.busy[i], *busy)
			}
		}
	}
	res := &WearResult{Devices: cfg.Devices, BusyRate: cfg.BusyRate}
	for _, m := range runs {
		run := WearRun{Binary: m.binary, Reference: medianFigures(m.refs), Idle: medianFigures(m.idles)}
		for i, window := range cfg.BusyWindows {
			run.Windows = append(run.Windows, WindowFigures{Window: window, WearFigures: medianFigures(m.busy[i])})
		}
		widest := 0
		for i, w := range cfg.BusyWindows {
			if w > cfg.BusyWindows[widest] {
				widest = i
			}
		}
		run.Busy = run.Windows[widest].WearFigures
		if m.name == "baseline" {
			res.Baseline = &run
		} else {
			res.Cairn = run
		}
	}
	run := res.Cairn
	if b := res.Baseline; b != nil {
		res.WrittenBaselineVsCairn = ratio(b.Reference.WrittenPerMessage, run.Reference.WrittenPerMessage)
		res.CPUBaselineVsCairn = ratio(b.Reference.CPUMicrosPerMessage, run.Reference.CPUMicrosPerMessage)
		res.IdleBaselineVsCairn = ratio(float64(b.Idle.WrittenPerDayBytes), float64(run.Idle.WrittenPerDayBytes))
		res.BusyCPUBaselineVsCairn = ratio(b.Busy.CPUMicrosPerMessage, run.Busy.CPUMicrosPerMessage)
	}
	f := run.Reference
	res.WithinTargets = f.WrittenVsInputRatio <= TargetWrittenVsInput && f.SyncsPerSec <= TargetSyncsPerSec &&
		f.CPUMicrosPerMessage <= TargetCPUMicrosPerMessage && time.Duration(f.AckP99MS*float64(time.Millisecond)) <= mqttio.DefaultSyncInterval+TargetAckP99Extra &&
		run.Idle.WrittenPerDayBytes <= TargetIdleBytesPerDay && run.Busy.CPUMicrosPerMessage <= TargetBusyCPUMicros &&
		f.CPUVsBareRatio <= TargetReferenceVsBare
	for _, w := range run.Windows {
		res.WithinTargets = res.WithinTargets && time.Duration(w.AckP99MS*float64(time.Millisecond)) <= mqttio.DefaultSyncInterval+TargetBusyAckP99Extra &&
			(w.Window != TargetBusyWide || w.CPUVsBareRatio <= TargetBusyWideVsBare)
	}
	return res, nil
}

// medianFigures are the median of each figure of runs (of one load, one
// binary), with the spread of the CPU figures; one run's figures as they
// are.
func medianFigures(runs []WearFigures) WearFigures {
	if len(runs) == 0 {
		return WearFigures{}
	}
	median := func(get func(*WearFigures) float64) (med, lo, hi float64) {
		v := make([]float64, len(runs))
		for i := range runs {
			v[i] = get(&runs[i])
		}
		slices.Sort(v)
		return v[len(v)/2], v[0], v[len(v)-1]
	}
	// The run of the median CPU, then every figure its own median.
	byCPU := slices.Clone(runs)
	slices.SortFunc(byCPU, func(a, b WearFigures) int { return cmp.Compare(a.CPUMicrosPerMessage, b.CPUMicrosPerMessage) })
	f := byCPU[len(byCPU)/2]
	f.Rounds = len(runs)
	f.CPUMicrosPerMessage, f.CPUMicrosPerMessageMin, f.CPUMicrosPerMessageMax = median(func(f *WearFigures) float64 { return f.CPUMicrosPerMessage })
	f.CPUVsBareRatio, f.CPUVsBareRatioMin, f.CPUVsBareRatioMax = median(func(f *WearFigures) float64 { return f.CPUVsBareRatio })
	for _, m := range []struct {
		dst *float64
		get func(*WearFigures) float64
	}{
		{&f.BareCPUMicrosPerMessage, func(f *WearFigures) float64 { return f.BareCPUMicrosPerMessage }},
		{&f.CPUPercent, func(f *WearFigures) float64 { return f.CPUPercent }},
		{&f.SyncsPerSec, func(f *WearFigures) float64 { return f.SyncsPerSec }},
		{&f.IngestSyncsPerSec, func(f *WearFigures) float64 { return f.IngestSyncsPerSec }},
		{&f.CheckpointSyncsPerSec, func(f *WearFigures) float64 { return f.CheckpointSyncsPerSec }},
		{&f.WrittenPerMessage, func(f *WearFigures) float64 { return f.WrittenPerMessage }},
		{&f.WrittenVsInputRatio, func(f *WearFigures) float64 { return f.WrittenVsInputRatio }},
		{&f.AckP50MS, func(f *WearFigures) float64 { return f.AckP50MS }},
		{&f.AckP99MS, func(f *WearFigures) float64 { return f.AckP99MS }},
	} {
		*m.dst, _, _ = median(m.get)
	}
	wpd, _, _ := median(func(f *WearFigures) float64 { return float64(f.WrittenPerDayBytes) })
	f.WrittenPerDayBytes = int64(wpd)
	return f
}

// wearPipeline is the reference pipeline, shaped like
// configs/gateway.yaml: a source of readings with event time, a 1-minute
// average per device, a sink; exactly-once, incremental checkpoints every
// 10 s. It takes the data directory, the broker's URL and client id, and
// extra broker settings.
const wearPipeline = `agent:
  data_dir: %s
brokers:
  plant:
    url: %s
    client_id: %s
%scheckpoints:
  interval: 10s
  mode: exactly-once
  incremental: true
sources:
  - id: telemetry
    broker: plant
    topics: ["wear/{device}/telemetry"]
    key: device
    value: temp
    time: ts
    out_of_orderness: 5s
operators:
  - id: per-device
    type: window
    inputs: [telemetry]
    key_by: key
    window: {kind: tumbling, size: %s, allowed_lateness: 30s}
    aggregate: %s
sinks:
  - id: upstream
    input: per-device
    broker: plant
    topic: "wear/out/{key}"
`

// wearReference runs the reference load and then idle.
func wearReference(ctx context.Context, cfg WearConfig, binary, dir string) (ref, idle *WearFigures, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	broker, err := mosquittotest.Run(dir, "", nil) // mosquitto's defaults: 20 in flight, 1000 queued
	if err != nil {
		return nil, nil, err
	}
	defer broker.Stop()
	u, err := url.Parse(broker.URL)
	if err != nil {
		return nil, nil, err
	}
	proxy, err := newAckProxy(u.Host)
	if err != nil {
		return nil, nil, err
	}
	defer proxy.Close()
	id := fmt.Sprintf("cairn-wear-%d-%d", os.Getpid(), time.Now().UnixNano())
	p, err := runAgent(ctx, binary, dir, fmt.Sprintf(wearPipeline, filepath.Join(dir, "data"), proxy.URL(), id, "", "1m", "avg"))
	if err != nil {
		return nil, nil, err
	}
	defer p.kill()
	bare, err := startBare(ctx, cfg.BareSubscriber, u.Host)
	if err != nil {
		return nil, nil, err
	}
	defer bare.finish()
	pub, err := startReadings(ctx, broker.URL, id+"-devices", cfg.Devices, cfg.Devices)
	if err != nil {
		return nil, nil, err
	}
	defer pub.stop()
	if err := p.probeSource(ctx); err != nil {
		return nil, nil, err
	}
	// From a checkpoint on: the checkpoints' writes are part of the load.
	start, err := p.afterCheckpoint(ctx)
	if err != nil {
		return nil, nil, err
	}
	proxy.take()
	if ref, err = measure(ctx, p, bare, pub, start, cfg.Duration); err != nil {
		return nil, nil, err
	}
	delays := proxy.take()
	ref.AckP50MS, ref.AckP99MS = ms(percentile(delays, 50)), ms(percentile(delays, 99))

	// Idle: once everything is processed and the load's work is all
	// stored: the first checkpoint after the last reading holds its
	// state, the second what committing the first changed (the sink's
	// transactions, the log trimmed); from then on, nothing changes.
	if _, err := p.waitStatus(ctx, time.Minute, "the readings to be processed", func(st *api.Status) bool { return st.IngestLag == 0 }); err != nil {
		return nil, nil, err
	}
	for range 2 {
		if start, err = p.afterCheckpoint(ctx); err != nil {
			return nil, nil, err
		}
	}
	if err := sleep(ctx, cfg.IdleDuration); err != nil {
		return nil, nil, err
	}
	end, err := p.snapshot()
	if err != nil {
		return nil, nil, err
	}
	idle = figures(start, end, 0)
	return ref, idle, p.stop()
}

// wearBusy runs the busy load through a mosquitto whose in-flight window
// is window, with cairn's defaults.
func wearBusy(ctx context.Context, cfg WearConfig, binary, dir string, window int) (*WearFigures, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	broker, err := mosquittotest.Run(dir, fmt.Sprintf("max_inflight_messages %d\nmax_queued_messages 1000000\n", window), nil)
	if err != nil {
		return nil, err
	}
	defer broker.Stop()
	u, err := url.Parse(broker.URL)
	if err != nil {
		return nil, err
	}
	proxy, err := newAckProxy(u.Host)
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	id := fmt.Sprintf("cairn-wear-busy-%d-%d", os.Getpid(), time.Now().UnixNano())
	p, err := runAgent(ctx, binary, dir, fmt.Sprintf(strings.Replace(wearPipeline, "interval: 10s", "interval: 1s", 1),
		filepath.Join(dir, "data"), proxy.URL(), id, "", "1s", "count"))
	if err != nil {
		return nil, err
	}
	defer p.kill()
	bare, err := startBare(ctx, cfg.BareSubscriber, u.Host)
	if err != nil {
		return nil, err
	}
	defer bare.finish()
	pub, err := startReadings(ctx, broker.URL, id+"-devices", cfg.BusyDevices, cfg.BusyRate)
	if err != nil {
		return nil, err
	}
	defer pub.stop()
	if err := p.probeSource(ctx); err != nil {
		return nil, err
	}
	start, err := p.afterCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	proxy.take()
	busy, err := measure(ctx, p, bare, pub, start, cfg.BusyDuration)
	if err != nil {
		return nil, err
	}
	delays := proxy.take()
	busy.AckP50MS, busy.AckP99MS = ms(percentile(delays, 50)), ms(percentile(delays, 99))
	return busy, p.stop()
}

// measure measures the agent and the bare subscriber for d from start,
// with the readings of pub, which it then stops. The bare subscriber's CPU
// per message is over the messages it heard in the window: under load (or
// emulation) it may lag behind the agent, and then has done less of the
// window's work than the agent's count says.
func measure(ctx context.Context, p *agentProc, bare *bareProc, pub *readings, start wearSnapshot, d time.Duration) (*WearFigures, error) {
	bareStart, err := bare.sample()
	if err != nil {
		return nil, err
	}
	if err := sleep(ctx, d); err != nil {
		return nil, err
	}
	end, err := p.snapshot()
	if err != nil {
		return nil, err
	}
	bareEnd, err := bare.sample()
	if err != nil {
		return nil, err
	}
	if err := pub.stop(); err != nil {
		return nil, err
	}
	f := figures(start, end, pub.meanPayload())
	heard := bareEnd.heard - bareStart.heard
	if heard <= 0 {
		return nil, fmt.Errorf("the bare subscriber heard nothing in the window (the agent %d readings)", f.Messages)
	}
	f.BareCPUMicrosPerMessage = ratio(float64((bareEnd.cpu - bareStart.cpu).Microseconds()), float64(heard))
	f.CPUVsBareRatio = ratio(f.CPUMicrosPerMessage, f.BareCPUMicrosPerMessage)
	return f, nil
}

// bareProc is a bare paho subscriber of the readings, a process of its
// own so that its CPU time is its own (WearConfig.BareSubscriber). It
// reaches the broker through a proxy of its own, as the agent does
// through the one that times its PUBACKs, so that both receive the
// readings the same way.
type bareProc struct {
	cmd   *exec.Cmd
	proxy *ackProxy
	lines chan string // what it writes, a line at a time; closed at its end
	done  bool
}

// startBare starts the command line command of a bare subscriber of the
// readings of the broker at host:port broker.
func startBare(ctx context.Context, command []string, broker string) (*bareProc, error) {
	proxy, err := newAckProxy(broker)
	if err != nil {
		return nil, err
	}
	args := append(command[1:len(command):len(command)], "--broker", proxy.URL(), "--topic", "wear/+/telemetry")
	b := &bareProc{cmd: exec.CommandContext(ctx, command[0], args...), proxy: proxy, lines: make(chan string, 16)}
	b.cmd.Stderr = os.Stderr
	out, err := b.cmd.StdoutPipe()
	if err == nil {
		err = b.cmd.Start()
	}
	if err != nil {
		proxy.Close()
		return nil, err
	}
	go func() {
		defer close(b.lines)
		for sc := bufio.NewScanner(out); sc.Scan(); {
			b.lines <- sc.Text()
		}
	}()
	return b, nil
}

// bareSample is the bare subscriber's count of readings and its CPU time,
// taken together.
type bareSample struct {
	heard int64
	cpu   time.Duration
}

// sample asks the subscriber for its count (SIGUSR1) and reads its CPU
// time once it has answered.
func (b *bareProc) sample() (bareSample, error) {
	if err := b.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return bareSample{}, fmt.Errorf("asking the bare subscriber for its count: %w", err)
	}
	var s bareSample
	select {
	case line, ok := <-b.lines:
		n, err := strconv.ParseInt(line, 10, 64)
		if !ok || err != nil {
			return s, fmt.Errorf("the bare subscriber answered %q for its count", line)
		}
		s.heard = n
	case <-time.After(10 * time.Second):
		return s, errors.New("the bare subscriber gave no count within 10s")
	}
	cpu, err := procfs.CPU(b.cmd.Process.Pid)
	s.cpu = cpu
	return s, err
}

// finish stops the subscriber.
func (b *bareProc) finish() {
	if !b.done {
		b.done = true
		b.cmd.Process.Signal(syscall.SIGTERM)
		for range b.lines {
		}
		b.cmd.Wait()
		b.proxy.Close()
	}
}

// wearSnapshot is what a measurement window starts or ends with.
type wearSnapshot struct {
	at                               time.Time
	counts                           bool // the agent counts its disk writes
	written                          int64
	cpu                              time.Duration
	messages                         int64
	checkpoints                      int64 // completed
	ingestSyncs, checkpointSyncs     int64
	ingestWritten, checkpointWritten int64
}

// snapshot reads the agent's counters and the kernel's.
func (p *agentProc) snapshot() (wearSnapshot, error) {
	st, err := p.status()
	if err != nil {
		return wearSnapshot{}, err
	}
	s := wearSnapshot{at: time.Now(), messages: st.RecordsOut("telemetry"), checkpoints: st.Checkpoints.Completed}
	s.counts = len(st.Disk.Files) > 0
	for _, f := range st.Disk.Files {
		switch f.Name {
		case "ingest":
			s.ingestSyncs, s.ingestWritten = f.Syncs, f.WrittenBytes
		case "checkpoints":
			s.checkpointSyncs, s.checkpointWritten = f.Syncs, f.WrittenBytes
		}
	}
	pid := p.cmd.Process.Pid
	if s.written, err = procfs.WriteBytes(pid); err != nil {
		return s, err
	}
	s.cpu, err = procfs.CPU(pid)
	return s, err
}

// afterCheckpoint waits for the next checkpoint to complete and returns a
// snapshot taken then.
func (p *agentProc) afterCheckpoint(ctx context.Context) (wearSnapshot, error) {
	st, err := p.status()
	if err != nil {
		return wearSnapshot{}, err
	}
	done := st.Checkpoints.Completed
	if _, err := p.waitStatus(ctx, time.Minute, "a checkpoint", func(st *api.Status) bool { return st.Checkpoints.Completed > done }); err != nil {
		return wearSnapshot{}, err
	}
	return p.snapshot()
}

// probeSource waits until the agent's source has read a reading.
func (p *agentProc) probeSource(ctx context.Context) error {
	_, err := p.waitStatus(ctx, time.Minute, "the source to read", func(st *api.Status) bool { return st.RecordsOut("telemetry") > 0 })
	return err
}

// figures are what the agent did between two snapshots, with readings of
// payload bytes on average.
func figures(a, b wearSnapshot, payload float64) *WearFigures {
	d := b.at.Sub(a.at)
	f := &WearFigures{Seconds: d.Seconds(), AgentCounts: b.counts, Messages: b.messages - a.messages, WrittenBytes: b.written - a.written}
	f.InputBytes = int64(float64(f.Messages) * payload)
	f.IngestWrittenBytes, f.CheckpointWrittenBytes = b.ingestWritten-a.ingestWritten, b.checkpointWritten-a.checkpointWritten
	f.Syncs = b.ingestSyncs - a.ingestSyncs + b.checkpointSyncs - a.checkpointSyncs
	f.SyncsPerSec = float64(f.Syncs) / d.Seconds()
	f.IngestSyncsPerSec = float64(b.ingestSyncs-a.ingestSyncs) / d.Seconds()
	f.CheckpointSyncsPerSec = float64(b.checkpointSyncs-a.checkpointSyncs) / d.Seconds()
	f.Checkpoints = b.checkpoints - a.checkpoints
	f.CheckpointWrittenPerDayBytes = int64(float64(f.CheckpointWrittenBytes) / d.Seconds() * 86400)
	f.CheckpointWrittenPerCheckpoint = ratio(float64(f.CheckpointWrittenBytes), float64(f.Checkpoints))
	f.CheckpointSyncsPerCheckpoint = ratio(float64(b.checkpointSyncs-a.checkpointSyncs), float64(f.Checkpoints))
	f.WrittenPerMessage = ratio(float64(f.WrittenBytes), float64(f.Messages))
	f.WrittenVsInputRatio = ratio(float64(f.WrittenBytes), float64(f.InputBytes))
	f.WrittenPerDayBytes = int64(float64(f.WrittenBytes) / d.Seconds() * 86400)
	cpu := b.cpu - a.cpu
	f.CPUMicrosPerMessage = ratio(float64(cpu.Microseconds()), float64(f.Messages))
	f.CPUPercent = 100 * cpu.Seconds() / d.Seconds()
	return f
}

// sleep waits d, unless ctx ends first: the length of a measurement.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readings publishes sensor readings at a steady rate.
type readings struct {
	client  paho.Client
	cancel  context.CancelFunc
	done    chan error
	sent    atomic.Int64
	payload atomic.Int64 // bytes of payload sent
}

// startReadings publishes, from a client of its own, rate readings a
// second spread over devices devices in turn, each about readingBytes of
// JSON with its event time (ts, the wall clock), at QoS 1, until stopped.
func startReadings(ctx context.Context, broker, clientID string, devices, rate int) (*readings, error) {
	c, err := connect(broker, clientID)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &readings{client: c, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- r.run(ctx, devices, rate) }()
	return r, nil
}

func (r *readings) run(ctx context.Context, devices, rate int) error {
	return publishPaced(ctx, r.client, rate, -1, func(n int) (string, string) {
		dev := n % devices
		p := fmt.Sprintf(`{"device":"dev-%03d","temp":%d.%02d,"humidity":%d.%d,"battery":3.%02d,"seq":%d,"ts":%d}`,
			dev, 15+n%20, n%100, 30+n%40, n%10, n%100, n, time.Now().UnixMilli())
		r.sent.Add(1)
		r.payload.Add(int64(len(p)))
		return fmt.Sprintf("wear/dev-%03d/telemetry", dev), p
	})
}

// meanPayload is the average bytes of a reading's payload.
func (r *readings) meanPayload() float64 {
	return ratio(float64(r.payload.Load()), float64(r.sent.Load()))
}

// stop stops publishing, waits for the broker's acknowledgements of what
// was published, and disconnects.
func (r *readings) stop() error {
	if r.cancel == nil {
		return nil
	}
	r.cancel()
	r.cancel = nil
	err := <-r.done
	r.client.Disconnect(100)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// BareSubscriber subscribes to topic on broker at QoS 1 with a paho client
// that does nothing but count (paho acknowledges each message), until ctx
// ends: the floor of receiving MQTT in Go, to measure cairn against. Each
// value on asked makes it write the count so far to out, a line; the
// count at the end is the last line.
func BareSubscriber(ctx context.Context, broker, topic string, asked <-chan os.Signal, out io.Writer) error {
	var n atomic.Int64
	c, err := connect(broker, fmt.Sprintf("cairn-bench-bare-%d", os.Getpid()))
	if err != nil {
		return err
	}
	defer c.Disconnect(100)
	tok := c.Subscribe(topic, 1, func(paho.Client, paho.Message) { n.Add(1) })
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return fmt.Errorf("subscribe: %v", tok.Error())
	}
	for {
		select {
		case <-asked:
			fmt.Fprintln(out, n.Load())
		case <-ctx.Done():
			fmt.Fprintln(out, n.Load())
			return nil
		}
	}
}
