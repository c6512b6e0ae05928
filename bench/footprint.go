package bench

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/loopback"
)

// The footprint targets of a gateway build (issue 8), in decimal
// megabytes: a stripped binary (go build -ldflags='-s -w', CGO_ENABLED=0),
// the resident memory of `cairn run` idle with a one-source pipeline, and
// while it processes a steady MQTT load over 100,000 keys.
const (
	TargetBinaryBytes  = 15_000_000
	TargetIdleRSSBytes = 15_000_000
	TargetLoadRSSBytes = 64_000_000
)

// FootprintConfig sizes the footprint scenario.
type FootprintConfig struct {
	// Binary is the cairn executable to measure and run; required.
	Binary string
	// Dir receives the pipeline files and the agents' data; required.
	Dir string
	// Broker is the URL of the broker the agent subscribes to and the load
	// is published to; empty: the agent's embedded broker, whose memory
	// then counts in the agent's.
	Broker string
	// IdleCheckpoints is how many checkpoints (one every 100 ms) the idle
	// agent completes, with no input, before its figures are read; default
	// 60.
	IdleCheckpoints int
	// Keys distinct devices send Messages readings at Rate per second to
	// the loaded agent (checkpoints every second); defaults 100,000,
	// 150,000 and 10,000.
	Keys     int
	Messages int
	Rate     int
	// MemoryLimit, if set, runs the load a second time with the agent's
	// agent.memory_limit at it (such as FootprintMemoryLimit), since that is
	// how a gateway holds the collector's heap below twice the live data.
	MemoryLimit string
}

// FootprintMemoryLimit is the memory limit `cairn-bench footprint` runs the
// load with by default: about 1.7 times the live heap this load peaks at,
// as docs/pipelines.md advises for agent.memory_limit.
const FootprintMemoryLimit = "44MiB"

// FootprintResult is the size of the binary and the resident memory (from
// /proc/<pid>/status) of two `cairn run` processes running
// FootprintPipeline: one idle, one under a steady MQTT load.
type FootprintResult struct {
	// Broker is "embedded" (in the agent) or the external broker's URL.
	Broker      string `json:"broker"`
	BinaryBytes int64  `json:"binary_bytes"`
	// BinaryStripped says the binary has no symbol table (linked with
	// -ldflags='-s -w', which since Go 1.22 drops DWARF too), as the
	// target assumes.
	BinaryStripped bool `json:"binary_stripped"`
	// Idle figures: resident set (VmRSS), its anonymous and file-backed
	// parts (the file-backed part is mostly the binary's own code), and
	// its high-water mark (VmHWM).
	IdleCheckpoints int   `json:"idle_checkpoints"`
	IdleRSSBytes    int64 `json:"idle_rss_bytes"`
	IdleAnonBytes   int64 `json:"idle_anon_bytes"`
	IdleFileBytes   int64 `json:"idle_file_bytes"`
	IdleHWMBytes    int64 `json:"idle_hwm_bytes"`
	// IdleWorkingSetBytes is what of the resident set the idle agent
	// touched over its checkpoints (smaps_rollup's Referenced, counted
	// from the pipeline's start by clear_refs): what it needs resident.
	// The rest is mostly the binary's pages touched once while starting,
	// clean, which the kernel takes back under memory pressure but VmRSS
	// counts. Zero where the kernel does not tell.
	IdleWorkingSetBytes int64 `json:"idle_working_set_bytes"`
	// Load figures: the rates of publishing and of processing (readings
	// over the time from the first published until the agent had read all
	// and published the averages of the first window), the largest
	// resident set sampled (every 100 ms) meanwhile, its parts, the
	// high-water mark at the end, and the largest checkpoint seen.
	Keys                  int     `json:"keys"`
	Messages              int     `json:"messages"`
	PublishMessagesPerSec float64 `json:"publish_messages_per_sec"`
	ProcessMessagesPerSec float64 `json:"process_messages_per_sec"`
	LoadRSSBytes          int64   `json:"load_rss_bytes"`
	LoadAnonBytes         int64   `json:"load_anon_bytes"`
	LoadFileBytes         int64   `json:"load_file_bytes"`
	LoadHWMBytes          int64   `json:"load_hwm_bytes"`
	// LoadHeapLiveBytes is the largest live heap the agent reported (its
	// status's memory, every second): the data the resident memory holds,
	// which Go's collector lets grow to about twice as much unless a
	// memory limit holds it.
	LoadHeapLiveBytes      int64 `json:"load_heap_live_bytes"`
	LargestCheckpointBytes int64 `json:"largest_checkpoint_bytes"`
	// LoadCPUPerReadingMicros is the CPU time (user and system, from
	// /proc/<pid>/stat) the agent process spent from the first reading
	// published until all were processed, over the readings: everything
	// a reading costs the agent, its embedded broker's share included.
	LoadCPUPerReadingMicros float64 `json:"load_cpu_per_reading_us"`
	// The second load run, with agent.memory_limit at MemoryLimit (empty:
	// not run): its processing rate, high-water mark and largest live
	// heap, and its rate over the first run's. The rates can differ only
	// where the agent falls behind the load's pace.
	MemoryLimit                  string  `json:"memory_limit,omitempty"`
	LimitedProcessMessagesPerSec float64 `json:"limited_process_messages_per_sec,omitempty"`
	LimitedLoadHWMBytes          int64   `json:"limited_load_hwm_bytes,omitempty"`
	LimitedLoadHeapLiveBytes     int64   `json:"limited_load_heap_live_bytes,omitempty"`
	LimitedVsUnlimitedRateRatio  float64 `json:"limited_vs_unlimited_rate_ratio,omitempty"`
	// LoadVsIdleRatio is LoadHWMBytes over IdleRSSBytes.
	LoadVsIdleRatio float64 `json:"load_vs_idle_ratio"`
	// The targets, and whether the figures meet them: binary size only
	// counts when the binary is stripped, and the load's target is met by
	// either run.
	TargetBinaryBytes  int64 `json:"target_binary_bytes"`
	TargetIdleRSSBytes int64 `json:"target_idle_rss_bytes"`
	TargetLoadRSSBytes int64 `json:"target_load_rss_bytes"`
	WithinTargets      bool  `json:"within_targets"`
}

