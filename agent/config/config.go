// Package config reads cairn's pipeline files: YAML parsed through yaml.v3
// nodes, so that every problem is reported with its file, line and column,
// all of them at once. Strings may refer to the environment as ${VAR}.
// Unknown fields and wrong types are errors, and so is what the agent
// would fail on when it runs, as far as the file tells: an expression
// over fields its records lack, an address it cannot listen on or dial,
// and (Load) a named file it cannot read.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"os"
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
	Agent       Agent              `yaml:"agent"`
	Brokers     map[string]*Broker `yaml:"brokers"`
	Checkpoints Checkpoints        `yaml:"checkpoints"`
	Sources     []*Source          `yaml:"sources"`
	Operators   []*Operator        `yaml:"operators"`
	Sinks       []*Sink            `yaml:"sinks"`
	// Remote is off when absent.
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
// if the file holds the value as it is on one line.
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
	// DataDir holds the checkpoint store, the ingest log and the control
	// socket; default "data". Load and DataDir resolve a relative one
	// against the pipeline file's directory, not the working directory:
	// `cairn status -c /etc/cairn/pipeline.yaml` finds the agent from
	// anywhere.
	DataDir string `yaml:"data_dir"`
	// LogLevel is the least severe level logged: debug, info (default),
	// warn or error. A reload applies a change.
	LogLevel string `yaml:"log_level"`
	// Level is LogLevel parsed.
	Level slog.Level `yaml:"-"`
	// Metrics is an address for Prometheus metrics; empty: off.
	Metrics string `yaml:"metrics"`
	// API is a TCP address for the control API, besides the unix socket;
	// callers must send the token in APITokenFile as a bearer token. Load
	// resolves a relative APITokenFile (and every other *_file) as it
	// does DataDir.
	API          string `yaml:"api"`
	APITokenFile string `yaml:"api_token_file"`
	// LogFormat is "text" (the default: logfmt key=value lines) or "json"
	// (one JSON object a line). Read when the agent starts, not on reload.
	LogFormat string `yaml:"log_format"`
	// LogSummaryInterval is how often the log says at info level what the
	// checkpoints did since it last said (each one is logged at debug);
	// default 5m.
	LogSummaryInterval time.Duration `yaml:"log_summary_interval"`
	// RetainedSavepoints is how many savepoint files `cairn savepoint`
	// keeps in the data directory, the newest; default 5.
	RetainedSavepoints int `yaml:"retained_savepoints"`
	// MemoryLimit is a soft limit on the Go runtime's memory, such as
	// "48MiB" or "64MB" (debug.SetMemoryLimit): near it the garbage
	// collector runs more often instead of letting the heap grow to twice
	// the live data. Empty: none, or GOMEMLIMIT from the environment. Read
	// when the agent starts, not on reload.
	MemoryLimit string `yaml:"memory_limit"`
	// MemoryLimitBytes is MemoryLimit parsed; 0 when it is empty.
	MemoryLimitBytes int64 `yaml:"-"`
	// MaxOutputBacklog bounds the output the sinks hold until their
	// brokers acknowledge it, such as "32MiB" (the default): above it the
	// sources stop reading from the ingest log (see mqttio.Backlog).
	MaxOutputBacklog string `yaml:"max_output_backlog"`
	// MaxOutputBacklogBytes is MaxOutputBacklog parsed.
	MaxOutputBacklogBytes int64 `yaml:"-"`
	// SyncInterval is the longest a message received waits for the fsync
	// of the ingest log that makes it durable and lets it be acknowledged
	// to the broker (mqttio.SourceConfig.SyncInterval); default 1s. Longer
	// writes the flash less, and delays processing and acknowledgements,
	// never data.
	SyncInterval time.Duration `yaml:"sync_interval"`
}

