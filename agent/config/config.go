// Package config reads cairn's pipeline files: YAML parsed through yaml.v3
// nodes, so that every problem is reported with its file, line and column,
// all of them at once. Strings may refer to the environment as ${VAR}.
// Unknown fields and wrong types are errors, and so is what the agent
// would fail on when it runs, as far as the file tells: an expression
// over fields its records lack, an address it cannot listen on or dial,
// and (Load) a named file it cannot read.
//
// The types a file is decoded into are its reference, docs/config.md,
// which a test makes from them and compares (`go test ./agent/config -run
// TestConfigReference -update` writes it): a field's doc comment, written
// for those who write the files and in their names, is its description;
// its `default` tag is the value it takes when the file leaves it out,
// which setDefaults applies (applyDefaults names the two exceptions); and
// the lists the validator checks values against (operatorKinds, with
// what each kind needs; logLevels, windowKinds, ...) are its allowed
// values.
//
// Each kind of operator is defined in one place, a file of its own
// (op_*.go; kinds that share their settings share one): the settings it
// takes, which Operator embeds, what it needs, its own checks, what
// docs/config.md says it does and how it is built (Operator.Build).
// operatorKinds lists them.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dustin/go-humanize"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/graph/exprop"
	"github.com/cairn-edge/cairn/mqttio"
)

// Config is a whole pipeline file.
type Config struct {
	Pos
	// The agent's own settings. A reload may change `log_level`,
	// `log_summary_interval`, `retained_savepoints` and
	// `max_output_backlog`; it is refused, as a whole, if any other of
	// them changed: restart the agent to apply that.
	Agent Agent `yaml:"agent"`
	// The MQTT brokers, by name: sources and sinks name one in `broker`.
	// A reload is refused if they changed.
	Brokers map[string]*Broker `yaml:"brokers"`
	// How the pipeline is checkpointed.
	Checkpoints Checkpoints `yaml:"checkpoints"`
	// The inputs, one at least: MQTT subscriptions, or the built-in
	// simulator.
	Sources []*Source `yaml:"sources"`
	// The steps of the graph, each reading sources and operators listed
	// above it.
	Operators []*Operator `yaml:"operators"`
	// The outputs: each publishes the records of a source or an operator
	// to an MQTT broker, once the checkpoint that holds them completes,
	// each as a JSON object (`output`; docs/outputs.md gives its fields)
	// with an `id` (`<sink>-<epoch>-<subtask>-<position>-<hash>`) that is
	// the same for the same output: a consumer that drops repeated ids
	// sees each record once.
	Sinks []*Sink `yaml:"sinks"`
	// The upload of completed checkpoints to S3-compatible storage, and
	// the restore from there when the data directory holds none that
	// verifies. Absent: off. Secrets come from the environment (`${VAR}`)
	// or from files, and are never logged. A reload is refused if it
	// changed.
	Remote *Remote `yaml:"remote"`

	pos positions
	env fromEnv
}

// at returns where the file gave the value of the field at address field
// (such as &b.URL), or of an entry of it (entry), or else def: the
// position of the field's mapping, say.
func (c *Config) at(field any, def Pos) Pos {
	if p, ok := c.pos[field]; ok {
		return p
	}
	return def
}

// inside returns the position of the character at column col (counted in
// characters from 1) of the string value of the field at address field,
// or of a mapping's entry of it, if the file holds the value as it is on
// one line.
func (c *Config) inside(field any, col int) (Pos, bool) {
	p, ok := c.pos[verbatim{field}]
	if !ok || col < 1 {
		return Pos{}, false
	}
	return Pos{p.Line, p.Col + col - 1}, true
}

// Agent is the daemon's own settings.
type Agent struct {
	Pos
	// The directory of the checkpoint store, the ingest logs, the
	// savepoints and the control socket `cairn.sock`. A relative one is
	// beside the pipeline file, not in the working directory, so that
	// `cairn status -c /etc/cairn/pipeline.yaml` finds the agent from
	// anywhere.
	DataDir string `yaml:"data_dir" default:"data"`
	// The least severe level logged, in any case (`warning` is `warn`
	// too). `cairn run --log-level` overrides it.
	LogLevel string `yaml:"log_level" default:"info"`
	// Level is LogLevel parsed.
	Level slog.Level `yaml:"-"`
	// A TCP address, host:port, on which Prometheus metrics are served at
	// `/metrics`: `127.0.0.1:9100` for this device only, `:9100` for
	// every interface. Empty: no metrics.
	Metrics string `yaml:"metrics"`
	// A TCP address, host:port, on which the control API is served
	// besides the unix socket `cairn.sock` in `data_dir`: `127.0.0.1:8080`
	// for this device only, `:8080` for every interface. Needs
	// `api_token_file`. Empty: the socket only.
	API string `yaml:"api"`
	// A file holding the control API's token, 16 characters or more
	// (spaces and line breaks around it are not part of it), which
	// callers send as `Authorization: Bearer TOKEN`. Only its owner may
	// read the file, as any that holds a secret.
	APITokenFile string `yaml:"api_token_file"`
	// How the agent logs to stderr: `text`, a line of logfmt
	// `key=value` pairs each, or `json`, a JSON object a line. Read when
	// the agent starts.
	LogFormat string `yaml:"log_format" default:"text"`
	// How often an info line says what the checkpoints did since the
	// last (each one is logged at debug level); at least `1s`.
	LogSummaryInterval time.Duration `yaml:"log_summary_interval" default:"5m"`
	// How many of the savepoint files `cairn savepoint` numbers itself
	// (without `--name`) it keeps in `savepoints` in `data_dir`, the
	// newest; at least 1. Named savepoints stay until deleted.
	RetainedSavepoints int `yaml:"retained_savepoints" default:"5"`
	// A soft limit on the Go runtime's memory, a size such as `48MiB` or
	// `64MB`, at least 8MiB (`debug.SetMemoryLimit`): near it the
	// garbage collector runs more often instead of letting the heap grow
	// to twice the live data. Set it to about 1.7 times the live heap
	// that `cairn status` shows at the pipeline's peak: lower, and the
	// collector runs most of the time. Empty: none, or `GOMEMLIMIT` from
	// the environment. Read when the agent starts.
	MemoryLimit string `yaml:"memory_limit"`
	// MemoryLimitBytes is MemoryLimit parsed; 0 when it is empty.
	MemoryLimitBytes int64 `yaml:"-"`
	// The output the sinks may hold, deflated, until their brokers
	// acknowledge it, a size of at least `64KiB`: above it the sources
	// stop reading from their ingest logs (MQTT input is still logged and
	// acknowledged), below three quarters of it they read again.
	MaxOutputBacklog string `yaml:"max_output_backlog" default:"32MiB"`
	// MaxOutputBacklogBytes is MaxOutputBacklog parsed.
	MaxOutputBacklogBytes int64 `yaml:"-"`
	// The longest a received message waits for the fsync of the ingest
	// log that makes it durable and acknowledges it to the broker, at
	// most `1m`. Longer writes the flash less, and delays processing and
	// acknowledgements, never data.
	SyncInterval time.Duration `yaml:"sync_interval" default:"1s"`
}