func (*FootprintResult) Scenario() string { return "footprint" }

func (r *FootprintResult) Rows() []Row {
	stripped := "stripped"
	if !r.BinaryStripped {
		stripped = "not stripped: build with -ldflags='-s -w' for the target"
	}
	within := "yes"
	if !r.WithinTargets {
		within = "NO"
	}
	workingSet := "unknown: /proc/<pid>/clear_refs is not writable here"
	if r.IdleWorkingSetBytes > 0 {
		workingSet = mb(r.IdleWorkingSetBytes)
	}
	rows := []Row{
		{"broker", r.Broker},
		{"binary", fmt.Sprintf("%s, %s (target %s)", mb(r.BinaryBytes), stripped, mb(r.TargetBinaryBytes))},
		{fmt.Sprintf("idle RSS after %d checkpoints", r.IdleCheckpoints), fmt.Sprintf("%s (target %s)", mb(r.IdleRSSBytes), mb(r.TargetIdleRSSBytes))},
		{"  anonymous / file-backed", mb(r.IdleAnonBytes) + " / " + mb(r.IdleFileBytes)},
		{"  touched while idle (working set)", workingSet},
		{fmt.Sprintf("load: %s readings over %s keys", num(float64(r.Messages)), num(float64(r.Keys))),
			fmt.Sprintf("published at %s/s, processed at %s/s", num(r.PublishMessagesPerSec), num(r.ProcessMessagesPerSec))},
		{"load CPU a reading (agent and its broker)", fmt.Sprintf("%.1f µs", r.LoadCPUPerReadingMicros)},
		{"load RSS, largest sampled", mb(r.LoadRSSBytes)},
		{"  anonymous / file-backed", mb(r.LoadAnonBytes) + " / " + mb(r.LoadFileBytes)},
		{"load RSS high-water mark (VmHWM)", fmt.Sprintf("%s (target %s)", mb(r.LoadHWMBytes), mb(r.TargetLoadRSSBytes))},
		{"  live heap, largest sampled", mb(r.LoadHeapLiveBytes)},
		{"largest checkpoint under load", mb(r.LargestCheckpointBytes)},
	}
	if r.MemoryLimit != "" {
		rows = append(rows,
			Row{"with memory_limit: " + r.MemoryLimit, fmt.Sprintf("processed at %s/s (%.2f of the rate without)", num(r.LimitedProcessMessagesPerSec), r.LimitedVsUnlimitedRateRatio)},
			Row{"  load RSS high-water mark (VmHWM)", fmt.Sprintf("%s (target %s)", mb(r.LimitedLoadHWMBytes), mb(r.TargetLoadRSSBytes))},
			Row{"  live heap, largest sampled", mb(r.LimitedLoadHeapLiveBytes)})
	}
	return append(rows, []Row{
		{"load / idle", fmt.Sprintf("%.2f", r.LoadVsIdleRatio)},
		{"within targets", within},
	}...)
}