// Broker is an MQTT broker: a real one (URL) or an embedded one.
type Broker struct {
	Pos
	Embedded     bool          `yaml:"embedded"`
	Listen       string        `yaml:"listen"` // embedded: address, default 127.0.0.1:18830
	URL          string        `yaml:"url"`
	ClientID     string        `yaml:"client_id"`
	Username     string        `yaml:"username"`
	Password     string        `yaml:"password"`
	PasswordFile string        `yaml:"password_file"`
	CAFile       string        `yaml:"ca_file"`
	CertFile     string        `yaml:"cert_file"`
	KeyFile      string        `yaml:"key_file"`
	KeepAlive    time.Duration `yaml:"keepalive"`
	StatusTopic  string        `yaml:"status_topic"`
	// MaxInflight is the broker's in-flight window per client: the QoS 1
	// messages it sends without waiting for acknowledgements
	// (mosquitto's max_inflight_messages). A source commits its ingest log
	// once that many wait, rather than stall the broker until the sync
	// interval. Default 20, mosquitto's default; the embedded broker's
	// is EmbeddedMaxInflight.
	MaxInflight int `yaml:"max_inflight"`
	// Users, for an embedded broker, are the clients it lets in by name
	// and password. AllowAnonymous lets in clients that give no name;
	// default: yes on a loopback listen address (this device only), no
	// on any other, where anyone on the network could read every reading
	// and inject their own. The agent's own clients connect with
	// credentials made for the process, and no one else may use their
	// client ids.
	Users          []*BrokerUser `yaml:"users"`
	AllowAnonymous *bool         `yaml:"allow_anonymous"`
}

// BrokerUser is a client an embedded broker lets in.
type BrokerUser struct {
	Pos
	Username     string `yaml:"username,required"`
	Password     string `yaml:"password"`
	PasswordFile string `yaml:"password_file"`
}

