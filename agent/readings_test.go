package agent

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/agent/config"
	"github.com/cairn-edge/cairn/broker"
	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/ingest"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
	"github.com/cairn-edge/cairn/localrecovery"
	"github.com/cairn-edge/cairn/mqttio"
	"github.com/cairn-edge/cairn/runtime"
)

// No reading stops the job (issue 31): whatever a device sends, every
// operator kind and every sink either processes it or rejects it as a dead
// letter, and a restart that replays it does the same again. The pipeline
// is built as the agent builds it (config, build), its sources read their
// real ingest logs, its sinks publish to an embedded broker, and the real
// runtime runs it with the real checkpoint store; only the process is
// not killed: a crash is the job stopped without a final checkpoint, and
// the logs and the store closed and opened again.

var readingsSeeds = flag.Int("readings.seeds", 12, "pipelines of generated readings TestNoReadingStopsTheJob runs")

// readingsPipeline reads two sources, one keyed by a topic level and one
// by a payload field, into an operator of every kind (each keyed one by
// key, one also by a payload field, one by an expression and one by a
// composite key of a map's own fields; those in event time over the
// source with time, as the validation asks), and publishes every operator's
// records under a topic made of their keys; but the lookup join's, which
// joins a record or not as the two sources' records happen to arrive,
// under one topic: a replay may join others, and a sink rejects a topic
// made of a hostile key, so the replay would reject other records. For
// the same reason the threshold reads one source: over the union of both,
// whose keys meet (dev-1, or a control character a topic may not hold),
// whether it alerts at a record depends on how they interleave.
const readingsPipeline = `
brokers:
  local: {embedded: true}
checkpoints: {interval: 1h, mode: %s, incremental: true}
sources:
  - id: telemetry
    broker: local
    topics:
      - sensors/{device}/telemetry
    key: device
    value: temp
    time: ts
    out_of_orderness: 1s
  - id: events
    broker: local
    topics:
      - events/#
    key: k
    value: v
operators:
  - {id: hot, type: filter, inputs: [telemetry], expr: "value > 20 and humidity < 90"}
  - {id: scaled, type: map, inputs: [events], expr: "value * factor"}
  - {id: both, type: union, inputs: [telemetry, scaled]}
  - {id: counts, type: count, inputs: [both], key_by: key}
  - {id: per-site, type: count, inputs: [telemetry], key_by: site, parallelism: 2}
  - {id: totals, type: sum, inputs: [scaled], key_by: key}
  - {id: avg, type: window, inputs: [telemetry], key_by: key, window: {kind: tumbling, size: 1s, allowed_lateness: 2s}, aggregate: avg}
  - {id: figures, type: window, inputs: [telemetry], key_by: key, window: {kind: sliding, size: 2s, slide: 1s, allowed_lateness: 2s},
     aggregates: {t_avg: avg(temp), h_max: max(humidity), t_p95: p95(temp), t_sd: stddev(temp), t_first: first(temp), q: "quantile(value * 2, 0.3)", d: distinct(site), n: count()}}
  - {id: hot-figures, type: filter, inputs: [figures], expr: "t_avg > 20 and n > 1"}
  - {id: drift, type: join, inputs: [telemetry, hot], key_by: key, window: {kind: tumbling, size: 1s, allowed_lateness: 2s}, aggregate: sum}
  - {id: with-events, type: lookup_join, inputs: [telemetry, events], key_by: key}
  - {id: once, type: dedupe, inputs: [events], key_by: key, ttl: 1m}
  - {id: alarm, type: threshold, inputs: [telemetry], key_by: key, high: 50, low: 10}
  - {id: shaped, type: map, inputs: [telemetry], expr: "value + 1",
     fields: {hum: humidity, temp_f: "temp * 9 / 5 + 32", where: 'site + "/" + device', tags: '[site, k, {"f": factor}]'}}
  - {id: per-line, type: window, inputs: [shaped], key_by: [where, hum, key], parallelism: 2,
     window: {kind: tumbling, size: 1s, allowed_lateness: 2s}, aggregates: {t_max: max(temp_f), n: count()}}
  - {id: per-expr, type: count, inputs: [telemetry], key_by: 'site + "-" + k', parallelism: 2}
  - {id: pairs, type: interval_join, inputs: [hot, shaped], key_by: key, within: {before: 1s, after: 1s}}
sinks:
  - {id: out-hot, input: hot, broker: local, topic: "out/hot/{key}"}
  - {id: out-counts, input: counts, broker: local, topic: "out/counts/{key}"}
  - {id: out-site, input: per-site, broker: local, topic: "out/site/{key}"}
  - {id: out-totals, input: totals, broker: local, topic: "out/totals/{key}"}
  - {id: out-avg, input: avg, broker: local, topic: "out/avg/{key}"}
  - {id: out-figures, input: hot-figures, broker: local, topic: "out/figures/{key}"}
  - {id: out-drift, input: drift, broker: local, topic: "out/drift/{key}"}
  - {id: out-pairs, input: pairs, broker: local, topic: "out/pairs/{key}"}
  - {id: out-with, input: with-events, broker: local, topic: "out/with"}
  - {id: out-once, input: once, broker: local, topic: "out/once/{key}"}
  - {id: out-alarm, input: alarm, broker: local, topic: "{key}/alarm"}
  - {id: out-raw, input: events, broker: local, topic: "out/raw"}
  - {id: out-shaped, input: shaped, broker: local, topic: "out/shaped/{key}"}
  - {id: out-line, input: per-line, broker: local, topic: "out/line/{key}"}
  - {id: out-expr, input: per-expr, broker: local, topic: "out/expr/{key}"}
`