// FootprintPipeline is the pipeline of the footprint scenario, shaped like
// configs/gateway.yaml: one MQTT source with the durable ingest log and
// event time from the readings, a per-device average over 1-minute
// windows, and a sink publishing the averages. It is a format string
// taking the data directory, more agent settings (the memory limit's line,
// or none), the broker's settings (embeddedBroker or externalBroker) and
// the checkpoint interval.
const FootprintPipeline = `agent:
  data_dir: %s
%sbrokers:
  local:
    %s
checkpoints:
  interval: %s
  incremental: true
sources:
  - id: readings
    broker: local
    topics:
      - "bench/{device}/telemetry"
    key: device
    value: temp
    time: ts
    out_of_orderness: 5s
operators:
  - id: per-device
    type: window
    inputs: [readings]
    key_by: key
    window: {kind: tumbling, size: 1m}
    aggregate: avg
sinks:
  - id: averages
    input: per-device
    broker: local
    topic: "bench/avg/{key}"
`

// The broker settings of FootprintPipeline, format strings taking the
// embedded broker's address, or the external broker's URL and a client
// id of the run's own.
const (
	// The averages subscriber is sent all 100,000 averages of the first
	// window at the checkpoint that commits them: the embedded broker
	// holds them for it as a broker configured for such a consumer would
	// (its defaults drop what is over 1000 messages or 4 MiB, as
	// mosquitto's do).
	embeddedBroker = "embedded: true\n    listen: %s\n" +
		"    limits: {max_queued_messages: 200000, max_queued_bytes: 512MiB, max_queued_bytes_total: 512MiB, max_queued_bytes_per_address: 512MiB}"
	externalBroker = "url: %s\n    client_id: %s"
)