// AnonymousAllowed reports whether an embedded broker lets in clients
// that give no user name (Broker.AllowAnonymous).
func (b *Broker) AnonymousAllowed() bool {
	if b.AllowAnonymous != nil {
		return *b.AllowAnonymous
	}
	return b.ListensLocally()
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

// EmbeddedMaxInflight is the in-flight window an embedded broker's clients
// commit at by default: it lets far more be in flight.
const EmbeddedMaxInflight = 1000

// Checkpoints is the checkpointing configuration.
type Checkpoints struct {
	Pos
	Interval          time.Duration `yaml:"interval"`
	Mode              string        `yaml:"mode"`
	Timeout           time.Duration `yaml:"timeout"`
	MinPause          time.Duration `yaml:"min_pause"`
	MaxConcurrent     int           `yaml:"max_concurrent"`
	TolerableFailures *int          `yaml:"tolerable_failures"`
	Retained          int           `yaml:"retained"`
	Incremental       bool          `yaml:"incremental"`
	MaxChain          int           `yaml:"max_chain"`
	// AlignmentTimeout, in exactly-once mode, switches a checkpoint whose
	// barrier alignment takes this long to unaligned.
	AlignmentTimeout time.Duration `yaml:"alignment_timeout"`
}

// Source is an input: an MQTT subscription or the built-in simulator.
type Source struct {
	Pos
	ID          string `yaml:"id,required"`
	Parallelism int    `yaml:"parallelism"`
	// MQTT
	Broker          string        `yaml:"broker"`
	Topics          []string      `yaml:"topics"`
	Format          string        `yaml:"format"` // json (default) or raw
	Key             string        `yaml:"key"`
	Value           string        `yaml:"value"`
	Time            string        `yaml:"time"`
	OutOfOrderness  time.Duration `yaml:"out_of_orderness"`
	AtMostOnce      bool          `yaml:"at_most_once"`
	DeadLetterTopic string        `yaml:"dead_letter_topic"`
	// Fields, if given, are the payload fields the records carry, by
	// name, with their types (exprop.ParseType: number, string, bool,
	// object, list, any): then the expressions of the operators the
	// source's records reach are checked against them. Topic levels
	// ({device}) are fields too, strings, declared or not.
	Fields map[string]string `yaml:"fields"`
	// Simulator, instead of MQTT: a sensor fleet.
	Simulator *Simulator `yaml:"simulator"`
}

// Simulator is a built-in fleet of sensors for demos and tests.
type Simulator struct {
	Pos
	Devices int     `yaml:"devices"`
	Rate    int     `yaml:"rate"` // readings per second, all devices together
	Skew    float64 `yaml:"skew"` // 0: even; towards 1: a few devices send most
	Seed    int64   `yaml:"seed"`
}

// Operator is a step of the graph, reading named inputs.
type Operator struct {
	Pos
	ID          string   `yaml:"id,required"`
	Type        string   `yaml:"type,required"`
	Inputs      []string `yaml:"inputs,required"`
	KeyBy       string   `yaml:"key_by"` // hash-partition the inputs by this field ("key": the record's key)
	Parallelism int      `yaml:"parallelism"`
	Expr        string   `yaml:"expr"`      // filter, map
	Window      *Window  `yaml:"window"`    // window, join
	Aggregate   string   `yaml:"aggregate"` // window, join
	// TTL is how long a dedupe drops repeats of a key.
	TTL time.Duration `yaml:"ttl"`
	// High and Low are a threshold's marks: raised above High, cleared
	// below Low.
	High *float64 `yaml:"high"`
	Low  *float64 `yaml:"low"`
	// PayloadFields are the payload fields of the records the operator
	// reads, as the validation found them (nil: not known); its
	// expression is compiled with them.
	PayloadFields exprop.Fields `yaml:"-"`
	// OnError is what becomes of a record the operator rejects (a filter
	// or map expression that fails on it or gives the wrong type):
	// "dead-letter" (the default) stores it with the reason and goes on,
	// "drop" counts it and goes on, "fail" stops the pipeline.
	OnError string `yaml:"on_error"`
}

// What an operator does with a record it rejects (Operator.OnError).
const (
	OnErrorDeadLetter = "dead-letter"
	OnErrorDrop       = "drop"
	OnErrorFail       = "fail"
)

// Window is a window operator's windows.
type Window struct {
	Pos
	Kind            string        `yaml:"kind,required"` // tumbling, sliding, session
	Size            time.Duration `yaml:"size"`
	Slide           time.Duration `yaml:"slide"`
	Gap             time.Duration `yaml:"gap"`
	AllowedLateness time.Duration `yaml:"allowed_lateness"`
	// Time is "event" (the default: records' event time and watermarks)
	// or "processing" (the wall clock when records are processed).
	Time string `yaml:"time"`
}

// Sink is an output.
type Sink struct {
	Pos
	ID     string `yaml:"id,required"`
	Input  string `yaml:"input,required"`
	Broker string `yaml:"broker,required"`
	Topic  string `yaml:"topic,required"`
	Retain bool   `yaml:"retain"`
}

// OperatorTypes are the operator types a config may name.
var OperatorTypes = []string{"filter", "map", "union", "count", "sum", "window", "join", "dedupe", "threshold"}

// Load reads and validates the file at path, and checks that the files it
// names can be read. A relative path in it (data_dir, every *_file) is
// resolved against the directory of the file at path, where the agent then
// finds it. The error, if any, is Errors.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
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
	if err != nil || c.Agent.LogFormat != "json" {
		return "text"
	}
	return "json"
}