// hostileStrings are keys, topic levels and field values devices have
// sent, or could: empty, blank, control characters, NUL, invalid UTF-8,
// MQTT's wildcards and separators, long ones, numbers as text.
var hostileStrings = []string{
	"", " ", "\t", "dev-1", "dev-2", "Ünïcødé", "日本", "\x00", "a\x00b", "\xff\xfe", "\xc3",
	"+", "#", "a/b", "/", "$SYS", "\u2028", "1e6", "-0", "NaN", strings.Repeat("k", 300),
	strings.Repeat("x", 64<<10),
}

// readingsGen draws readings from rng: most of them sane, so that windows
// and joins have something to do, and the rest as hostile as any seen.
type readingsGen struct{ rng *rand.Rand }

func (g readingsGen) str() string {
	if g.rng.IntN(3) == 0 {
		return hostileStrings[g.rng.IntN(len(hostileStrings))]
	}
	return fmt.Sprintf("dev-%d", g.rng.IntN(5))
}

// level is a topic level a broker delivers: no separator, no wildcard,
// no NUL, valid UTF-8 (the ingest log would keep any, but a broker sends
// none of those).
func (g readingsGen) level() string {
	for {
		s := g.str()
		if !strings.ContainsAny(s, "/+#\x00") && !strings.Contains(s, "\ufffd") && isUTF8(s) {
			return s
		}
	}
}

func isUTF8(s string) bool { return strings.ToValidUTF8(s, "\ufffd") == s }

// value is a JSON value of any type, numbers of every size among them.
func (g readingsGen) value() any {
	switch g.rng.IntN(12) {
	case 0:
		return nil
	case 1:
		return g.rng.IntN(2) == 0
	case 2:
		return g.str()
	case 3:
		return map[string]any{"nested": g.str()}
	case 4:
		return []any{1, "two"}
	case 5:
		return []float64{math.MaxFloat64, -math.MaxFloat64, 1e300, 5e-324, 0}[g.rng.IntN(5)]
	}
	return math.Round(g.rng.NormFloat64()*30*100) / 100
}

