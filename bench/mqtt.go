package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/broker"
	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/ingest"
	"github.com/cairn-edge/cairn/mqttio"
	"github.com/cairn-edge/cairn/runtime"
)

// MQTTConfig sizes the mqtt scenario.
type MQTTConfig struct {
	// Broker is the URL of the broker to measure through; empty: an
	// embedded broker started for the run. A real broker must queue enough
	// for a persistent session (mosquitto: max_queued_messages of at least
	// Messages), or messages are dropped and the run times out.
	Broker string
	// Dir receives the ingest log's file; required.
	Dir string
	// Messages is how many each side receives per round; default 20,000.
	Messages int
	// Rounds is how many times each side is measured, alternating;
	// default 1.
	Rounds int
	// Interval is cairn's checkpoint interval; default 100 ms.
	Interval time.Duration
}

// MQTTResult compares, in one run through one broker, a publisher's
// messages into cairn (durable ingest log, JSON decoding, a pipeline
// ending in a counter, checkpoints) with the same messages into a bare
// paho subscriber that only counts.
type MQTTResult struct {
	// Broker is "embedded" or the broker's URL.
	Broker              string  `json:"broker"`
	Messages            int     `json:"messages"`
	BareMessagesPerSec  float64 `json:"bare_messages_per_sec"`
	CairnMessagesPerSec float64 `json:"cairn_messages_per_sec"`
	// MQTTVsBareRatio is cairn's rate over the bare subscriber's: 1 means
	// cairn keeps up with a subscriber that does nothing.
	MQTTVsBareRatio float64 `json:"mqtt_vs_bare_ratio"`
}

func (*MQTTResult) Scenario() string { return "mqtt" }

func (r *MQTTResult) Rows() []Row {
	return []Row{
		{"broker", r.Broker},
		{"messages per side", num(float64(r.Messages))},
		{"messages/s, bare paho subscriber", num(r.BareMessagesPerSec)},
		{"messages/s, cairn (durable log, decode, pipeline)", num(r.CairnMessagesPerSec)},
		{"cairn / bare", fmt.Sprintf("%.3f", r.MQTTVsBareRatio)},
	}
}

// MQTT measures cairn against a bare subscriber, alternating rounds after
// an unmeasured one.
func MQTT(ctx context.Context, cfg MQTTConfig) (*MQTTResult, error) {
	if cfg.Messages <= 0 {
		cfg.Messages = 20_000
	}
	rig, err := NewMQTTRig(ctx, cfg.Broker, cfg.Dir, cfg.Interval)
	if err != nil {
		return nil, err
	}
	defer rig.Close()
	// An unmeasured round first: connections, caches and the heap warm up.
	if _, _, err := rig.Round(max(1, cfg.Messages/10)); err != nil {
		return nil, err
	}
	var bare, cairn time.Duration
	for range max(1, cfg.Rounds) {
		b, c, err := rig.Round(cfg.Messages)
		if err != nil {
			return nil, err
		}
		bare, cairn = bare+b, cairn+c
	}
	res := &MQTTResult{Broker: cfg.Broker, Messages: cfg.Messages * max(1, cfg.Rounds)}
	if res.Broker == "" {
		res.Broker = "embedded"
	}
	res.BareMessagesPerSec = perSec(res.Messages, bare)
	res.CairnMessagesPerSec = perSec(res.Messages, cairn)
	res.MQTTVsBareRatio = ratio(res.CairnMessagesPerSec, res.BareMessagesPerSec)
	return res, nil
}

// roundTimeout bounds the wait for one side's messages.
const roundTimeout = time.Minute

// MQTTRig is a publisher, a bare subscriber and a cairn pipeline on one
// broker, under topics of their own (cairn-bench-<pid>-<time>/...), so
// that runs against a shared broker do not meet. Its methods are not safe
// for concurrent use.
type MQTTRig struct {
	broker *broker.Server // the embedded one, if started
	prefix string
	pub    paho.Client
	bare   paho.Client
	logs   *ingest.Logs

	bareN, bareTarget   atomic.Int64
	bareDone            chan struct{}
	cairnN, cairnTarget atomic.Int64
	cairnDone           chan struct{}

	stop    func()        // stops the pipeline
	stopped chan struct{} // closed when the pipeline has stopped
	err     error         // why it stopped, once stopped
}