// Footprint measures the binary, runs it idle as `cairn run` on
// FootprintPipeline with checkpoints every 100 ms (so that the idle
// process reaches its steady state soon), stops it, and runs it again with
// checkpoints every second under load.
func Footprint(ctx context.Context, cfg FootprintConfig) (*FootprintResult, error) {
	if cfg.IdleCheckpoints <= 0 {
		cfg.IdleCheckpoints = 60
	}
	if cfg.Keys <= 0 {
		cfg.Keys = 100_000
	}
	if cfg.Messages <= 0 {
		cfg.Messages = 150_000
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 10_000
	}
	if cfg.Messages < cfg.Keys {
		return nil, fmt.Errorf("footprint: %d messages cannot cover %d keys", cfg.Messages, cfg.Keys)
	}
	res := &FootprintResult{Broker: cfg.Broker, IdleCheckpoints: cfg.IdleCheckpoints, Keys: cfg.Keys, Messages: cfg.Messages,
		TargetBinaryBytes: TargetBinaryBytes, TargetIdleRSSBytes: TargetIdleRSSBytes, TargetLoadRSSBytes: TargetLoadRSSBytes}
	if res.Broker == "" {
		res.Broker = "embedded"
	}
	fi, err := os.Stat(cfg.Binary)
	if err != nil {
		return nil, err
	}
	res.BinaryBytes = fi.Size()
	res.BinaryStripped = stripped(cfg.Binary)

	idle, err := startAgent(ctx, cfg.Binary, filepath.Join(cfg.Dir, "idle"), cfg.Broker, "100ms", "")
	if err != nil {
		return nil, err
	}
	defer idle.kill()
	referenced := clearReferenced(idle.cmd.Process.Pid)
	if _, err := idle.waitStatus(ctx, time.Duration(cfg.IdleCheckpoints)*time.Second+30*time.Second, fmt.Sprintf("%d checkpoints", cfg.IdleCheckpoints),
		func(st *api.Status) bool { return st.Checkpoints.Completed >= int64(cfg.IdleCheckpoints) }); err != nil {
		return nil, err
	}
	m, err := readMemory(idle.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	res.IdleRSSBytes, res.IdleAnonBytes, res.IdleFileBytes, res.IdleHWMBytes = m.rss, m.anon, m.file, m.hwm
	if referenced {
		if res.IdleWorkingSetBytes, err = readReferenced(idle.cmd.Process.Pid); err != nil {
			return nil, err
		}
	}
	if err := idle.stop(); err != nil {
		return nil, err
	}

	load, err := runLoad(ctx, cfg, filepath.Join(cfg.Dir, "load"), "")
	if err != nil {
		return nil, err
	}
	res.PublishMessagesPerSec, res.ProcessMessagesPerSec = load.publishPerSec, load.processPerSec
	res.LoadCPUPerReadingMicros = float64(load.cpu.Microseconds()) / float64(cfg.Messages)
	res.LoadRSSBytes, res.LoadAnonBytes, res.LoadFileBytes, res.LoadHWMBytes = load.mem.rss, load.mem.anon, load.mem.file, load.mem.hwm
	res.LoadHeapLiveBytes, res.LargestCheckpointBytes = load.heapLive, load.checkpoint
	loadWithin := res.LoadHWMBytes <= TargetLoadRSSBytes
	if cfg.MemoryLimit != "" {
		limited, err := runLoad(ctx, cfg, filepath.Join(cfg.Dir, "limited"), cfg.MemoryLimit)
		if err != nil {
			return nil, err
		}
		res.MemoryLimit = cfg.MemoryLimit
		res.LimitedProcessMessagesPerSec, res.LimitedLoadHWMBytes = limited.processPerSec, limited.mem.hwm
		res.LimitedLoadHeapLiveBytes = limited.heapLive
		res.LimitedVsUnlimitedRateRatio = ratio(limited.processPerSec, load.processPerSec)
		loadWithin = loadWithin || res.LimitedLoadHWMBytes <= TargetLoadRSSBytes
	}
	res.LoadVsIdleRatio = ratio(float64(res.LoadHWMBytes), float64(res.IdleRSSBytes))
	res.WithinTargets = res.BinaryStripped && res.BinaryBytes <= TargetBinaryBytes &&
		res.IdleRSSBytes <= TargetIdleRSSBytes && loadWithin
	return res, nil
}

// stripped reports whether the ELF executable bin has no symbol table.
// It reads the file: with -trimpath the build information omits -ldflags.
func stripped(bin string) bool {
	f, err := elf.Open(bin)
	if err != nil {
		return false
	}
	defer f.Close()
	return f.Section(".symtab") == nil
}

// loadFigures are what one loaded run measured: the rates of publishing and
// of processing, the largest resident set sampled (mem, with the
// high-water mark at the end), and the largest live heap and checkpoint
// the agent reported.
type loadFigures struct {
	publishPerSec, processPerSec float64
	cpu                          time.Duration // the agent's CPU time meanwhile
	mem                          memory
	heapLive, checkpoint         int64
}

// runLoad starts an agent in dir with checkpoints every second and
// memoryLimit (if set), runs the load through it and stops it.
func runLoad(ctx context.Context, cfg FootprintConfig, dir, memoryLimit string) (*loadFigures, error) {
	p, err := startAgent(ctx, cfg.Binary, dir, cfg.Broker, "1s", memoryLimit)
	if err != nil {
		return nil, err
	}
	defer p.kill()
	f, err := p.load(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return f, p.stop()
}

// agentProc is a `cairn run` process.
type agentProc struct {
	cmd     *exec.Cmd
	dataDir string
	broker  string // its embedded broker's URL
	logPath string
	exited  chan struct{} // closed when the process has ended
	client  *api.Client
}

// startAgent starts `binary run` on FootprintPipeline in dir, with broker
// (a URL) or else an embedded broker on a free port, and memoryLimit as its
// agent.memory_limit (if set), and waits until the pipeline runs.
func startAgent(ctx context.Context, binary, dir, broker, interval, memoryLimit string) (*agentProc, error) {
	dataDir := filepath.Join(dir, "data")
	settings := fmt.Sprintf(externalBroker, broker, fmt.Sprintf("cairn-bench-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if broker == "" {
		port, err := loopback.FreePort()
		if err != nil {
			return nil, err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		broker, settings = "tcp://"+addr, fmt.Sprintf(embeddedBroker, addr)
	}
	agent := ""
	if memoryLimit != "" {
		agent = fmt.Sprintf("  memory_limit: %s\n", memoryLimit)
	}
	p, err := runAgent(ctx, binary, dir, fmt.Sprintf(FootprintPipeline, dataDir, agent, settings, interval))
	if err != nil {
		return nil, err
	}
	p.broker = broker
	return p, nil
}

// runAgent starts `binary run` on pipeline, a pipeline file's text whose
// agent.data_dir is dir/data, and waits until the pipeline runs. Its log
// goes to dir/agent.log through a pipe: what the bench writes of it is not
// the agent's writing.
func runAgent(ctx context.Context, binary, dir, pipeline string) (*agentProc, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &agentProc{dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "agent.log"), exited: make(chan struct{})}
	file := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(file, []byte(pipeline), 0o600); err != nil {
		return nil, err
	}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	copied := make(chan struct{})
	go func() {
		io.Copy(logFile, pr)
		pr.Close()
		logFile.Close()
		close(copied)
	}()
	p.cmd = exec.CommandContext(ctx, binary, "run", "-c", file)
	// The pipeline alone sets the memory limit: none from the bench's
	// environment, and the collector's default pace.
	p.cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "GOMEMLIMIT=") || strings.HasPrefix(kv, "GOGC=")
	})
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	err = p.cmd.Start()
	pw.Close()
	if err != nil {
		return nil, err
	}
	go func() {
		p.cmd.Wait()
		<-copied
		close(p.exited)
	}()
	p.client = api.NewClient(filepath.Join(p.dataDir, "cairn.sock")) // the control API's documented socket
	if _, err := p.waitStatus(ctx, 30*time.Second, "the pipeline to run", func(st *api.Status) bool { return st.State == "running" }); err != nil {
		p.kill()
		return nil, err
	}
	return p, nil
}