// payload is a message body: a JSON object with some of the fields the
// pipeline reads (any of them missing or of another type), or no JSON
// object at all.
func (g readingsGen) payload(now int64) []byte {
	switch g.rng.IntN(20) {
	case 0:
		return nil
	case 1:
		return []byte(`{"temp": 1,`)
	case 2:
		return []byte(`[1, 2]`)
	case 3:
		return []byte(g.str())
	}
	fields := map[string]any{}
	for _, f := range []string{"temp", "humidity", "site", "k", "v", "factor"} {
		if g.rng.IntN(6) > 0 {
			fields[f] = g.value()
		}
	}
	if g.rng.IntN(4) > 0 {
		fields["k"] = g.str()
	}
	if g.rng.IntN(3) > 0 {
		fields["site"] = g.str()
	}
	switch g.rng.IntN(8) {
	case 0: // none: the time it was received
	case 1:
		fields["ts"] = g.value()
	case 2:
		fields["ts"] = time.UnixMilli(now).UTC().Format(time.RFC3339Nano)
	default:
		fields["ts"] = now + int64(g.rng.IntN(4000)) - 2000
	}
	p, err := json.Marshal(fields)
	if err != nil {
		panic(err)
	}
	if g.rng.IntN(10) == 0 { // raw bytes that are no UTF-8, which Marshal would have escaped
		p = []byte(strings.Replace(string(p), "{", `{"k":"`+"\xff\xfe"+`",`, 1))
	}
	return p
}

// messages draws n messages for each source's ingest log.
func (g readingsGen) messages(n int) (telemetry, events []ingest.Message) {
	now := int64(1_700_000_000_000)
	for range n {
		now += int64(g.rng.IntN(300))
		at := time.UnixMilli(now)
		telemetry = append(telemetry, ingest.Message{Topic: "sensors/" + g.level() + "/telemetry", Payload: g.payload(now), Received: at})
		events = append(events, ingest.Message{Topic: "events/" + g.level(), Payload: g.payload(now), Received: at})
	}
	return telemetry, events
}

// readingsHarness runs the pipeline on one data directory, life after
// life, as the agent would.
type readingsHarness struct {
	t      testing.TB
	cfg    *config.Config
	dir    string
	broker *broker.Server
	id     string // base of the MQTT client ids
}

// rejection is a record an operator or a sink rejected, by where it came
// from: a replay rejects the same again.
type rejection struct {
	operator, reason, log string
	offset                uint64
}

// lifeResult is what one life saw.
type lifeResult struct {
	read       int64 // messages the sources made records and dead letters of
	rejections map[rejection]bool
	// watermarks are the subtasks' at the end of the life, by operator,
	// the least of each operator's.
	watermarks map[string]int64
}

var sharedBroker = sync.OnceValues(func() (*broker.Server, error) {
	return broker.Start(broker.Config{Addr: "127.0.0.1:0", AllowAnonymous: true}, slog.New(slog.NewTextHandler(io.Discard, nil)))
})

func newReadingsHarness(t testing.TB, mode string, id string) *readingsHarness {
	br, err := sharedBroker()
	if err != nil {
		t.Fatal(err)
	}
	cfg, errs := config.Parse("readings.yaml", fmt.Appendf(nil, readingsPipeline, mode), func(string) (string, bool) { return "", false })
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return &readingsHarness{t: t, cfg: cfg, dir: t.TempDir(), broker: br, id: id}
}