// NewMQTTRig connects the publisher and the bare subscriber to brokerURL
// (an embedded broker if empty), starts the cairn pipeline with its ingest
// log in dir and checkpoints every interval (default 100 ms), and returns
// once cairn receives messages. Close releases it.
func NewMQTTRig(ctx context.Context, brokerURL, dir string, interval time.Duration) (_ *MQTTRig, err error) {
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := &MQTTRig{prefix: fmt.Sprintf("cairn-bench-%d-%d", os.Getpid(), time.Now().UnixNano()),
		bareDone: make(chan struct{}, 1), cairnDone: make(chan struct{}, 1)}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if brokerURL == "" {
		if r.broker, err = broker.Start(broker.Config{Addr: "127.0.0.1:0", AllowAnonymous: true}, quiet); err != nil {
			return nil, err
		}
		brokerURL = r.broker.URL()
	}
	if r.pub, err = connect(brokerURL, r.prefix+"-publisher"); err != nil {
		return nil, err
	}
	if r.bare, err = connect(brokerURL, r.prefix+"-bare"); err != nil {
		return nil, err
	}
	tok := r.bare.Subscribe(r.prefix+"/bare/+/telemetry", 1, func(paho.Client, paho.Message) {
		if r.bareN.Add(1) == r.bareTarget.Load() {
			r.bareDone <- struct{}{}
		}
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return nil, fmt.Errorf("bare subscriber: subscribe: %v", tok.Error())
	}

	if r.logs, err = ingest.OpenLogs(ingest.Dir(dir), ingest.LogOptions{Logger: quiet}); err != nil {
		return nil, err
	}
	filter, fields, err := mqttio.ParseTopicPattern(r.prefix + "/cairn/{device}/telemetry")
	if err != nil {
		return nil, err
	}
	probed := make(chan struct{}, 1)
	var bld graph.Builder
	src := bld.Source("mqtt", 1, mqttio.NewSource(mqttio.SourceConfig{Name: "mqtt",
		Client: mqttio.ClientConfig{Broker: brokerURL, ClientID: r.prefix + "-cairn", Logger: quiet},
		Topics: []string{filter}, Logs: r.logs, Decoding: mqttio.Decoding{TopicFields: fields, KeyField: "device", ValueField: "temp"}}))
	bld.Operator("count", 1, func(int) graph.Operator {
		return &roundCounter{n: &r.cairnN, target: &r.cairnTarget, done: r.cairnDone, probed: probed}
	}, []graph.Input{graph.In(src, graph.Forward())})
	topo, err := bld.Build()
	if err != nil {
		return nil, err
	}
	cfg := checkpoint.DefaultConfig()
	cfg.Interval = interval
	job, err := runtime.New(topo, runtime.Options{Checkpoints: cfg, Logger: quiet})
	if err != nil {
		return nil, err
	}
	jobCtx, cancel := context.WithCancel(ctx)
	r.stop, r.stopped = cancel, make(chan struct{})
	go func() {
		defer close(r.stopped)
		r.err = job.Run(jobCtx)
	}()

	// The source subscribes once connected; until then the broker drops
	// what is published. Probe until a probe gets through.
	deadline := time.After(roundTimeout)
	for {
		r.pub.Publish(r.prefix+"/cairn/"+probeKey+"/telemetry", 1, false, `{"temp":0}`)
		select {
		case <-probed:
			return r, nil
		case <-r.stopped:
			return nil, fmt.Errorf("the cairn pipeline stopped: %v", r.err)
		case <-deadline:
			return nil, fmt.Errorf("cairn received nothing from %s within %v", brokerURL, roundTimeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// probeKey is the device of the messages that find out whether cairn is
// subscribed; they are not counted.
const probeKey = "probe"

// Round publishes n readings (over 100 devices) to the bare subscriber and
// waits for all of them, then n to cairn, and returns each side's time
// from the first publish to the last message counted.
func (r *MQTTRig) Round(n int) (bare, cairn time.Duration, err error) {
	r.bareTarget.Add(int64(n))
	start := time.Now()
	if err := r.publish("bare", n); err != nil {
		return 0, 0, err
	}
	if err := r.await(r.bareDone, "the bare subscriber"); err != nil {
		return 0, 0, err
	}
	bare = time.Since(start)
	r.cairnTarget.Add(int64(n))
	start = time.Now()
	if err := r.publish("cairn", n); err != nil {
		return 0, 0, err
	}
	if err := r.await(r.cairnDone, "cairn"); err != nil {
		return 0, 0, err
	}
	return bare, time.Since(start), nil
}

func (r *MQTTRig) publish(side string, n int) error {
	toks := make([]paho.Token, 0, n)
	for i := range n {
		toks = append(toks, r.pub.Publish(fmt.Sprintf("%s/%s/d%03d/telemetry", r.prefix, side, i%100), 1, false,
			fmt.Sprintf(`{"temp":%d.5,"humidity":40,"seq":%d}`, i%40, i)))
	}
	for _, t := range toks {
		if !t.WaitTimeout(roundTimeout) || t.Error() != nil {
			return fmt.Errorf("publish: %v", t.Error())
		}
	}
	return nil
}

func (r *MQTTRig) await(done <-chan struct{}, who string) error {
	select {
	case <-done:
		return nil
	case <-r.stopped:
		return fmt.Errorf("the cairn pipeline stopped: %v", r.err)
	case <-time.After(roundTimeout):
		return fmt.Errorf("%s did not receive every message within %v", who, roundTimeout)
	}
}

// Close stops the pipeline and disconnects; it returns the pipeline's
// error, if it failed.
func (r *MQTTRig) Close() error {
	var err error
	if r.stop != nil {
		r.stop()
		<-r.stopped
		err, r.stop = r.err, nil
	}
	for _, c := range []paho.Client{r.pub, r.bare} {
		if c != nil {
			c.Disconnect(100)
		}
	}
	if r.logs != nil {
		r.logs.Close()
	}
	if r.broker != nil {
		r.broker.Close()
	}
	return err
}

// connect connects a paho client with a clean session and waits for the
// connection.
func connect(url, id string) (paho.Client, error) {
	c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(id).SetCleanSession(true).SetAutoReconnect(true))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return nil, fmt.Errorf("connecting %s to %s: %v", id, url, tok.Error())
	}
	return c, nil
}

// roundCounter counts records and signals when the count reaches the
// target; it signals probes instead of counting them.
type roundCounter struct {
	graph.BaseOperator
	n, target *atomic.Int64
	done      chan<- struct{}
	probed    chan<- struct{}
}

func (c *roundCounter) ProcessRecord(_ int, r *graph.Record) error {
	if r.Key == probeKey {
		select {
		case c.probed <- struct{}{}:
		default:
		}
		return nil
	}
	if c.n.Add(1) == c.target.Load() {
		c.done <- struct{}{}
	}
	return nil
}
