package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/internal/testing/loopback"
	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
)

// IngressConfig sizes the ingress scenario: devices publishing QoS 1
// readings to the agent's embedded broker, whose PUBACK waits for the
// ingest log's sync, side by side with the same devices publishing to a
// mosquitto in front of the agent, which acknowledges from memory.
type IngressConfig struct {
	// Binary is the cairn executable to run; required.
	Binary string
	// Dir receives the pipeline files and the agents' data; required.
	Dir string
	// Devices each send a reading a second for Duration: the reference
	// load (defaults 50 and 30 s).
	Devices  int
	Duration time.Duration
	// BusyDevices send BusyRate readings a second together for
	// BusyDuration: the busy load (defaults 100, 5,000 and 10 s).
	BusyDevices  int
	BusyRate     int
	BusyDuration time.Duration
}

// IngressResult is each load's figures for both set-ups, measured one
// after the other in one run.
type IngressResult struct {
	Loads []IngressLoad `json:"loads"`
}

// IngressLoad is one load's figures: with the embedded broker, and with
// mosquitto in front.
type IngressLoad struct {
	Load     string         `json:"load"`
	Devices  int            `json:"devices"`
	Rate     int            `json:"rate"` // readings a second, all devices
	Embedded IngressFigures `json:"embedded"`
	InFront  IngressFigures `json:"mosquitto_in_front"`
}

// IngressFigures are what the devices saw and what the processes spent:
// the readings acknowledged in the measured time, the delay from
// publishing each to its PUBACK at the device (p50, p99), and the CPU
// time, user and system, of the agent and, in front, of mosquitto, per
// reading.
type IngressFigures struct {
	Messages            int     `json:"messages"`
	AckP50MS            float64 `json:"puback_p50_ms"`
	AckP99MS            float64 `json:"puback_p99_ms"`
	CPUPerMessageMicros float64 `json:"cpu_per_message_us"`
}

func (*IngressResult) Scenario() string { return "ingress" }

func (r *IngressResult) Rows() []Row {
	var rows []Row
	for _, l := range r.Loads {
		rows = append(rows,
			Row{l.Load, fmt.Sprintf("%d devices, %d readings a second, QoS 1", l.Devices, l.Rate)},
			Row{"  publish → PUBACK p50 / p99", fmt.Sprintf("embedded %.1f / %.1f ms; mosquitto in front %.1f / %.1f ms",
				l.Embedded.AckP50MS, l.Embedded.AckP99MS, l.InFront.AckP50MS, l.InFront.AckP99MS)},
			Row{"  CPU per reading", fmt.Sprintf("embedded %.1f µs (the agent); mosquitto in front %.1f µs (the agent and mosquitto); %.2f ×",
				l.Embedded.CPUPerMessageMicros, l.InFront.CPUPerMessageMicros, ratio(l.Embedded.CPUPerMessageMicros, l.InFront.CPUPerMessageMicros))},
			Row{"  readings measured", fmt.Sprintf("embedded %d; mosquitto in front %d", l.Embedded.Messages, l.InFront.Messages)})
	}
	return rows
}

// ingressPipeline counts readings per device from a broker's settings
// (%s, indented under brokers.gw); checkpoints as the gateway's.
const ingressPipeline = `agent:
  data_dir: %s
brokers:
  gw:
%scheckpoints:
  interval: 10s
sources:
  - id: readings
    broker: gw
    topics: ["ingress/{device}/r"]
    key: device
    value: seq
operators:
  - id: counts
    type: count
    inputs: [readings]
    key_by: key
`

// Ingress runs the reference and the busy load, each first through the
// embedded broker, then through a mosquitto (its default limits) in
// front of the agent.
func Ingress(ctx context.Context, cfg IngressConfig) (*IngressResult, error) {
	if cfg.Devices <= 0 {
		cfg.Devices = 50
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 30 * time.Second
	}
	if cfg.BusyDevices <= 0 {
		cfg.BusyDevices = 100
	}
	if cfg.BusyRate <= 0 {
		cfg.BusyRate = 5000
	}
	if cfg.BusyDuration <= 0 {
		cfg.BusyDuration = 10 * time.Second
	}
	res := &IngressResult{}
	for _, l := range []struct {
		name          string
		devices, rate int
		d             time.Duration
	}{
		{"reference", cfg.Devices, cfg.Devices, cfg.Duration},
		{"busy", cfg.BusyDevices, cfg.BusyRate, cfg.BusyDuration},
	} {
		load := IngressLoad{Load: l.name, Devices: l.devices, Rate: l.rate}
		for _, inFront := range []bool{false, true} {
			dir := filepath.Join(cfg.Dir, fmt.Sprintf("%s-%v", l.name, inFront))
			f, err := ingressRun(ctx, cfg.Binary, dir, inFront, l.devices, l.rate, l.d)
			if err != nil {
				return nil, fmt.Errorf("%s load, mosquitto in front %v: %w", l.name, inFront, err)
			}
			if inFront {
				load.InFront = *f
			} else {
				load.Embedded = *f
			}
		}
		res.Loads = append(res.Loads, load)
	}
	return res, nil
}