// parseLeniently parses the file at path with every environment variable
// set: an unset one is left as it was written.
func parseLeniently(path string) (*Config, Errors, error) {
	data, err := os.ReadFile(path)
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
func Parse(file string, data []byte, lookup func(string) (string, bool)) (*Config, Errors) {
	c := &Config{pos: make(positions), env: make(fromEnv)}
	errs := parse(file, data, c, lookup, c.pos, c.env)
	if c.Pos == (Pos{}) {
		return c, errs // not YAML, or not a mapping: nothing to validate
	}
	v := validator{file: file, errs: errs, c: c}
	v.validate()
	sortErrors(v.errs)
	return c, v.errs
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
}

func (v *validator) errorf(p Pos, format string, args ...any) {
	v.errs = append(v.errs, Error{File: v.file, Pos: p, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) validate() {
	c := v.c
	c.applyDefaults()
	if c.Agent.API != "" && c.Agent.APITokenFile == "" {
		v.errorf(c.Agent.Pos, "agent.api needs api_token_file: the control API is not served on TCP without a token")
	}
	v.listen(&c.Agent.Metrics, c.Agent.Pos, "agent.metrics", "9100")
	v.listen(&c.Agent.API, c.Agent.Pos, "agent.api", "8080")
	switch strings.ToLower(c.Agent.LogLevel) {
	case "debug":
		c.Agent.Level = slog.LevelDebug
	case "info":
		c.Agent.Level = slog.LevelInfo
	case "warn", "warning":
		c.Agent.Level = slog.LevelWarn
	case "error":
		c.Agent.Level = slog.LevelError
	default:
		v.errorf(c.Agent.Pos, "log_level: %s is not one of debug, info, warn, error", c.show(&c.Agent.LogLevel))
	}
	if c.Agent.LogFormat != "text" && c.Agent.LogFormat != "json" {
		v.errorf(c.Agent.Pos, "log_format: %s is neither text nor json", c.show(&c.Agent.LogFormat))
	}
	if c.Agent.RetainedSavepoints < 1 {
		v.errorf(c.Agent.Pos, "retained_savepoints must be at least 1")
	}
	if t := c.Agent.LogSummaryInterval; t < time.Second {
		v.errorf(c.Agent.Pos, "log_summary_interval %s is below 1s", c.show(&c.Agent.LogSummaryInterval))
	}
	if c.Agent.MemoryLimit != "" {
		n, err := humanize.ParseBytes(c.Agent.MemoryLimit)
		switch {
		case err != nil || n > math.MaxInt64:
			v.errorf(c.Agent.Pos, "memory_limit: %s is not a size such as 48MiB or 64MB", c.show(&c.Agent.MemoryLimit))
		case n < 8<<20:
			v.errorf(c.Agent.Pos, "memory_limit %s is below 8MiB, where the agent would do little but collect garbage", c.show(&c.Agent.MemoryLimit))
		default:
			c.Agent.MemoryLimitBytes = int64(n)
		}
	}
	if n, err := humanize.ParseBytes(c.Agent.MaxOutputBacklog); err != nil || n > math.MaxInt64 || n < 64<<10 {
		v.errorf(c.Agent.Pos, "max_output_backlog: %s is not a size of at least 64KiB, such as 32MiB", c.show(&c.Agent.MaxOutputBacklog))
	} else {
		c.Agent.MaxOutputBacklogBytes = int64(n)
	}
	if t := c.Agent.SyncInterval; t <= 0 || t > time.Minute {
		v.errorf(c.Agent.Pos, "sync_interval %s is outside (0, 1m]: it bounds how long a received message waits to be durable", c.show(&c.Agent.SyncInterval))
	}
	if mode, err := checkpoint.ParseMode(c.Checkpoints.Mode); err != nil {
		v.errorf(c.Checkpoints.Pos, "%s", c.reason(&c.Checkpoints.Mode, err, "checkpointing mode %s is none of exactly-once, at-least-once, unaligned"))
	} else if t := c.Checkpoints.AlignmentTimeout; t < 0 || t > 0 && mode != checkpoint.ExactlyOnce {
		v.errorf(c.Checkpoints.Pos, "alignment_timeout must be positive and needs mode exactly-once (%s checkpoints do not align)", mode)
	}
	if c.Checkpoints.Timeout <= 0 || c.Checkpoints.MaxConcurrent < 1 || c.Checkpoints.Retained < 1 {
		v.errorf(c.Checkpoints.Pos, "timeout, max_concurrent and retained must be positive")
	}
	v.remote()
	for name, b := range c.Brokers {
		switch {
		case b.Embedded && b.URL != "":
			v.errorf(b.Pos, "broker %q: embedded or url, not both", name)
		case !b.Embedded && b.URL == "":
			v.errorf(b.Pos, "broker %q: needs url (or embedded: true)", name)
		case b.Password != "" && b.PasswordFile != "":
			v.errorf(b.Pos, "broker %q: password or password_file, not both", name)
		case b.MaxInflight < 1 || b.MaxInflight > 65535:
			v.errorf(b.Pos, "broker %q: max_inflight %s is outside 1..65535", name, c.show(&b.MaxInflight))
		}
		v.broker(name, b)
		if b.StatusTopic != "" {
			v.topic(&b.StatusTopic, b.Pos, fmt.Sprintf("broker %q: status_topic", name), mqttio.CheckTopic)
		}
	}
	defined := make(map[string]bool) // streams readable so far
	ids := make(map[string]bool)
	id := func(p Pos, field *string) {
		s := *field
		if s == "" {
			return // reported as a missing field
		}
		if err := graph.ValidateID(s); err != nil {
			v.errorf(p, "%s", c.reason(field, err, "id %s must be 1 to 64 letters, digits, '_', '-' and '.'"))
		}
		if ids[s] {
			v.errorf(p, "id %s is used twice", c.show(field))
		}
		ids[s] = true
	}
	parallelism := func(p Pos, n *int) {
		if *n < 1 || *n > graph.DefaultMaxParallelism {
			v.errorf(p, "parallelism %s is outside 1..%d", c.show(n), graph.DefaultMaxParallelism)
		}
	}
	broker := func(p Pos, name *string) {
		if _, ok := c.Brokers[*name]; !ok {
			v.errorf(p, "no broker named %s under brokers", c.show(name))
		}
	}
	// The payload fields of each stream's records (nil: not known).
	fields := make(map[string]exprop.Fields)
	for _, s := range c.Sources {
		id(s.Pos, &s.ID)
		parallelism(s.Pos, &s.Parallelism)
		defined[s.ID] = true
		fields[s.ID] = v.sourceFields(s)
		if s.Simulator != nil {
			if s.Broker != "" || len(s.Topics) > 0 {
				v.errorf(s.Pos, "source %s: a simulator has no broker or topics", c.show(&s.ID))
			}
			if s.Simulator.Devices < 1 || s.Simulator.Rate < 1 || s.Simulator.Skew < 0 || s.Simulator.Skew >= 1 {
				v.errorf(s.Simulator.Pos, "simulator needs devices ≥ 1, rate ≥ 1 and 0 ≤ skew < 1")
			}
			continue
		}
		broker(s.Pos, &s.Broker)
		if len(s.Topics) == 0 {
			v.errorf(s.Pos, "source %s: no topics", c.show(&s.ID))
		}
		for i, t := range s.Topics {
			topic := entry{&s.Topics, i}
			if _, _, err := mqttio.ParseTopicPattern(t); err != nil {
				v.errorf(s.Pos, "%s", c.reason(topic, err, "topic %s is no pattern such as sensors/{device}/telemetry: a level is a {name} or text, and # only the last"))
			}
			if s.Parallelism > 1 && mqttio.IsShared(t) {
				v.errorf(s.Pos, "source %s: topic %s is a shared subscription, which a source of parallelism above 1 cannot take: its subtasks share the topics out among themselves, and each needs every message", c.show(&s.ID), c.show(topic))
			}
		}
		if s.DeadLetterTopic != "" {
			v.topic(&s.DeadLetterTopic, s.Pos, fmt.Sprintf("source %s: dead_letter_topic", c.show(&s.ID)), mqttio.CheckTopic)
		}
		if s.Format != "json" && s.Format != "raw" {
			v.errorf(s.Pos, "source %s: format %s is neither json nor raw", c.show(&s.ID), c.show(&s.Format))
		}
	}
	for _, o := range c.Operators {
		id(o.Pos, &o.ID)
		parallelism(o.Pos, &o.Parallelism)
		name := c.show(&o.ID)
		if len(o.Inputs) == 0 {
			v.errorf(o.Pos, "operator %s: no inputs", name)
		}
		for i, in := range o.Inputs {
			if !defined[in] {
				v.errorf(o.Pos, "operator %s: input %s is not a source or an operator defined above", name, c.show(entry{&o.Inputs, i}))
			}
		}
		switch o.Type {
		case "filter", "map", "union", "dedupe":
			// Records pass with their payloads.
			fields[o.ID] = merge(o.Inputs, fields)
		case "count", "sum", "window", "join", "threshold":
			// Records of its own, without a payload or with one that
			// is no JSON object (graph.WindowResult, say).
			fields[o.ID] = exprop.Fields{}
		}
		switch o.OnError {
		case OnErrorDeadLetter, OnErrorDrop, OnErrorFail:
		default:
			v.errorf(o.Pos, "operator %s: on_error %s is none of %s, %s, %s", name, c.show(&o.OnError), OnErrorDeadLetter, OnErrorDrop, OnErrorFail)
		}
		switch o.Type {
		case "filter", "map":
			o.PayloadFields = fields[o.ID]
			if o.Expr == "" {
				v.errorf(o.Pos, "operator %s: %s needs expr", name, o.Type)
			} else {
				v.expr(o)
			}
		case "union":
			if len(o.Inputs) < 2 {
				v.errorf(o.Pos, "operator %s: a union needs two inputs or more", name)
			}
		case "count", "sum":
			v.keyed(o)
		case "window":
			v.window(o)
		case "join":
			if len(o.Inputs) != 2 {
				v.errorf(o.Pos, "operator %s: a join has exactly two inputs", name)
			}
			if o.Window != nil && o.Window.Kind == "session" {
				v.errorf(o.Window.Pos, "operator %s: a join needs tumbling or sliding windows", name)
			}
			v.window(o)
		case "dedupe":
			v.keyed(o)
			if o.TTL < time.Millisecond {
				v.errorf(o.Pos, "operator %s: dedupe needs a ttl of at least 1ms", name)
			}
		case "threshold":
			v.keyed(o)
			switch {
			case o.High == nil || o.Low == nil:
				v.errorf(o.Pos, "operator %s: threshold needs high and low", name)
			case *o.Low > *o.High:
				v.errorf(o.Pos, "operator %s: threshold's low (%s) is above its high (%s)", name, c.show(&o.Low), c.show(&o.High))
			}
		default:
			v.errorf(o.Pos, "operator %s: unknown type %s (known: %s)", name, c.show(&o.Type), strings.Join(OperatorTypes, ", "))
		}
		defined[o.ID] = true
	}
	for _, s := range c.Sinks {
		id(s.Pos, &s.ID)
		broker(s.Pos, &s.Broker)
		if !defined[s.Input] {
			v.errorf(s.Pos, "sink %s: input %s is not a source or an operator", c.show(&s.ID), c.show(&s.Input))
		}
		if s.Topic != "" || v.c.at(&s.Topic, Pos{}) != (Pos{}) { // a missing one is reported as such
			v.topic(&s.Topic, s.Pos, fmt.Sprintf("sink %s: topic", c.show(&s.ID)), mqttio.CheckTopicTemplate)
		}
	}
	if len(c.Sources) == 0 {
		v.errorf(c.Pos, "no sources")
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

// broker checks a broker's address (its url, or the listen address of an
// embedded one) and its TLS settings.
func (v *validator) broker(name string, b *Broker) {
	if b.Embedded {
		v.listen(&b.Listen, b.Pos, fmt.Sprintf("broker %q: listen", name), "18830")
		v.users(name, b)
	} else if len(b.Users) > 0 || b.AllowAnonymous != nil {
		v.errorf(b.Pos, "broker %q: users and allow_anonymous are an embedded broker's: who may connect to it", name)
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

// users checks who may connect to the embedded broker b: a listen
// address other than loopback takes anonymous clients only when the file
// says so.
func (v *validator) users(name string, b *Broker) {
	seen := make(map[string]bool)
	for _, u := range b.Users {
		switch {
		case u.Username == "":
		case seen[u.Username]:
			v.errorf(u.Pos, "broker %q: user %s is there twice", name, v.c.show(&u.Username))
		case (u.Password == "") == (u.PasswordFile == ""):
			v.errorf(u.Pos, "broker %q: user %s needs password (such as ${MQTT_PASSWORD}) or password_file, one of them", name, v.c.show(&u.Username))
		}
		seen[u.Username] = true
	}
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

// merge returns the payload fields of the records of all of inputs: those
// every input has, with their type if all agree (else any); nil if the
// fields of an input are not known.
func merge(inputs []string, fields map[string]exprop.Fields) exprop.Fields {
	var out exprop.Fields
	for i, in := range inputs {
		f := fields[in]
		if f == nil {
			return nil
		}
		if i == 0 {
			out = maps.Clone(f)
			continue
		}
		for name, t := range out {
			switch u, ok := f[name]; {
			case !ok:
				delete(out, name)
			case u != t:
				out[name] = exprop.Any
			}
		}
	}
	return out
}

// expr checks the expression of filter or map o: it compiles with what is
// known of the records it reads, and gives what o needs.
func (v *validator) expr(o *Operator) {
	compile := exprop.CompileFilter
	if o.Type == "map" {
		compile = exprop.CompileMap
	}
	_, err := compile(o.Expr, o.PayloadFields)
	if err == nil {
		return
	}
	e := &exprop.Error{Msg: err.Error()}
	errors.As(err, &e)
	p := v.c.at(&o.Expr, o.Pos)
	if q, ok := v.c.inside(&o.Expr, e.Column); ok && e.Line == 1 {
		p = q // the very character
	}
	name, expr := v.c.show(&o.ID), v.c.show(&o.Expr)
	switch {
	case e.Gives != "":
		v.errorf(p, "operator %s: a %s's expr must give %s; %s gives %s", name, o.Type, e.Want, expr, e.Gives)
	case v.c.fromEnv(&o.Expr):
		// The compiler's message quotes the expression's names and
		// tokens, and so what the environment gave.
		v.errorf(p, "operator %s: expr %s does not compile; the compiler's message could quote the environment's value, so it is not shown", name, expr)
	default:
		msg := e.Msg
		if e.Line > 0 {
			msg += fmt.Sprintf(" (%d:%d)", e.Line, e.Column)
		}
		if strings.HasPrefix(e.Msg, "unknown name ") {
			var known []string
			hidden := false
			for _, f := range slices.Sorted(maps.Keys(o.PayloadFields)) {
				switch {
				case v.hidden[f]:
					hidden = true
				case !exprop.Own(f):
					known = append(known, f)
				}
			}
			msg += "; its records have key, time, value"
			switch {
			case len(known) > 0:
				msg += " and the fields " + strings.Join(known, ", ")
			case !hidden:
				msg += " and no payload fields"
			}
			if hidden {
				msg += ", and fields that levels of topics from the environment name"
			}
		}
		v.errorf(p, "operator %s: expr %s does not compile: %s", name, expr, msg)
	}
}

func (v *validator) keyed(o *Operator) {
	if o.KeyBy == "" {
		v.errorf(o.Pos, "operator %s: %s is keyed: set key_by", v.c.show(&o.ID), o.Type)
	}
}

func (v *validator) window(o *Operator) {
	v.keyed(o)
	if _, err := graph.ParseAggregate(o.Aggregate); err != nil {
		v.errorf(o.Pos, "operator %s: %s", v.c.show(&o.ID), v.c.reason(&o.Aggregate, err, "aggregate %s is none of count, sum, min, max, avg, first, last"))
	}
	if o.Window == nil {
		v.errorf(o.Pos, "operator %s: a window operator needs window", v.c.show(&o.ID))
		return
	}
	if _, err := o.Window.spec(graph.AggCount, v.c.show); err != nil {
		v.errorf(o.Window.Pos, "%v", err)
	}
}

// Spec turns the window settings into a graph.WindowSpec.
func (w *Window) Spec(agg graph.Aggregate) (graph.WindowSpec, error) { return w.spec(agg, format) }

// spec is Spec, its errors showing the value of a field as show does.
func (w *Window) spec(agg graph.Aggregate, show func(field any) string) (graph.WindowSpec, error) {
	spec := graph.WindowSpec{Size: w.Size, Slide: w.Slide, AllowedLateness: w.AllowedLateness, Aggregate: agg,
		ProcessingTime: w.Time == "processing"}
	if w.Time != "" && w.Time != "event" && w.Time != "processing" {
		return spec, fmt.Errorf("window time %s is neither event nor processing", show(&w.Time))
	}
	switch w.Kind {
	case "tumbling":
		spec.Kind = graph.Tumbling
	case "sliding":
		spec.Kind = graph.Sliding
	case "session":
		spec.Kind, spec.Size = graph.Session, w.Gap
	default:
		return spec, fmt.Errorf("window kind %s is not tumbling, sliding or session", show(&w.Kind))
	}
	return spec, spec.Validate()
}

// applyDefaults fills in what the file left out.
func (c *Config) applyDefaults() {
	if c.Agent.DataDir == "" {
		c.Agent.DataDir = "data"
	}
	if c.Agent.LogLevel == "" {
		c.Agent.LogLevel = "info"
	}
	if c.Agent.LogFormat == "" {
		c.Agent.LogFormat = "text"
	}
	if c.Agent.LogSummaryInterval == 0 {
		c.Agent.LogSummaryInterval = 5 * time.Minute
	}
	if c.Agent.RetainedSavepoints == 0 {
		c.Agent.RetainedSavepoints = 5
	}
	if c.Agent.MaxOutputBacklog == "" {
		c.Agent.MaxOutputBacklog = "32MiB"
	}
	if c.Agent.SyncInterval == 0 {
		c.Agent.SyncInterval = mqttio.DefaultSyncInterval
	}
	cp := &c.Checkpoints
	def := checkpoint.DefaultConfig()
	if cp.Interval == 0 {
		cp.Interval = def.Interval
	}
	if cp.Mode == "" {
		cp.Mode = def.Mode.String()
	}
	if cp.Timeout == 0 {
		cp.Timeout = def.Timeout
	}
	if cp.MaxConcurrent == 0 {
		cp.MaxConcurrent = def.MaxConcurrent
	}
	if cp.TolerableFailures == nil {
		cp.TolerableFailures = new(int)
	}
	if cp.Retained == 0 {
		cp.Retained = 3
	}
	if cp.MaxChain == 0 {
		cp.MaxChain = 10
	}
	for _, s := range c.Sources {
		if s.Parallelism == 0 {
			s.Parallelism = 1
		}
		if s.Format == "" {
			s.Format = "json"
		}
	}
	for _, o := range c.Operators {
		if o.Parallelism == 0 {
			o.Parallelism = 1
		}
		if o.OnError == "" {
			o.OnError = OnErrorDeadLetter
		}
	}
	for _, b := range c.Brokers {
		if b.Embedded && b.Listen == "" {
			b.Listen = mqttio.DefaultBrokerAddr
		}
		if b.MaxInflight == 0 {
			b.MaxInflight = mqttio.DefaultMaxInflight
			if b.Embedded {
				b.MaxInflight = EmbeddedMaxInflight
			}
		}
	}
}