// Broker is an MQTT broker: a real one (URL) or an embedded one.
type Broker struct {
	Pos
	// Run an MQTT broker in the agent (mochi-mqtt, its sessions in
	// memory only) for the gateway's devices, rather than dial one at
	// `url`. It acknowledges a device's message before the ingest log
	// has synced it: a power cut can lose what it acknowledged.
	Embedded bool `yaml:"embedded" default:"false"`
	// The embedded broker's address, host:port. One that is not
	// loopback takes clients from the network: it needs `users` or
	// `allow_anonymous: true`.
	Listen string `yaml:"listen" default:"127.0.0.1:18830" defaultif:"Embedded"`
	// The broker to dial, unless `embedded`: `tcp://HOST:1883`, or for
	// TLS `ssl://HOST:8883` (also `mqtt`, `mqtts`, `tls`, `tcps`,
	// `mqtt+ssl`; `ws` and `wss`, whose port may be left out;
	// `unix:///path`).
	URL string `yaml:"url"`
	// The base of the client ids of the agent's clients, a persistent
	// session each: `-` and the source's (and its subtask's) or the
	// sink's id follow it. Letters, digits, `-`, `_`, `.` and `:` only
	// (MQTT 3.1.1 promises letters and digits; `#` and `+` are wildcards
	// and `/` separates the levels of the topics brokers make of client
	// ids). Empty: `cairn-` and the host name.
	ClientID string `yaml:"client_id"`
	// The user name the agent's clients give.
	Username string `yaml:"username"`
	// Their password, such as `${MQTT_PASSWORD}`; or `password_file`,
	// not both.
	Password string `yaml:"password"`
	// A file holding the password; line breaks at its end are not part
	// of it.
	PasswordFile string `yaml:"password_file"`
	// A file of PEM certificates of the authorities that vouch for the
	// broker's; default the system's. Needs a `url` that speaks TLS.
	CAFile string `yaml:"ca_file"`
	// A file holding the agent's client certificate, PEM, for brokers
	// that authenticate clients by theirs; with `key_file`. Needs a `url`
	// that speaks TLS.
	CertFile string `yaml:"cert_file"`
	// A file holding the client certificate's private key, PEM; with
	// `cert_file`.
	KeyFile string `yaml:"key_file"`
	// The MQTT keepalive: how often a client makes itself heard, and so
	// how soon a lost connection is noticed.
	KeepAlive time.Duration `yaml:"keepalive" default:"30s"`
	// A topic to which each of the agent's clients publishes `online`
	// (retained) when it connects and, as its last will, `offline` when
	// its connection is lost. With it, the agent also publishes its
	// status as JSON, retained, to the topic with `/json` added (see
	// docs/fleet.md), for `cairn top --fleet`.
	StatusTopic string `yaml:"status_topic"`
	// How often the agent publishes its status to `status_topic`/json,
	// `1s` or more; a change that matters (its state, a failed or late
	// checkpoint, a broker lost, dead letters, input held) is published
	// at once. Each message is some 500 bytes (up to 1 KB): at `10s`,
	// about 5 MB a day on the uplink.
	StatusInterval time.Duration `yaml:"status_interval" default:"10s"`
	// Optional: the broker's in-flight window per client, 1 to 65535:
	// the QoS 1 messages it sends without waiting for acknowledgements
	// (mosquitto's `max_inflight_messages`). A source learns the window
	// from what the broker sends, and commits its ingest log as soon as
	// the window is full rather than stall the broker until
	// `agent.sync_interval`; set, this is the window from the start, and
	// the most a group waits for (a narrower window is still learned).
	MaxInflight int `yaml:"max_inflight"`
	// The clients an embedded broker lets in, by name and password, and
	// what each may publish and subscribe to. The agent's own clients
	// connect with credentials made for the process, and no one else may
	// use their client ids.
	Users []*BrokerUser `yaml:"users"`
	// Whether an embedded broker lets in clients that give no user name.
	// Default: no once `users` are listed; without them, yes on a
	// loopback `listen` address (this device only) and no on any other,
	// where anyone on the network could read every reading and inject
	// their own.
	AllowAnonymous *bool `yaml:"allow_anonymous"`
	// What an embedded broker's clients that give no user name may
	// publish and subscribe to (`publish`, `subscribe`, as a user's);
	// left out, any topic but the agent's own.
	Anonymous *BrokerAnonymous `yaml:"anonymous"`
	// What an embedded broker's clients may make it hold and do, so that
	// no client, whatever it sends, exhausts the agent (docs/security.md).
	// They bind the clients at `listen`, not the agent's own, which
	// connect to a socket only the agent's process may use; an embedded
	// broker always has them, by default these.
	Limits *BrokerLimits `yaml:"limits"`
}

// BrokerUser is a client an embedded broker lets in, and what it may
// publish and subscribe to: without `publish` and `subscribe`, any topic
// but the agent's own.
type BrokerUser struct {
	Pos
	// The client's user name.
	Username string `yaml:"username,required"`
	// Its password, such as `${MQTT_PASSWORD}`; or `password_file`: one
	// of them.
	Password string `yaml:"password"`
	// A file holding the password; line breaks at its end are not part
	// of it.
	PasswordFile string `yaml:"password_file"`
	BrokerGrants
}

// AnonymousAllowed reports whether an embedded broker lets in clients
// that give no user name (Broker.AllowAnonymous): by default, only on
// loopback and only when it lists no users.
func (b *Broker) AnonymousAllowed() bool {
	if b.AllowAnonymous != nil {
		return *b.AllowAnonymous
	}
	return len(b.Users) == 0 && b.ListensLocally()
}

// ListensLocally reports whether an embedded broker takes connections
// from this device only (a loopback listen address).
func (b *Broker) ListensLocally() bool { return loopback(b.Listen) }

// loopback reports whether a listen address takes connections from this
// device only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Checkpoints is the checkpointing configuration.
type Checkpoints struct {
	Pos
	// How often a checkpoint is taken; `0s`: only when asked for (`cairn
	// checkpoint`, `cairn savepoint`, a stop, a reload).
	Interval time.Duration `yaml:"interval" default:"10s"`
	// The guarantee, in any case and with `_` for `-` if you like:
	// `exactly-once` aligns barriers, holding an input whose barrier came
	// until the others' come; `at-least-once` never holds one, so a
	// restore may process records twice; `unaligned` is exactly-once
	// without alignment, storing with the checkpoint the records its
	// barriers overtook.
	Mode string `yaml:"mode" default:"exactly-once"`
	// A checkpoint not complete this long after it started is aborted.
	Timeout time.Duration `yaml:"timeout" default:"10m"`
	// The least time from the end of one checkpoint to the start of the
	// next; when above 0, one at most is in flight.
	MinPause time.Duration `yaml:"min_pause" default:"0s"`
	// How many checkpoints may be in flight at once.
	MaxConcurrent int `yaml:"max_concurrent" default:"1"`
	// How many checkpoints in a row may fail (time out, be declined, fail
	// to be written) before the pipeline fails; below 0: any number.
	TolerableFailures *int `yaml:"tolerable_failures" default:"0"`
	// How many completed checkpoints the data directory keeps, the
	// newest, with what they reference; the ingest logs keep the input
	// of the oldest. A reload is refused if it changed.
	Retained int `yaml:"retained" default:"3"`
	// Whether a snapshot stores only the keyed state changed since the
	// subtask's last completed one.
	Incremental bool `yaml:"incremental" default:"false"`
	// With `incremental`, the length of a chain of snapshots at which a
	// whole one is taken again.
	MaxChain int `yaml:"max_chain" default:"10"`
	// In mode `exactly-once`, how long a subtask's barrier alignment may
	// take before its checkpoint switches to unaligned; `0s`: it never
	// does.
	AlignmentTimeout time.Duration `yaml:"alignment_timeout" default:"0s"`
}