// ingressRun runs one set-up under one load and measures it for d, after
// a second of warming up.
func ingressRun(ctx context.Context, binary, dir string, inFront bool, devices, rate int, d time.Duration) (*IngressFigures, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var url, settings string
	brokerPid := 0
	if inFront {
		broker, err := mosquittotest.Run(dir, "", nil)
		if err != nil {
			return nil, err
		}
		defer broker.Stop()
		url, brokerPid = broker.URL, broker.Pid()
		settings = fmt.Sprintf("    url: %s\n    client_id: cairn-bench-ingress-%d\n", url, os.Getpid())
	} else {
		port, err := loopback.FreePort()
		if err != nil {
			return nil, err
		}
		url = fmt.Sprintf("tcp://127.0.0.1:%d", port)
		// All the devices connect from loopback, at once: over the
		// limits for one address that a broker on a plant network has.
		settings = fmt.Sprintf("    embedded: true\n    listen: 127.0.0.1:%d\n"+
			"    limits: {max_clients: 1000, max_sessions_per_address: 1000, max_connection_rate: 1000}\n", port)
	}
	p, err := runAgent(ctx, binary, dir, fmt.Sprintf(ingressPipeline, filepath.Join(dir, "data"), settings))
	if err != nil {
		return nil, err
	}
	defer p.kill()
	fleet, err := startDevices(ctx, url, devices, rate)
	if err != nil {
		return nil, err
	}
	defer fleet.stop()
	if err := sleep(ctx, time.Second); err != nil {
		return nil, err
	}
	cpu := func() (time.Duration, error) {
		t, err := readCPU(p.cmd.Process.Pid)
		if err == nil && brokerPid != 0 {
			var b time.Duration
			b, err = readCPU(brokerPid)
			t += b
		}
		return t, err
	}
	fleet.take()
	before, err := cpu()
	if err != nil {
		return nil, err
	}
	if err := sleep(ctx, d); err != nil {
		return nil, err
	}
	after, err := cpu()
	if err != nil {
		return nil, err
	}
	delays := fleet.take()
	if err := fleet.stop(); err != nil {
		return nil, err
	}
	if len(delays) == 0 {
		return nil, errors.New("no reading was acknowledged")
	}
	slices.Sort(delays)
	return &IngressFigures{Messages: len(delays), AckP50MS: ms(percentile(delays, 50)), AckP99MS: ms(percentile(delays, 99)),
		CPUPerMessageMicros: float64(after-before) / float64(time.Microsecond) / float64(len(delays))}, p.stop()
}

// devices are MQTT clients, one per device, publishing paced QoS 1
// readings and timing each until its PUBACK.
type devices struct {
	clients []paho.Client
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	failed  atomic.Value // the first error

	mu     sync.Mutex
	delays []time.Duration
}

// startDevices connects n devices to url and starts them publishing rate
// readings a second together.
func startDevices(ctx context.Context, url string, n, rate int) (*devices, error) {
	ctx, cancel := context.WithCancel(ctx)
	f := &devices{cancel: cancel}
	for i := range n {
		c, err := connect(url, fmt.Sprintf("bench-dev-%03d", i))
		if err != nil {
			f.stop()
			return nil, err
		}
		f.clients = append(f.clients, c)
	}
	interval := time.Duration(float64(time.Second) * float64(n) / float64(rate))
	for i, c := range f.clients {
		type sent struct {
			at  time.Time
			tok paho.Token
		}
		inflight := make(chan sent, 1000)
		f.wg.Add(2)
		go func() { // publishes, paced
			defer f.wg.Done()
			defer close(inflight)
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for seq := 0; ; seq++ {
				select {
				case <-tick.C:
				case <-ctx.Done():
					return
				}
				at := time.Now()
				inflight <- sent{at, c.Publish(fmt.Sprintf("ingress/dev-%03d/r", i), 1, false, fmt.Sprintf(`{"seq":%d,"ts":%d}`, seq, at.UnixMilli()))}
			}
		}()
		go func() { // times each PUBACK, in order: they come in order
			defer f.wg.Done()
			for s := range inflight {
				if !s.tok.WaitTimeout(time.Minute) || s.tok.Error() != nil {
					f.failed.CompareAndSwap(nil, fmt.Errorf("publish: %v", s.tok.Error()))
					continue
				}
				d := time.Since(s.at)
				f.mu.Lock()
				f.delays = append(f.delays, d)
				f.mu.Unlock()
			}
		}()
	}
	return f, nil
}

// take returns the delays timed since the last take.
func (f *devices) take() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.delays
	f.delays = nil
	return d
}

// stop stops publishing, waits for what was published to be
// acknowledged, and disconnects; it returns the first failure.
func (f *devices) stop() error {
	if f.cancel == nil {
		return nil
	}
	f.cancel()
	f.cancel = nil
	f.wg.Wait()
	for _, c := range f.clients {
		c.Disconnect(100)
	}
	if err, ok := f.failed.Load().(error); ok {
		return err
	}
	return nil
}