// feed appends msgs to the ingest logs of the sources, as their
// subscriptions would have.
func (h *readingsHarness) feed(telemetry, events []ingest.Message) {
	logs, err := ingest.OpenLogs(ingest.Dir(h.dir), ingest.LogOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	defer logs.Close()
	for name, msgs := range map[string][]ingest.Message{"telemetry/0": telemetry, "events/0": events} {
		l, err := logs.Log(name)
		if err != nil {
			h.t.Fatal(err)
		}
		if _, err := l.Append(msgs); err != nil {
			h.t.Fatal(err)
		}
	}
}

// life opens the data directory, restores what its store holds and runs
// the pipeline: once the sources have read checkpointAt messages (into
// records and dead letters, counting those the restored checkpoint had
// read) it completes a checkpoint, and once they have read until it
// stops: as a crash does, with no final checkpoint, if crash, else after
// a savepoint. A job that fails fails the test.
func (h *readingsHarness) life(checkpointAt, until int64, crash bool) lifeResult {
	t := h.t
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	logs, err := ingest.OpenLogs(ingest.Dir(h.dir), ingest.LogOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	store, err := localrecovery.Open(StorePath(h.dir), localrecovery.Options{Retain: 3, HighWater: HighWaterPath(h.dir), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	d := &deps{logs: logs, clientID: h.id, brokers: map[string]*broker.Server{"local": h.broker}, log: log}
	backlog := mqttio.NewBacklog(32<<20, nil)
	g, err := d.build(h.cfg, backlog)
	if err != nil {
		t.Fatal(err)
	}
	restore, err := localrecovery.Choose(localrecovery.Sources{Local: store, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	res := lifeResult{rejections: make(map[rejection]bool)}
	var mu sync.Mutex
	handle := newRejections(h.cfg, logs.StoreRejected, log).handle
	mode, _ := checkpoint.ParseMode(h.cfg.Checkpoints.Mode)
	completed := make(chan uint64, 16)
	job, err := runtime.New(g.topo, runtime.Options{
		OnComplete:  func(m *checkpoint.Manifest) { completed <- m.ID },
		Checkpoints: checkpoint.Config{Mode: mode, Interval: time.Hour, Timeout: time.Minute, MaxConcurrent: 1},
		Store:       store, Restore: restore.Candidates, Incremental: true, MaxChain: 3, Logger: log,
		Hold: backlog.Hold,
		OnRejected: func(id checkpoint.TaskID, r *graph.Record, err error) error {
			rj := rejection{operator: id.Operator, reason: err.Error()}
			rj.log, rj.offset, _, _ = logs.Origin(r.Origin)
			mu.Lock()
			res.rejections[rj] = true
			mu.Unlock()
			return handle(id, r, err)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- job.Run(ctx) }()
	var restored int64 // read by the lives before, as the restored checkpoint says
	if len(restore.Candidates) > 0 {
		for _, a := range restore.Candidates[0].Manifest.Subtasks {
			if a.Source {
				restored += int64(a.Offset) - 1 // a log's first offset is 1
			}
		}
	}
	read := func() int64 {
		n := restored
		for _, s := range g.sources {
			n += s.DeadLetters.Load()
		}
		for id, m := range job.Metrics() {
			if id.Operator == "telemetry" || id.Operator == "events" {
				n += m.RecordsOut.Load()
			}
		}
		return n
	}
	failed := func() error {
		select {
		case err := <-ran:
			if err == nil {
				err = fmt.Errorf("the job ended")
			}
			return err
		default:
			return nil
		}
	}
	reach := func(n int64) {
		var ferr error
		if !testwait.Poll(time.Minute, func() bool { ferr = failed(); return ferr != nil || read() >= n }) {
			t.Fatalf("the sources read %d of %d in a minute", read(), n)
		}
		if ferr != nil {
			t.Fatalf("the job failed: %v", ferr)
		}
	}
	// complete takes a checkpoint, or a savepoint, which is aligned in
	// every mode: once it completes, every record read before it has been
	// processed, none is in flight.
	complete := func(trigger func(context.Context) (uint64, error)) {
		cctx, stop := context.WithTimeout(ctx, time.Minute)
		defer stop()
		id, err := trigger(cctx)
		for err == nil {
			select {
			case done := <-completed:
				if done >= id {
					return
				}
			case err = <-ran:
				if err == nil {
					err = fmt.Errorf("the job ended")
				}
			case <-cctx.Done():
				err = cctx.Err()
			}
		}
		t.Fatalf("checkpoint: %v", err)
	}
	reach(checkpointAt)
	complete(job.TriggerCheckpoint)
	reach(until)
	if !crash {
		complete(job.TriggerSavepoint)
	}
	res.read = read()
	res.watermarks = make(map[string]int64)
	for _, st := range job.Status().Tasks {
		if wm, ok := res.watermarks[st.ID.Operator]; !ok || st.Watermark < wm {
			res.watermarks[st.ID.Operator] = st.Watermark
		}
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("the job failed: %v", err)
	}
	return res
}

// sourceDeadLetters lists the sources' stored dead letters, without when
// they were stored.
func (h *readingsHarness) sourceDeadLetters() []string {
	logs, err := ingest.OpenLogs(ingest.Dir(h.dir), ingest.LogOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	defer logs.Close()
	stored, err := logs.DeadLetters(0, 1<<20)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, dl := range stored {
		if dl.Operator == "" {
			out = append(out, fmt.Sprintf("%s %d %q %q", dl.Source, dl.Offset, dl.Topic, dl.Reason))
		}
	}
	slices.Sort(out) // in offset order by source; the sources' interleaving is their own
	return out
}

// checkReadings runs n generated readings of each source through the
// pipeline twice: in one life, and in lives that crash after a random
// share of them, each restoring the last checkpoint and replaying what
// followed. Neither may fail; every reading is a record or a dead letter;
// both reject the same records and store the same dead letters.
func checkReadings(t testing.TB, mode string, telemetry, events []ingest.Message, rng *rand.Rand) {
	all := int64(len(telemetry) + len(events))
	whole := newReadingsHarness(t, mode, fmt.Sprintf("readings-%d-a", rng.Uint64()))
	whole.feed(telemetry, events)
	once := whole.life(0, all, false)
	if once.read != all {
		t.Fatalf("the sources made %d records and dead letters of %d messages", once.read, all)
	}

	crashing := newReadingsHarness(t, mode, fmt.Sprintf("readings-%d-b", rng.Uint64()))
	crashing.feed(telemetry, events)
	rejections := make(map[rejection]bool)
	for lives := 0; ; lives++ {
		var r lifeResult
		if crash := lives < 3 && rng.IntN(3) > 0; crash {
			at := rng.Int64N(all + 1)
			r = crashing.life(at, at+rng.Int64N(all+1-at), true)
		} else {
			r = crashing.life(0, all, false)
			for k := range r.rejections {
				rejections[k] = true
			}
			break
		}
		for k := range r.rejections {
			rejections[k] = true
		}
	}
	if !maps.Equal(rejections, once.rejections) {
		var only, lacks []string
		for k := range rejections {
			if !once.rejections[k] {
				only = append(only, sorted(map[rejection]bool{k: true})...)
			}
		}
		for k := range once.rejections {
			if !rejections[k] {
				lacks = append(lacks, sorted(map[rejection]bool{k: true})...)
			}
		}
		t.Fatalf("a replay rejected other records than one life did:\nonly after a replay: %q\nonly in one life: %q", only, lacks)
	}
	// A source's dead letters are stored once each, whatever the replays.
	if sa, sb := whole.sourceDeadLetters(), crashing.sourceDeadLetters(); !slices.Equal(sa, sb) {
		t.Fatalf("a replay stored other dead letters than one life did:\nonce:\n%s\nreplayed:\n%s", strings.Join(sa, "\n"), strings.Join(sb, "\n"))
	}
}

func sorted(m map[rejection]bool) []string {
	var out []string
	for k := range m {
		out = append(out, fmt.Sprintf("%s@%s:%d: %.60s", k.operator, k.log, k.offset, k.reason))
	}
	slices.Sort(out)
	return out
}

// TestReadingsPipelineHasEveryKind: the pipeline the readings are run
// through has an operator of every kind.
func TestReadingsPipelineHasEveryKind(t *testing.T) {
	h := newReadingsHarness(t, "exactly-once", "kinds")
	have := map[string]bool{}
	for _, o := range h.cfg.Operators {
		have[o.Type] = true
	}
	for _, k := range config.OperatorKinds() {
		if !have[k] {
			t.Errorf("readingsPipeline has no operator of kind %s", k)
		}
	}
}

func TestNoReadingStopsTheJob(t *testing.T) {
	for seed := range *readingsSeeds {
		mode := []string{"exactly-once", "unaligned", "at-least-once"}[seed%3]
		t.Run(fmt.Sprintf("seed=%d/%s", seed, mode), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 31))
			telemetry, events := readingsGen{rng}.messages(150)
			checkReadings(t, mode, telemetry, events, rng)
		})
	}
}

// FuzzReadings runs a reading of the fuzzer's, with a few drawn from its
// seed, through the pipeline as TestNoReadingStopsTheJob does: as a
// message of each source (of a topic with level as the level a key may
// come from, when a broker would deliver it) or as the payload of one.
func FuzzReadings(f *testing.F) {
	for _, c := range []struct {
		level   string
		payload string
	}{
		{"", `{"temp": 21, "humidity": 50, "k": "", "v": 1, "factor": 2, "site": ""}`},
		{" ", `{"temp": 21, "k": " ", "v": 1, "site": "\u0000"}`},
		{"dev", `{"temp": 1e308, "k": 1e308, "v": -1e308, "factor": 1e308}`},
		{"dev", `{"temp": 21, "k": true, "v": 1}`},
		{"dev", `{"temp": 21, "k": {"a": 1}, "v": [1]}`},
		{"dev", "{\"temp\": 21, \"k\": \"\xff\xfe\", \"v\": 1, \"site\": \"#\"}"},
		{"dev", `{"temp": 21, "ts": "9999-12-31T23:59:59.999Z", "k": "+", "v": 0}`},
		{"dev", `{"temp": 21, "ts": -62135596800000}`},
		{"dev", `not json`},
	} {
		f.Add(c.level, []byte(c.payload), uint64(len(c.payload)))
	}
	f.Fuzz(func(t *testing.T, level string, payload []byte, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 31))
		telemetry, events := readingsGen{rng}.messages(3)
		at := telemetry[len(telemetry)-1].Received
		if !strings.ContainsAny(level, "/+#\x00") && isUTF8(level) {
			telemetry = append(telemetry, ingest.Message{Topic: "sensors/" + level + "/telemetry", Payload: payload, Received: at})
			events = append(events, ingest.Message{Topic: "events/" + level, Payload: payload, Received: at})
		} else {
			telemetry = append(telemetry, ingest.Message{Topic: "sensors/dev/telemetry", Payload: payload, Received: at})
		}
		checkReadings(t, "exactly-once", telemetry, events, rng)
	})
}

// TestReasonsShowWhatTheFileWrites: where a pipeline file takes a source's
// field or an operator's expression from the environment (${VAR}), the
// reasons for the dead letters and rejections of a run show them as the
// file writes them, never what the environment gave: they are stored,
// served and published.
func TestReasonsShowWhatTheFileWrites(t *testing.T) {
	const pipeline = `
brokers:
  local: {embedded: true}
checkpoints: {interval: 1h}
sources:
  - {id: telemetry, broker: local, topics: ["t/{device}"], key: "${KEY}", value: "${VALUE}"}
  - {id: events, broker: local, topics: ["e"], value: v}
operators:
  - {id: hot, type: filter, inputs: [telemetry], expr: "humidity > ${LIMIT}"}
  - {id: scaled, type: map, inputs: [events], expr: "value * ${FACTOR}"}
`
	secrets := map[string]string{"KEY": "k_SECRET", "VALUE": "temp_SECRET", "LIMIT": "123456789", "FACTOR": "factor_SECRET"}
	cfg, errs := config.Parse("env.yaml", []byte(pipeline), func(name string) (string, bool) { v, ok := secrets[name]; return v, ok })
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	br, err := sharedBroker()
	if err != nil {
		t.Fatal(err)
	}
	h := &readingsHarness{t: t, cfg: cfg, dir: t.TempDir(), broker: br, id: "env"}
	at := time.UnixMilli(1_700_000_000_000)
	h.feed([]ingest.Message{
		{Topic: "t/d", Payload: []byte(`{"temp_SECRET": 1}`), Received: at},                  // no key
		{Topic: "t/d", Payload: []byte(`{"k_SECRET": "d"}`), Received: at},                   // no value
		{Topic: "t/d", Payload: []byte(`{"k_SECRET": "d", "temp_SECRET": 1}`), Received: at}, // no humidity
	}, []ingest.Message{{Topic: "e", Payload: []byte(`{"v": 1}`), Received: at}}) // no factor
	res := h.life(0, 4, false)
	var reasons []string
	for r := range res.rejections {
		reasons = append(reasons, r.reason)
	}
	reasons = append(reasons, h.sourceDeadLetters()...)
	joined := strings.Join(reasons, "\n")
	for _, want := range []string{`key field \"${KEY}\" is missing`, `value field \"${VALUE}\" is missing`, // as sourceDeadLetters quotes them
		`filter "humidity > ${LIMIT}": `, `map "value * ${FACTOR}": `} {
		if !strings.Contains(joined, want) {
			t.Errorf("no reason says %s:\n%s", want, joined)
		}
	}
	if strings.Contains(joined, "SECRET") || strings.Contains(joined, "123456789") {
		t.Errorf("a reason shows what the environment gave:\n%s", joined)
	}
}