// Source is an input: an MQTT subscription or the built-in simulator.
type Source struct {
	Pos
	// The source's name, which operators and sinks read it by: 1 to 64
	// letters, digits, `_`, `-` and `.`, unique among the sources,
	// operators and sinks.
	ID string `yaml:"id,required"`
	// How many subtasks read the source, 1 to 128. Each subscribes to
	// every topic on a persistent session of its own and logs the
	// messages of the topics that fall to it. A checkpoint restores only
	// under the parallelism it was taken with, and a reload is refused
	// if it changed.
	Parallelism int `yaml:"parallelism" default:"1"`
	// The name of the broker, under `brokers`, to subscribe at.
	Broker string `yaml:"broker"`
	// The topic patterns to subscribe to, at QoS 1 on a persistent
	// session: a level in braces, as in `sensors/{device}/telemetry`,
	// matches any and becomes a string field of the records; `#` only
	// last. Write those with braces as block-list items or in quotes
	// (YAML reads `[a/{b}]` as a mapping). No shared subscription
	// (`$share/...`) at a parallelism above 1.
	Topics []string `yaml:"topics"`
	// What a payload is: `json`, a JSON object whose fields the records
	// carry (one that is not is a dead letter), or `raw`, bytes kept as
	// they are, with no fields.
	Format string `yaml:"format" default:"json"`
	// The field (of the payload, or a topic level) that becomes the
	// record's key: a string, or a number, written in plain decimal.
	// Empty: no key.
	Key string `yaml:"key"`
	// The payload field, a number, that becomes the record's value.
	Value string `yaml:"value"`
	// The payload field that holds the record's event time: milliseconds
	// since the epoch, or an RFC 3339 string, of the years 0001 to 9999.
	// Empty: the time the message was received, and no watermarks, so
	// no operator in event time may read the source's records (a
	// window's `time: processing` may).
	Time string `yaml:"time"`
	// With `time`, how far a record's event time may be behind the
	// newest one seen and still count as on time: the watermark trails
	// the newest event time by this much.
	OutOfOrderness time.Duration `yaml:"out_of_orderness" default:"0s"`
	// With `time`, how far ahead of the gateway's clock a reading's event
	// time may be: one further ahead, from a device whose clock is wrong,
	// is a dead letter (`bad_time`) and never moves event time, which
	// would otherwise make every later reading late. `0s`: no bound.
	MaxFuture time.Duration `yaml:"max_future" default:"5m"`
	// With `time`, how far behind the gateway's clock a reading's event
	// time may be; one further behind is a dead letter (`bad_time`).
	// `0s`: no bound (such a reading is late, or on time if its window is
	// still open).
	MaxPast time.Duration `yaml:"max_past" default:"0s"`
	// With `time`, the earliest event time a reading may have, RFC 3339:
	// an earlier one is a dead letter (`bad_time`), a device whose clock
	// was never set. It is also the earliest the gateway's own clock can
	// read and be trusted: while it reads earlier (a board without a
	// real-time clock before NTP sets it), `max_future` and `max_past`
	// are not applied, and an idle source does not follow the clock.
	MinTime string `yaml:"min_time" default:"2020-01-01T00:00:00Z"`
	// With `time`, how long the source may have nothing to read before it
	// is idle: its event time then follows the gateway's clock less
	// `out_of_orderness` and `agent.sync_interval`, so that its last
	// windows close, and a union or join it feeds goes on with its other
	// inputs' time. A reading that comes back behind it is late. `0s`:
	// never idle; a window then closes only when a later reading comes.
	IdleTimeout time.Duration `yaml:"idle_timeout" default:"1m"`
	// Subscribe at QoS 0 and keep no ingest log: faster, and a crash
	// loses what was not yet checkpointed.
	AtMostOnce bool `yaml:"at_most_once" default:"false"`
	// A topic on the source's broker to which its dead letters (the
	// messages it cannot decode) are published too, while it is
	// connected; the data directory keeps them in any case.
	DeadLetterTopic string `yaml:"dead_letter_topic"`
	// The payload fields the records carry, by name, with their types:
	// then the expressions of the operators the records reach are
	// checked against them. A promise that is not enforced: a reading
	// without a field, or with another type there, is rejected by the
	// operator that uses it. Topic levels are string fields, declared or
	// not; `key`, `time` and `value` are the record's own.
	Fields map[string]string `yaml:"fields"`
	// A built-in fleet of sensors instead of MQTT, for demos and tests:
	// no `broker`, no `topics`. A reading's key is its device's name
	// (`dev-000`, `dev-001`, ...), its value a temperature around 24, its
	// payload the strings `device` and `site` and the number `temp`, and
	// its event time the gateway's clock when it is sent (`1s / rate`
	// apart). Every run sends the same devices and temperatures in the
	// same order; a run restored from a checkpoint sends them again from
	// there, at the time of the new run.
	Simulator *Simulator `yaml:"simulator"`
}

// Simulator is a built-in fleet of sensors for demos and tests.
type Simulator struct {
	Pos
	// How many devices send readings; at least 1.
	Devices int `yaml:"devices"`
	// How many readings a second the devices send together; at least 1.
	Rate int `yaml:"rate"`
	// How unevenly the devices send, at least 0 and below 1: at 0 all
	// alike, towards 1 a few send most.
	Skew float64 `yaml:"skew" default:"0"`
	// Another seed makes other readings.
	Seed int64 `yaml:"seed" default:"0"`
}

// Sink is an output.
type Sink struct {
	Pos
	// The sink's name: 1 to 64 letters, digits, `_`, `-` and `.`, unique
	// among the sources, operators and sinks.
	ID string `yaml:"id,required"`
	// The source or operator whose records it publishes.
	Input string `yaml:"input,required"`
	// The name of the broker, under `brokers`, to publish to.
	Broker string `yaml:"broker,required"`
	// The topic to publish to, at QoS 1; `{key}` in it is the record's
	// key. A record whose key makes a topic no broker takes is rejected.
	Topic string `yaml:"topic,required"`
	// Publish with the retain flag: the broker keeps each topic's last
	// message for clients that subscribe later.
	Retain bool `yaml:"retain" default:"false"`
	// How many subtasks publish, each on a connection of its own: 1, or
	// the parallelism of its input, when each takes the records of one
	// input subtask in their order. Then, where everything upstream has
	// one input too, outputs published again after a fallback to an
	// older checkpoint keep their ids (docs/checkpoints.md, "Output ids").
	Parallelism int `yaml:"parallelism" default:"1"`
	// The shape of the messages. Absent: version 2, times in
	// milliseconds, no field renamed or added.
	Output *SinkOutput `yaml:"output"`
}