// status asks the agent for its status.
func (p *agentProc) status() (*api.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := p.client.Status(ctx)
	return &st, err
}

// waitStatus polls the agent's status until ok holds, failing after d or
// if the agent exits.
func (p *agentProc) waitStatus(ctx context.Context, d time.Duration, what string, ok func(*api.Status) bool) (*api.Status, error) {
	deadline := time.Now().Add(d)
	for {
		st, err := p.status()
		if err == nil && ok(st) {
			return st, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("waited %v for %s (last status error: %v); agent log %s", d, what, err, p.logPath)
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("the agent exited while waiting for %s: %v; see %s", what, p.cmd.ProcessState, p.logPath)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// eventStart is the event time of the first reading: the start of a
// minute, so that the first Keys readings fill one window.
const eventStart int64 = 28_333_333 * 60_000

// load publishes cfg.Messages readings over cfg.Keys devices at cfg.Rate
// to the agent's broker and waits until the agent has read them all and
// published the averages of the first window, sampling its memory
// meanwhile. Reading i is from device i mod Keys at event time
// eventStart + i·60s/Keys: every device has a reading in the first minute,
// and the readings after the first Keys move the watermark past its end,
// so the window fires for every device while the load goes on.
func (p *agentProc) load(ctx context.Context, cfg FootprintConfig) (*loadFigures, error) {
	id := fmt.Sprintf("cairn-bench-footprint-%d-%d", os.Getpid(), time.Now().UnixNano())
	pub, err := connect(p.broker, id+"-publisher")
	if err != nil {
		return nil, err
	}
	defer pub.Disconnect(100)
	averages, err := connect(p.broker, id+"-averages")
	if err != nil {
		return nil, err
	}
	defer averages.Disconnect(100)
	var mu sync.Mutex
	keys := make(map[string]bool)
	tok := averages.Subscribe("bench/avg/+", 1, func(_ paho.Client, m paho.Message) {
		mu.Lock()
		keys[m.Topic()] = true
		mu.Unlock()
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return nil, fmt.Errorf("footprint: subscribe to the averages: %v", tok.Error())
	}
	// The source subscribes once connected: probe until it hears.
	if err := p.probe(ctx, pub); err != nil {
		return nil, err
	}
	before, err := p.status()
	if err != nil {
		return nil, err
	}
	base := sourceRecords(before)

	res := &loadFigures{}
	sampled := make(chan loadFigures, 1)
	stopSampling := make(chan struct{})
	go func() {
		var pk loadFigures
		for i := 0; ; i++ {
			if m, err := readMemory(p.cmd.Process.Pid); err == nil && m.rss > pk.mem.rss {
				pk.mem = m
			}
			// The status every second, as before: the agent answers it
			// on the load's cores.
			if i%10 == 0 {
				if st, err := p.status(); err == nil {
					pk.heapLive = max(pk.heapLive, st.Memory.HeapLive)
					if st.Checkpoints.LastCompleted != nil {
						pk.checkpoint = max(pk.checkpoint, st.Checkpoints.LastCompleted.SizeBytes)
					}
				}
			}
			select {
			case <-stopSampling:
				sampled <- pk
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	finish := func(err error) (*loadFigures, error) {
		close(stopSampling)
		pk := <-sampled
		if err != nil {
			return nil, err
		}
		end, err := readMemory(p.cmd.Process.Pid)
		if err != nil {
			return nil, err
		}
		if end.rss > pk.mem.rss {
			pk.mem = end
		}
		res.mem, res.heapLive, res.checkpoint = pk.mem, pk.heapLive, pk.checkpoint
		res.mem.hwm = end.hwm
		return res, nil
	}

	cpuBefore, err := readCPU(p.cmd.Process.Pid)
	if err != nil {
		return finish(err)
	}
	start := time.Now()
	err = publishPaced(ctx, pub, cfg.Rate, cfg.Messages, func(i int) (string, string) {
		return fmt.Sprintf("bench/d%06d/telemetry", i%cfg.Keys), fmt.Sprintf(`{"temp":%d.5,"ts":%d}`, i%40, eventStart+int64(i)*60_000/int64(cfg.Keys))
	})
	if err != nil {
		return finish(fmt.Errorf("footprint: %w", err))
	}
	res.publishPerSec = perSec(cfg.Messages, time.Since(start))
	want := base + int64(cfg.Messages)
	wantAverages := cfg.Keys + 1 // and the probe's
	_, err = p.waitStatus(ctx, time.Duration(cfg.Messages/1000)*time.Second+2*time.Minute,
		fmt.Sprintf("%d readings to be processed and %d averages published", cfg.Messages, wantAverages),
		func(st *api.Status) bool {
			mu.Lock()
			defer mu.Unlock()
			return sourceRecords(st) >= want && st.IngestLag == 0 && len(keys) >= wantAverages
		})
	if err != nil {
		if st, serr := p.status(); serr == nil {
			mu.Lock()
			heard := len(keys)
			mu.Unlock()
			// Readings or averages the broker acknowledged but never
			// delivered were dropped by it: mosquitto, and the embedded
			// broker by default, drop QoS 1 messages queued for a
			// subscriber beyond max_queued_messages (1000 by default).
			err = fmt.Errorf("%w: the agent read %d of the %d readings the broker acknowledged, and %d of %d averages came back; "+
				"a broker that drops queued messages (docs/mqtt.md, Broker settings cairn needs: mosquitto's max_queued_messages; embedded: limits.max_queued_messages and max_queued_bytes) never delivers the rest",
				err, sourceRecords(st)-base, cfg.Messages, heard, wantAverages)
		}
		return finish(err)
	}
	res.processPerSec = perSec(cfg.Messages, time.Since(start))
	cpuAfter, err := readCPU(p.cmd.Process.Pid)
	if err != nil {
		return finish(err)
	}
	res.cpu = cpuAfter - cpuBefore
	return finish(nil)
}

// probe publishes a reading of device "probe" every 50 ms until the
// agent's source has read one.
func (p *agentProc) probe(ctx context.Context, pub paho.Client) error {
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			pub.Publish("bench/probe/telemetry", 1, false, fmt.Sprintf(`{"temp":0,"ts":%d}`, eventStart))
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	_, err := p.waitStatus(ctx, time.Minute, "the source to receive", func(st *api.Status) bool { return sourceRecords(st) > 0 })
	return err
}

// sourceRecords is how many records the source has emitted.
func sourceRecords(st *api.Status) int64 { return st.RecordsOut("readings") }

// stopWait bounds an agent's stop: its final checkpoint, then the exit.
const stopWait = 30 * time.Second

// stop ends the agent with SIGTERM, as systemd would, and waits for it.
func (p *agentProc) stop() error {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if !p.cmd.ProcessState.Success() {
			return fmt.Errorf("the agent exited with %v after SIGTERM; see %s", p.cmd.ProcessState, p.logPath)
		}
		return nil
	case <-time.After(stopWait):
		return errors.New("the agent did not stop after SIGTERM; see " + p.logPath)
	}
}

// kill ends the agent if it still runs.
func (p *agentProc) kill() {
	select {
	case <-p.exited:
	default:
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// clearReferenced marks every page of process pid as not referenced, so
// that readReferenced later counts those touched since; false where the
// kernel does not allow it (not Linux, or another user's process).
func clearReferenced(pid int) bool {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("1"), 0) == nil
}

// readReferenced returns how much of process pid's resident memory was
// touched since clearReferenced.
func readReferenced(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "Referenced:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/smaps_rollup: %q: %w", pid, line, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/smaps_rollup has no Referenced line", pid)
}

// userHZ is the unit of the times in /proc/<pid>/stat: Linux reports
// them in USER_HZ, 100 a second on every architecture.
const userHZ = 100

// readCPU returns the CPU time, user and system, that process pid has
// spent, from /proc/<pid>/stat.
func readCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("footprint reads /proc/<pid>/stat (Linux only): %w", err)
	}
	// The command name, in parentheses, may hold spaces: the fields
	// counted are those after its closing one, from the state (field 3).
	i := bytes.LastIndexByte(data, ')')
	f := strings.Fields(string(data[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields: %q", pid, data)
	}
	var ticks int64
	for _, field := range f[11:13] { // utime and stime, fields 14 and 15
		n, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %q: %w", pid, field, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// memory is a process's resident memory, from /proc/<pid>/status.
type memory struct{ rss, anon, file, hwm int64 }

func readMemory(pid int) (memory, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, fmt.Errorf("footprint reads /proc/<pid>/status (Linux only): %w", err)
	}
	var m memory
	fields := map[string]*int64{"VmRSS:": &m.rss, "RssAnon:": &m.anon, "RssFile:": &m.file, "VmHWM:": &m.hwm}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		if dst, ok := fields[f[0]]; ok {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return memory{}, fmt.Errorf("/proc/%d/status: %q: %w", pid, sc.Text(), err)
			}
			*dst = kb * 1024
			delete(fields, f[0])
		}
	}
	if len(fields) > 0 {
		return memory{}, fmt.Errorf("/proc/%d/status lacks %d of VmRSS, RssAnon, RssFile, VmHWM", pid, len(fields))
	}
	return m, nil
}