// SinkOutput is the shape of a sink's messages; docs/outputs.md gives
// every field of both versions.
type SinkOutput struct {
	Pos
	// `2`: one JSON object of lower-case fields that says what made the
	// record (`operator`), what its value is of (`aggregate`) and holds a
	// window's or join's span and counts, or an alarm's `raised`, beside
	// `id`, `key`, `time` and `value`; `"v": 2` tells it from version 1.
	// `1`: the shape before version 2, with the result's details in
	// `payload` under capitalised names (`Start`, `Raised`), for
	// consumers written for it.
	Version int `yaml:"version" default:"2"`
	// How version 2 gives times (`time`, a window's `start` and `end`):
	// `millis`, milliseconds since the epoch; `rfc3339`, an RFC 3339
	// string in UTC to the millisecond; `both`, the milliseconds and,
	// beside each, the string under the name with `_rfc3339`.
	Time string `yaml:"time" default:"millis"`
	// Names version 2's fields take instead of their own, by field
	// (`{key: device, value: temperature}`); any but `id` and `v`.
	Names map[string]string `yaml:"names"`
	// Fields version 2 adds to every message, by name, each a string:
	// `{gateway: "${GATEWAY_ID}"}`.
	Add map[string]string `yaml:"add"`
}

// outputTimes are SinkOutput.Time's.
var outputTimes = []string{"millis", "rfc3339", "both"}

// OutputFormat is the mqttio format of the messages of sink s: its
// output settings, and what its input's records are.
func (c *Config) OutputFormat(s *Sink) mqttio.OutputFormat {
	f := mqttio.OutputFormat{Operator: s.Input, Aggregate: c.AggregateOf(s.Input)}
	for _, o := range c.Operators {
		if o.ID == s.Input && o.Type == opWindow.name {
			f.Aggregates = slices.Sorted(maps.Keys(o.Aggregates))
		}
	}
	if o := s.Output; o != nil {
		f.Version, f.Names, f.Add = o.Version, o.Names, o.Add
		f.Time, _ = mqttio.ParseTimeFormat(o.Time)
	}
	return f
}

// AggregateOf names what the values of operator id's records are of:
// its aggregate, for a window or a join; count or sum for those; ""
// for the others and for sources.
func (c *Config) AggregateOf(id string) string {
	for _, o := range c.Operators {
		if o.ID == id {
			switch o.Type {
			case opWindow.name, opJoin.name:
				return o.Aggregate
			case opCount.name, opSum.name:
				return o.Type
			}
		}
	}
	return ""
}

// WindowHorizon is how far past a record's event time the windows of
// the pipeline's event-time operators may end and still take late
// records: the longest window (or session gap) and its allowed lateness,
// or span of an interval join (its records are kept that long). An idle
// source's event time follows the clock no further than this past its
// newest reading (graph.Idleness).
func (c *Config) WindowHorizon() time.Duration {
	var h time.Duration
	for _, o := range c.Operators {
		if w := o.Window; w != nil && w.Time != "processing" {
			h = max(h, max(w.Size, w.Gap)+w.AllowedLateness)
		}
		if w := o.Within; w != nil && o.Type == opIntervalJoin.name {
			h = max(h, w.Before, w.After)
		}
	}
	return h
}

// ClockBounds are what the job is told of the sources' bounds on event
// time (runtime.Options): the earliest min_time, before which the
// gateway's clock is not trusted, and the largest max_future, beyond
// which a restored watermark is brought back to the clock (0, no such
// bound, where a source with time has none). Sources without time
// bound nothing.
func (c *Config) ClockBounds() (floor time.Time, maxFuture time.Duration) {
	floor = mqttio.ClockFloor
	unbounded := false
	for _, s := range c.Sources {
		if s.Time == "" {
			continue
		}
		b, _ := s.TimeBounds()
		if b.Earliest.Before(floor) {
			floor = b.Earliest
		}
		unbounded = unbounded || b.MaxFuture == 0
		maxFuture = max(maxFuture, b.MaxFuture)
	}
	if unbounded {
		maxFuture = 0
	}
	return floor, maxFuture
}

// ParallelismOf is the parallelism of the source or operator id; 0 if
// there is none.
func (c *Config) ParallelismOf(id string) int {
	for _, s := range c.Sources {
		if s.ID == id {
			return s.Parallelism
		}
	}
	for _, o := range c.Operators {
		if o.ID == id {
			return o.Parallelism
		}
	}
	return 0
}

// The values of the fields that take one of a few words, as the validator
// checks them and docs/config.md lists them.
var (
	// logLevels are Agent.LogLevel's, least severe first.
	logLevels = []logLevel{{"debug", slog.LevelDebug}, {"info", slog.LevelInfo}, {"warn", slog.LevelWarn}, {"error", slog.LevelError}}
	// logFormats are Agent.LogFormat's.
	logFormats = []string{"text", "json"}
	// sourceFormats are Source.Format's.
	sourceFormats = []string{"json", "raw"}
	// onErrors are Operator.OnError's.
	onErrors = []string{OnErrorDeadLetter, OnErrorDrop, OnErrorFail}
)

// A logLevel is a level Agent.LogLevel may name.
type logLevel struct {
	name  string
	level slog.Level
}

// Load reads and validates the file at path, and checks that the files it
// names can be read. A relative path in it (data_dir, every *_file) is
// resolved against the directory of the file at path, where the agent then
// finds it. The error, if any, is Errors.
func Load(path string) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	c, errs := Parse(path, data, osLookup)
	if c.Pos == (Pos{}) {
		return nil, errs // not YAML, or not a mapping
	}
	if errs = append(errs, c.checkFiles(path, errs)...); len(errs) > 0 {
		sortErrors(errs)
		return nil, errs
	}
	c.Agent.DataDir = besideFile(path, c.Agent.DataDir)
	return c, nil
}

// DataDir returns the data directory the pipeline file at path names
// (agent.data_dir, default "data"), needing only what that takes: the
// commands that look for a running agent work from a shell that lacks the
// secrets the rest of the file takes from the environment, and with a file
// whose other parts have errors (an edit not yet applied, say).
func DataDir(path string) (string, error) {
	c, errs, err := parseLeniently(path)
	if err != nil {
		return "", err
	}
	if c.Pos == (Pos{}) {
		return "", errs // not YAML, or not a mapping
	}
	if m := envRef.FindStringSubmatch(c.Agent.DataDir); m != nil {
		return "", Errors{{File: path, Pos: c.Agent.Pos, Msg: fmt.Sprintf("agent.data_dir: environment variable %s is not set", m[1])}}
	}
	return besideFile(path, c.Agent.DataDir), nil
}

// LogFormat returns the log format the pipeline file at path names
// (agent.log_format), "text" when it names none or cannot be read: the
// log is set up before the file is loaded, so that the file's errors are
// logged in it.
func LogFormat(path string) string {
	c, _, err := parseLeniently(path)
	if err != nil || !strings.EqualFold(c.Agent.LogFormat, "json") {
		return "text"
	}
	return "json"
}

// parseLeniently parses the file at path with every environment variable
// set: an unset one is left as it was written.
func parseLeniently(path string) (*Config, Errors, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, nil, err
	}
	c, errs := Parse(path, data, func(name string) (string, bool) {
		if v, ok := osLookup(name); ok {
			return v, true
		}
		return "${" + name + "}", true // left as it was: an error only where it is used
	})
	return c, errs, nil
}

// Parse decodes and validates a config, with lookup as the environment.
// Where the errors come of a line indented less than the block it belongs
// to, which YAML reads as a key of the mapping around that block, the
// error is that line's, alone (dedented).
func Parse(file string, data []byte, lookup func(string) (string, bool)) (*Config, Errors) {
	c, errs, _ := check(file, data, lookup, 0)
	if len(errs) == 0 || c.Pos == (Pos{}) {
		return c, errs // valid, or not YAML (whose dedents syntaxError finds)
	}
	fits := func(lines []string, key int) bool {
		_, moved, found := check(file, []byte(strings.Join(lines, "\n")), lookup, key)
		return (key == 0 || found) && fewerErrors(moved, errs)
	}
	if p, msg, ok := dedented(strings.Split(string(data), "\n"), fits); ok {
		return c, Errors{{File: file, Pos: p, Msg: msg}}
	}
	return c, errs
}

// check decodes and validates a config; keyFound is parse's.
func check(file string, data []byte, lookup func(string) (string, bool), key int) (c *Config, errs Errors, keyFound bool) {
	c = &Config{pos: make(positions), env: make(fromEnv)}
	errs, keyFound = parse(file, data, c, lookup, c.pos, c.env, key)
	if c.Pos == (Pos{}) {
		return c, errs, keyFound // not YAML, or not a mapping: nothing to validate
	}
	v := validator{file: file, errs: errs, c: c}
	v.validate()
	sortErrors(v.errs)
	return c, v.errs, keyFound
}

// fewerErrors reports whether errs, those of a file changed only in the
// indentation of a line, are some of was, the original's, and fewer:
// the change made no new error. Lines are compared, not columns.
func fewerErrors(errs, was Errors) bool {
	left := make(map[string]int)
	for _, e := range was {
		left[fmt.Sprintf("%d %s", e.Line, e.Msg)]++
	}
	for _, e := range errs {
		k := fmt.Sprintf("%d %s", e.Line, e.Msg)
		if left[k] == 0 {
			return false
		}
		left[k]--
	}
	return len(errs) < len(was)
}

// sortErrors puts errs in file order, as Errors promises: the checks run
// section by section (and brokers in map order).
func sortErrors(errs Errors) {
	slices.SortStableFunc(errs, func(a, b Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
}

type validator struct {
	file string
	errs Errors
	c    *Config
	// hidden are the payload fields that only topics from the
	// environment name: errors do not list them.
	hidden map[string]bool
	// ids are the ids of the sources, operators and sinks checked so
	// far; defined those of the sources and operators, which what
	// follows them may read.
	ids, defined map[string]bool
	// fields are the payload fields of the records of each source and
	// operator checked so far (nil: not known).
	fields map[string]exprop.Fields
	// timeless names, for each source and operator checked so far, a
	// source without event time whose records it reads, if any
	// (v.needEventTime).
	timeless map[string]string
}

func (v *validator) errorf(p Pos, format string, args ...any) {
	v.errs = append(v.errs, Error{File: v.file, Pos: p, Msg: fmt.Sprintf(format, args...)})
}

// validate applies the defaults and checks the file section by section,
// each in the order of the file: errors at one position are reported in
// the order they are found.
func (v *validator) validate() {
	c := v.c
	c.applyDefaults()
	c.foldWords()
	v.agent()
	v.checkpoints()
	v.remote()
	for name, b := range c.Brokers {
		v.broker(name, b)
	}
	v.ids, v.defined, v.fields, v.timeless = make(map[string]bool), make(map[string]bool), make(map[string]exprop.Fields), make(map[string]string)
	for _, s := range c.Sources {
		v.source(s)
	}
	for _, o := range c.Operators {
		v.operator(o)
	}
	for _, s := range c.Sinks {
		v.sink(s)
	}
	if len(c.Sources) == 0 {
		v.errorf(c.Pos, "no sources")
	}
}

// agent checks the agent section, and sets what is parsed from it
// (Level, MemoryLimitBytes, MaxOutputBacklogBytes).
func (v *validator) agent() {
	c := v.c
	if c.Agent.API != "" && c.Agent.APITokenFile == "" {
		v.errorf(c.Agent.Pos, "agent.api needs api_token_file: the control API is not served on TCP without a token")
	}
	v.listen(&c.Agent.Metrics, c.Agent.Pos, "agent.metrics", "9100")
	v.listen(&c.Agent.API, c.Agent.Pos, "agent.api", "8080")
	level := strings.ToLower(c.Agent.LogLevel)
	if level == "warning" {
		level = "warn"
	}
	if i := slices.IndexFunc(logLevels, func(l logLevel) bool { return l.name == level }); i >= 0 {
		c.Agent.Level = logLevels[i].level
	} else {
		names := make([]string, len(logLevels))
		for i, l := range logLevels {
			names[i] = l.name
		}
		v.errorf(c.at(&c.Agent.LogLevel, c.Agent.Pos), "log_level: %s is not one of %s", c.show(&c.Agent.LogLevel), strings.Join(names, ", "))
	}
	if !slices.Contains(logFormats, c.Agent.LogFormat) {
		v.errorf(c.at(&c.Agent.LogFormat, c.Agent.Pos), "log_format: %s is neither %s nor %s", c.show(&c.Agent.LogFormat), logFormats[0], logFormats[1])
	}
	if c.Agent.RetainedSavepoints < 1 {
		v.errorf(c.at(&c.Agent.RetainedSavepoints, c.Agent.Pos), "retained_savepoints %s: write 1 or more (5 is the default)", c.show(&c.Agent.RetainedSavepoints))
	}
	if c.Agent.DataDir == "" {
		v.errorf(c.at(&c.Agent.DataDir, c.Agent.Pos), "data_dir \"\": write a directory, beside the pipeline file if relative (data is the default), or leave it out")
	}
	if t := c.Agent.LogSummaryInterval; t < time.Second {
		v.errorf(c.at(&c.Agent.LogSummaryInterval, c.Agent.Pos), "log_summary_interval %s is below 1s", c.show(&c.Agent.LogSummaryInterval))
	}
	if c.Agent.MemoryLimit != "" {
		n, err := humanize.ParseBytes(c.Agent.MemoryLimit)
		switch {
		case err != nil || n > math.MaxInt64:
			v.errorf(c.at(&c.Agent.MemoryLimit, c.Agent.Pos), "memory_limit: %s is not a size such as 48MiB or 64MB", c.show(&c.Agent.MemoryLimit))
		case n < 8<<20:
			v.errorf(c.at(&c.Agent.MemoryLimit, c.Agent.Pos), "memory_limit %s is below 8MiB, where the agent would do little but collect garbage", c.show(&c.Agent.MemoryLimit))
		default:
			c.Agent.MemoryLimitBytes = int64(n)
		}
	}
	if n, err := humanize.ParseBytes(c.Agent.MaxOutputBacklog); err != nil || n > math.MaxInt64 || n < 64<<10 {
		v.errorf(c.at(&c.Agent.MaxOutputBacklog, c.Agent.Pos), "max_output_backlog: %s is not a size of at least 64KiB, such as 32MiB", c.show(&c.Agent.MaxOutputBacklog))
	} else {
		c.Agent.MaxOutputBacklogBytes = int64(n)
	}
	if t := c.Agent.SyncInterval; t <= 0 || t > time.Minute {
		v.errorf(c.at(&c.Agent.SyncInterval, c.Agent.Pos), "sync_interval %s is outside (0, 1m]: it bounds how long a received message waits to be durable", c.show(&c.Agent.SyncInterval))
	}
}

// checkpoints checks the checkpoints section.
func (v *validator) checkpoints() {
	c := v.c
	if mode, err := checkpoint.ParseMode(c.Checkpoints.Mode); err != nil {
		v.errorf(c.at(&c.Checkpoints.Mode, c.Checkpoints.Pos), "%s", c.reason(&c.Checkpoints.Mode, err, "checkpointing mode %s is none of exactly-once, at-least-once, unaligned"))
	} else if t := c.Checkpoints.AlignmentTimeout; t < 0 || t > 0 && mode != checkpoint.ExactlyOnce {
		v.errorf(c.at(&c.Checkpoints.AlignmentTimeout, c.Checkpoints.Pos), "alignment_timeout must be positive and needs mode exactly-once (%s checkpoints do not align)", mode)
	}
	ck := &c.Checkpoints
	for _, f := range []struct {
		field any
		bad   bool
		says  string
	}{
		{&ck.Interval, ck.Interval < 0, "interval %s: write 0s for checkpoints only when asked for, or a duration such as 10s (the default)"},
		{&ck.Timeout, ck.Timeout <= 0, "timeout %s: a checkpoint must be given some time: write a duration such as 10m (the default)"},
		{&ck.MaxConcurrent, ck.MaxConcurrent < 1, "max_concurrent %s: at least 1 checkpoint must be able to run: write 1 (the default) or more"},
		{&ck.Retained, ck.Retained < 1, "retained %s keeps no checkpoint to restore from: write 1 or more (3 is the default)"},
		{&ck.MaxChain, ck.MaxChain < 1, "max_chain %s: write 1 (every snapshot whole) or more (10 is the default)"},
	} {
		if f.bad {
			v.errorf(c.at(f.field, ck.Pos), f.says, c.show(f.field))
		}
	}
}

// id checks the id of a source, operator or sink, the field at field of
// the mapping at p: its form, and that no other has it.
func (v *validator) id(p Pos, field *string) {
	s := *field
	if s == "" {
		return // reported as a missing field
	}
	if err := graph.ValidateID(s); err != nil {
		v.errorf(p, "%s", v.c.reason(field, err, "id %s must be 1 to 64 letters, digits, '_', '-' and '.'"))
	}
	if v.ids[s] {
		v.errorf(p, "id %s is used twice", v.c.show(field))
	}
	v.ids[s] = true
}

// parallelism checks the parallelism n of the mapping at p.
func (v *validator) parallelism(p Pos, n *int) {
	if *n < 1 || *n > graph.DefaultMaxParallelism {
		v.errorf(v.c.at(n, p), "parallelism %s is outside 1..%d", v.c.show(n), graph.DefaultMaxParallelism)
	}
}

// brokerNamed checks that the broker the field at name of the mapping at
// p names is under brokers.
func (v *validator) brokerNamed(p Pos, name *string) {
	if _, ok := v.c.Brokers[*name]; !ok {
		v.errorf(p, "no broker named %s under brokers", v.c.show(name))
	}
}

// source checks source s, and notes it as defined, with the payload
// fields of its records.
func (v *validator) source(s *Source) {
	c := v.c
	v.id(s.Pos, &s.ID)
	v.parallelism(s.Pos, &s.Parallelism)
	v.defined[s.ID] = true
	v.fields[s.ID] = v.sourceFields(s)
	if s.Time == "" && s.Simulator == nil {
		v.timeless[s.ID] = s.ID // no watermarks (agent.build)
	}
	if s.Simulator != nil {
		if s.Broker != "" || len(s.Topics) > 0 {
			v.errorf(s.Pos, "source %s: a simulator has no broker or topics", c.show(&s.ID))
		}
		if s.Simulator.Devices < 1 || s.Simulator.Rate < 1 || s.Simulator.Skew < 0 || s.Simulator.Skew >= 1 {
			v.errorf(s.Simulator.Pos, "simulator needs devices ≥ 1, rate ≥ 1 and 0 ≤ skew < 1")
		}
		return
	}
	v.brokerNamed(s.Pos, &s.Broker)
	if len(s.Topics) == 0 {
		v.errorf(s.Pos, "source %s: no topics", c.show(&s.ID))
	}
	for i, t := range s.Topics {
		topic := entry{&s.Topics, i}
		if _, _, err := mqttio.ParseTopicPattern(t); err != nil {
			v.errorf(c.at(topic, s.Pos), "%s", c.reason(topic, err, "topic %s is no pattern such as sensors/{device}/telemetry: a level is a {name} or text, and # only the last"))
		}
		if s.Parallelism > 1 && mqttio.IsShared(t) {
			v.errorf(c.at(topic, s.Pos), "source %s: topic %s is a shared subscription, which a source of parallelism above 1 cannot take: its subtasks share the topics out among themselves, and each needs every message", c.show(&s.ID), c.show(topic))
		}
	}
	if s.DeadLetterTopic != "" {
		v.topic(&s.DeadLetterTopic, s.Pos, fmt.Sprintf("source %s: dead_letter_topic", c.show(&s.ID)), mqttio.CheckTopic)
	}
	if !slices.Contains(sourceFormats, s.Format) {
		v.errorf(c.at(&s.Format, s.Pos), "source %s: format %s is neither %s nor %s", c.show(&s.ID), c.show(&s.Format), sourceFormats[0], sourceFormats[1])
	}
	v.eventTimeBounds(s)
}

// eventTimeBounds checks the settings that bound source s's event time.
func (v *validator) eventTimeBounds(s *Source) {
	c := v.c
	if _, err := s.TimeBounds(); err != nil {
		v.errorf(c.at(&s.MinTime, s.Pos), "source %s: min_time %s is no RFC 3339 time such as 2020-01-01T00:00:00Z", c.show(&s.ID), c.show(&s.MinTime))
	}
	for _, d := range []struct {
		field *time.Duration
		name  string
	}{{&s.MaxFuture, "max_future"}, {&s.MaxPast, "max_past"}, {&s.IdleTimeout, "idle_timeout"}, {&s.OutOfOrderness, "out_of_orderness"}} {
		if *d.field < 0 {
			v.errorf(c.at(d.field, s.Pos), "source %s: %s is negative; write 0s for none", c.show(&s.ID), d.name)
		}
	}
}

// TimeBounds are the event times source s takes (mqttio.TimeBounds).
func (s *Source) TimeBounds() (mqttio.TimeBounds, error) {
	earliest, err := time.Parse(time.RFC3339, s.MinTime)
	return mqttio.TimeBounds{Earliest: earliest, MaxFuture: s.MaxFuture, MaxPast: s.MaxPast}, err
}

// sink checks sink s.
func (v *validator) sink(s *Sink) {
	c := v.c
	v.id(s.Pos, &s.ID)
	v.brokerNamed(s.Pos, &s.Broker)
	if !v.defined[s.Input] {
		v.errorf(s.Pos, "sink %s: input %s is not a source or an operator", c.show(&s.ID), c.show(&s.Input))
	} else if in := c.ParallelismOf(s.Input); s.Parallelism != 1 && s.Parallelism != in {
		// Spread over several connections, a key's outputs would
		// overtake each other.
		v.errorf(c.at(&s.Parallelism, s.Pos), "sink %s: parallelism %s must be 1 or its input's, %d", c.show(&s.ID), c.show(&s.Parallelism), in)
	}
	if s.Topic != "" || c.at(&s.Topic, Pos{}) != (Pos{}) { // a missing one is reported as such
		v.topic(&s.Topic, s.Pos, fmt.Sprintf("sink %s: topic", c.show(&s.ID)), mqttio.CheckTopicTemplate)
	}
	if o := s.Output; o != nil {
		if o.Version != 1 && o.Version != 2 {
			v.errorf(c.at(&o.Version, o.Pos), "sink %s: output version %s: write 2 (the default) or 1", c.show(&s.ID), c.show(&o.Version))
			return
		}
		if !slices.Contains(outputTimes, o.Time) {
			v.errorf(c.at(&o.Time, o.Pos), "sink %s: output time %s is not one of %s", c.show(&s.ID), c.show(&o.Time), strings.Join(outputTimes, ", "))
			return
		}
		f := c.OutputFormat(s)
		if err := f.Check(); err != nil {
			at := c.at(&o.Names, o.Pos)
			if strings.Contains(err.Error(), " added ") {
				at = c.at(&o.Add, o.Pos)
			}
			v.errorf(at, "sink %s: %v", c.show(&s.ID), err)
		}
	}
}

// topic checks a topic the agent publishes to, the field at t (named
// name), with check: mqttio.CheckTopic, or CheckTopicTemplate for a
// sink's, whose "{key}" only a record fills in. A broker drops the
// connection of a client that publishes to a topic it does not take. The
// error is at the very character where the file holds the value as it
// is; of a value from the environment it says what is refused, not which
// character (or length) of it is.
func (v *validator) topic(t *string, def Pos, name string, check func(string) error) {
	var te *mqttio.TopicError
	if !errors.As(check(*t), &te) {
		return
	}
	p, reason := v.c.at(t, def), te.Reason
	switch {
	case v.c.fromEnv(t):
		reason = "it is empty, over 65,535 bytes or 201 levels, or holds a wildcard (+, #), NUL, a control character or a noncharacter"
	case te.At >= 0:
		if q, ok := v.c.inside(t, utf8.RuneCountInString((*t)[:te.At])+1); ok {
			p = q
		}
	}
	v.errorf(p, "%s %s is not a valid MQTT topic: %s", name, v.c.show(t), reason)
}

// listen checks an address to listen on, the field at addr (named name):
// host:port with a numeric port, as net.Listen takes it. An empty one is
// off, or the default.
func (v *validator) listen(addr *string, def Pos, name, examplePort string) {
	if *addr == "" {
		return
	}
	p := v.c.at(addr, def)
	_, port, err := net.SplitHostPort(*addr)
	if err != nil {
		if _, err := strconv.ParseUint(*addr, 10, 16); err == nil && !v.c.fromEnv(addr) {
			examplePort = *addr // a port alone
		}
		v.errorf(p, "%s: %s is not host:port: write 127.0.0.1:%s (this device only) or :%s (every interface)", name, v.c.show(addr), examplePort, examplePort)
		return
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		which := fmt.Sprintf("port %q of", port)
		if v.c.fromEnv(addr) {
			which = "the port of"
		}
		v.errorf(p, "%s: %s %s is not a number 0–65535", name, which, v.c.show(addr))
	}
}

// broker checks broker name, b.
func (v *validator) broker(name string, b *Broker) {
	switch {
	case b.Embedded && b.URL != "":
		v.errorf(b.Pos, "broker %q: embedded or url, not both", name)
	case !b.Embedded && b.URL == "":
		v.errorf(b.Pos, "broker %q: needs url (or embedded: true)", name)
	case b.Password != "" && b.PasswordFile != "":
		v.errorf(b.Pos, "broker %q: password or password_file, not both", name)
	case b.MaxInflight < 0 || b.MaxInflight > 65535:
		v.errorf(v.c.at(&b.MaxInflight, b.Pos), "broker %q: max_inflight %s is outside 1..65535", name, v.c.show(&b.MaxInflight))
	}
	if b.KeepAlive < time.Second {
		v.errorf(v.c.at(&b.KeepAlive, b.Pos), "broker %q: keepalive %s: below 1s, a lost connection would go unnoticed (MQTT's 0 turns keepalives off): write 1s or more (30s is the default)", name, v.c.show(&b.KeepAlive))
	}
	if b.ClientID != "" {
		if bad := badClientIDChars(b.ClientID); bad != "" {
			if v.c.fromEnv(&b.ClientID) {
				bad = "characters it may not" // which could tell what the environment gave
			}
			v.errorf(v.c.at(&b.ClientID, b.Pos), "broker %q: client_id %s holds %s: a client id may hold letters, digits and %s "+
				"(MQTT 3.1.1 promises only letters and digits; # and + are wildcards, and / separates the levels of the topics brokers make of client ids)",
				name, v.c.show(&b.ClientID), bad, clientIDPunct)
		}
	}
	v.address(name, b)
	if b.StatusTopic != "" {
		v.topic(&b.StatusTopic, b.Pos, fmt.Sprintf("broker %q: status_topic", name), func(topic string) error {
			if err := mqttio.CheckTopic(topic); err != nil {
				return err
			}
			return mqttio.CheckTopic(mqttio.StatusJSONTopic(topic))
		})
	}
	if b.StatusInterval < time.Second {
		v.errorf(v.c.at(&b.StatusInterval, b.Pos), "broker %q: status_interval %s is less than 1s", name, v.c.show(&b.StatusInterval))
	}
}

// clientIDPunct are the characters besides ASCII letters and digits that
// a client id may hold: the agent's own ids join a base and the source's or
// sink's id with "-", and host names hold "-" and ".".
const clientIDPunct = "- _ . :"

// badClientIDChars returns the characters of id that a client id may not
// hold, quoted, or "".
func badClientIDChars(id string) string {
	var bad []string
	for _, r := range id {
		ok := r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:", r))
		if q := strconv.QuoteRune(r); !ok && !slices.Contains(bad, q) {
			bad = append(bad, q)
		}
	}
	return strings.Join(bad, ", ")
}

// address checks a broker's address (its url, or the listen address of
// an embedded one) and its TLS settings.
func (v *validator) address(name string, b *Broker) {
	if b.Embedded {
		v.listen(&b.Listen, b.Pos, fmt.Sprintf("broker %q: listen", name), "18830")
		v.users(name, b)
		v.limits(name, b.Limits)
	} else if len(b.Users) > 0 || b.AllowAnonymous != nil || b.Anonymous != nil {
		v.errorf(b.Pos, "broker %q: users, allow_anonymous and anonymous are an embedded broker's: who may connect to it, and do what", name)
	} else if b.Limits != nil {
		v.errorf(v.c.at(&b.Limits, b.Pos), "broker %q: limits are an embedded broker's: what its clients may make it hold", name)
	}
	usesTLS := false
	if b.URL != "" {
		var err error
		if usesTLS, err = mqttio.CheckBrokerURL(b.URL); err != nil {
			v.errorf(v.c.at(&b.URL, b.Pos), "broker %q: %s", name, v.c.reason(&b.URL, err,
				"URL %s is none the agent can dial: it needs a scheme, a host and a port, such as ssl://broker.example:8883"))
			return
		}
	}
	tlsFiles := []struct {
		name string
		path *string
	}{{"ca_file", &b.CAFile}, {"cert_file", &b.CertFile}, {"key_file", &b.KeyFile}}
	for _, f := range tlsFiles {
		switch {
		case *f.path == "":
		case b.Embedded:
			v.errorf(v.c.at(f.path, b.Pos), "broker %q: %s: the embedded broker speaks no TLS", name, f.name)
		case b.URL != "" && !usesTLS:
			scheme, _, _ := strings.Cut(b.URL, "://")
			instead := fmt.Sprintf(", not %s://", strings.ToLower(scheme))
			if v.c.fromEnv(&b.URL) {
				instead = ""
			}
			v.errorf(v.c.at(f.path, b.Pos), "broker %q: %s needs a url that speaks TLS, such as ssl://HOST:8883%s", name, f.name, instead)
		}
	}
	if (b.CertFile == "") != (b.KeyFile == "") {
		given := &b.CertFile
		if b.CertFile == "" {
			given = &b.KeyFile
		}
		v.errorf(v.c.at(given, b.Pos), "broker %q: cert_file and key_file go together: the client certificate and its key", name)
	}
}

// users checks who may connect to the embedded broker b, and what they
// may do: a listen address other than loopback takes anonymous clients
// only when the file says so.
func (v *validator) users(name string, b *Broker) {
	seen := make(map[string]bool)
	for _, u := range b.Users {
		switch {
		case u.Username == "":
		case seen[u.Username]:
			v.errorf(v.c.at(&u.Username, u.Pos), "broker %q: user %s is there twice", name, v.c.show(&u.Username))
		case (u.Password == "") == (u.PasswordFile == ""):
			v.errorf(u.Pos, "broker %q: user %s needs password (such as ${MQTT_PASSWORD}) or password_file, one of them", name, v.c.show(&u.Username))
		}
		seen[u.Username] = true
		v.grants(name, "user "+v.c.show(&u.Username), &u.BrokerGrants, u.Pos)
	}
	v.anonymousGrants(name, b)
	if b.AllowAnonymous == nil && !b.ListensLocally() && len(b.Users) == 0 {
		v.errorf(v.c.at(&b.Listen, b.Pos), "broker %q: listen %s takes clients from the network, which could read every reading and inject their own: "+
			"list users (users: [{username: NAME, password_file: FILE}]), listen on 127.0.0.1, or say allow_anonymous: true", name, v.c.show(&b.Listen))
	}
}

// sourceFields checks a source's fields and returns its records' payload
// fields: nil when they are not known.
func (v *validator) sourceFields(s *Source) exprop.Fields {
	if s.Format == "raw" {
		if s.Fields != nil {
			v.errorf(v.c.at(&s.Fields, s.Pos), "source %s: fields: a raw payload has none (format: raw)", v.c.show(&s.ID))
		}
		return exprop.Fields{}
	}
	if s.Fields == nil {
		return nil
	}
	out := make(exprop.Fields, len(s.Fields))
	for _, name := range slices.Sorted(maps.Keys(s.Fields)) {
		field := entry{&s.Fields, name}
		p := v.c.at(field, s.Pos)
		t, err := exprop.ParseType(s.Fields[name])
		switch {
		case exprop.Own(name):
			v.errorf(p, "source %s: fields: %s is a record's own, with key and time and value, not a payload field", v.c.show(&s.ID), name)
		case err != nil:
			v.errorf(p, "source %s: fields: %s: %s", v.c.show(&s.ID), name, v.c.reason(field, err, "type %s is none of number, string, bool, object, list or any"))
		}
		out[name] = t
	}
	// A topic level is a string field, whatever the payload holds there.
	for i, topic := range s.Topics {
		_, levels, _ := mqttio.ParseTopicPattern(topic)
		for _, name := range levels {
			if t, ok := out[name]; ok && t != exprop.String && t != exprop.Any {
				v.errorf(v.c.at(entry{&s.Fields, name}, s.Pos), "source %s: fields: %s is a level of topic %s, a string, not %s", v.c.show(&s.ID), name, v.c.show(entry{&s.Topics, i}), t)
			}
			if _, ok := out[name]; !ok && v.c.fromEnv(entry{&s.Topics, i}) {
				if v.hidden == nil {
					v.hidden = make(map[string]bool)
				}
				v.hidden[name] = true
			}
			out[name] = exprop.String
		}
	}
	// The fields the source decodes: a record without them, or with
	// another type there, is a dead letter of the source.
	for _, f := range []struct {
		role  string
		field *string
		types []exprop.Type
		want  string
	}{
		{"key", &s.Key, []exprop.Type{exprop.String, exprop.Number}, "a string or a number"},
		{"value", &s.Value, []exprop.Type{exprop.Number}, "a number"},
		{"time", &s.Time, []exprop.Type{exprop.Number, exprop.String}, "milliseconds (a number) or an RFC 3339 string"},
	} {
		if t, ok := out[*f.field]; ok && t != exprop.Any && !slices.Contains(f.types, t) {
			name := *f.field
			if v.c.fromEnv(f.field) {
				name = v.c.show(f.field)
			}
			v.errorf(v.c.at(entry{&s.Fields, *f.field}, s.Pos), "source %s: fields: %s is the %s field, which must be %s, not %s", v.c.show(&s.ID), name, f.role, f.want, t)
		}
	}
	return out
}
