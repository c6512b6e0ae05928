package config

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

const good = `
agent:
  data_dir: /var/lib/cairn
brokers:
  plant:
    url: ssl://broker.example:8883
    client_id: gw-17
    username: ${MQTT_USER}
    password_file: /etc/cairn/mqtt.pass
  local:
    embedded: true
checkpoints:
  interval: 1s
  mode: exactly-once
  incremental: true
sources:
  - id: telemetry
    broker: plant
    topics:
      - sensors/{device}/telemetry
    key: device
    value: temp
    time: ts
    out_of_orderness: 2s
  - id: fleet
    simulator: {devices: 300, rate: 2000, skew: 0.8}
operators:
  - id: hot
    type: filter
    inputs: [telemetry]
    expr: value > 30
  - id: avg
    type: window
    inputs: [hot, fleet]
    key_by: key
    window: {kind: tumbling, size: 10s, allowed_lateness: 2s}
    aggregate: avg
  - id: once
    type: dedupe
    inputs: [telemetry]
    key_by: key
    ttl: 1m
  - id: alarm
    type: threshold
    inputs: [telemetry]
    key_by: key
    high: 30
    low: 27.5
  - id: compare
    type: join
    inputs: [telemetry, fleet]
    key_by: key
    window: {kind: tumbling, size: 1m}
    aggregate: avg
  - id: per-minute
    type: window
    inputs: [telemetry]
    key_by: key
    window: {kind: tumbling, size: 1m, time: processing}
    aggregate: count
sinks:
  - id: out
    input: avg
    broker: local
    topic: cairn/avg/{key}
`

func TestParseGoodConfig(t *testing.T) {
	c, errs := Parse("good.yaml", []byte(good), env(map[string]string{"MQTT_USER": "gateway"}))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if c.Brokers["plant"].Username != "gateway" {
		t.Fatalf("${MQTT_USER} not substituted: %q", c.Brokers["plant"].Username)
	}
	if c.Checkpoints.Interval != time.Second || c.Checkpoints.Retained != 3 || *c.Checkpoints.TolerableFailures != 0 {
		t.Fatalf("checkpoints: %+v", c.Checkpoints)
	}
	if c.Brokers["local"].Listen != "127.0.0.1:18830" || c.Sources[0].Parallelism != 1 || c.Sources[0].Format != "json" {
		t.Fatal("defaults not applied")
	}
	if w := c.Operators[1]; w.Window.Size != 10*time.Second || w.Pos.Line != 32 {
		t.Fatalf("window operator %+v at %v", w.Window, w.Pos)
	}
}

// TestEveryErrorHasAPosition feeds a file with many mistakes and expects
// each reported with its line and column, all at once.
func TestEveryErrorHasAPosition(t *testing.T) {
	bad := `brokers:
  plant:
    url: tcp://b:1883
    keepalive: often
checkpoints:
  mode: twice
  colour: blue
sources:
  - id: in
    broker: nowhere
    topics: ["a/{}/b"]
    user: ${NOPE}
  - broker: plant
    topics: [x]
operators:
  - id: f
    type: filter
    inputs: [missing]
    expr: "value >"
  - id: w
    type: spin
    inputs: [in]
    on_error: ignore
  - id: in
    type: union
    inputs: [in]
  - id: t
    type: threshold
    inputs: [in]
    key_by: key
    high: 1
    low: 2
  - id: j
    type: join
    inputs: [in]
    key_by: key
    window: {kind: session, gap: 1s}
    aggregate: avg
sinks:
  - id: s
    input: w
    broker: plant
`
	_, errs := Parse("bad.yaml", []byte(bad), env(nil))
	got := errs.Error()
	for _, want := range []string{
		`bad.yaml:4:16: want a duration such as 500ms or 10s, not "often"`,
		`bad.yaml:7:3: unknown field "colour"`,
		`bad.yaml:12:5: unknown field "user"`,
		`bad.yaml:13:5: missing required field "id"`,
		`bad.yaml:40:5: missing required field "topic"`,
		`unknown checkpointing mode "twice"`,
		`bad.yaml:9:5: no broker named "nowhere" under brokers`,
		`level 1 has an empty name`,
		`operator "f": input "missing" is not a source or an operator defined above`,
		`bad.yaml:19:18: operator "f": expr "value >" does not compile: unexpected token EOF (1:7)`,
		`operator "w": unknown type "spin"`,
		`bad.yaml:24:5: id "in" is used twice`,
		`bad.yaml:23:15: operator "w": on_error "ignore" is none of dead-letter, drop, fail`,
		`union needs two inputs or more`,
		`threshold's low (2) is above its high (1)`,
		`operator "j": join has exactly two inputs`,
		`operator "j": a join needs tumbling or sliding windows`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q", want)
		}
	}
	if strings.Contains(got, `id ""`) {
		t.Error("a missing id is reported twice")
	}
	if t.Failed() {
		t.Logf("all errors:\n%s", got)
	}
}

func TestMissingEnvironmentVariable(t *testing.T) {
	_, errs := Parse("env.yaml", []byte("sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\nagent:\n  data_dir: ${DATA}/x\n"), env(nil))
	if len(errs) != 1 || errs[0].Error() != "env.yaml:5:13: environment variable DATA is not set" {
		t.Fatalf("got %v", errs)
	}
}

// TestEnvironmentDefaults: ${VAR:-default} is VAR's value when it is set
// and not empty, else the default (empty too); an error about such a value
// shows the file's text, not what it became; and the lenient reading of a
// running agent's data directory takes the default as the agent does.
func TestEnvironmentDefaults(t *testing.T) {
	const file = "agent:\n  data_dir: /srv/${SITE:-north}/${EMPTY:-}x\nbrokers:\n  local:\n    embedded: true\n    listen: 127.0.0.1:${PORT:-18830}\nsources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n"
	for _, c := range []struct {
		vars        map[string]string
		dir, listen string
	}{
		{nil, "/srv/north/x", "127.0.0.1:18830"},
		{map[string]string{"SITE": "south", "PORT": "1884"}, "/srv/south/x", "127.0.0.1:1884"},
		{map[string]string{"SITE": "", "EMPTY": "e"}, "/srv/north/ex", "127.0.0.1:18830"},
	} {
		cfg, errs := Parse("d.yaml", []byte(file), env(c.vars))
		if len(errs) > 0 || cfg.Agent.DataDir != c.dir || cfg.Brokers["local"].Listen != c.listen {
			t.Errorf("with %v: data_dir %q, listen %q, errors %v; want %q, %q", c.vars, cfg.Agent.DataDir, cfg.Brokers["local"].Listen, errs, c.dir, c.listen)
		}
	}
	_, errs := Parse("d.yaml", []byte("agent:\n  log_level: ${LEVEL:-loud}\nsources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n"), env(nil))
	if want := `d.yaml:2:14: log_level: "${LEVEL:-loud}" (from the environment) is not one of debug, info, warn, error`; errs.Error() != want {
		t.Errorf("errors %q, want %q", errs.Error(), want)
	}
	_, errs = Parse("d.yaml", []byte("agent:\n  data_dir: ${DIR:-/x}${UNSET}\nsources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n"), env(nil))
	if want := "d.yaml:2:13: environment variable UNSET is not set"; errs.Error() != want {
		t.Errorf("errors %q, want %q", errs.Error(), want)
	}
	path := filepath.Join(t.TempDir(), "lenient.yaml")
	if err := os.WriteFile(path, []byte("agent:\n  data_dir: /srv/${CAIRN_TEST_UNSET_SITE:-north}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := DataDir(path); err != nil || got != "/srv/north" {
		t.Errorf("DataDir = %q, %v; want /srv/north", got, err)
	}
}

func TestNotYAML(t *testing.T) {
	_, errs := Parse("x.yaml", []byte("a: [\n"), env(nil))
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "x.yaml:") || !strings.Contains(errs[0].Msg, "not valid YAML") {
		t.Fatalf("got %v", errs)
	}
}

func TestMoreRefusals(t *testing.T) {
	for src, want := range map[string]string{
		"~\n":                 "the file is empty",
		"a: 1\n\xff\xfe(\x00": "x.yaml:2:1: not UTF-8 text",
		"sources:\n  - id: s\n    parallelism: -3\n    simulator: {devices: 1, rate: 1}\n":                                                                                                                           "parallelism -3 is outside 1..128",
		"brokers:\n  b:\n    url: tcp://b:1883\nsources:\n  - id: s\n    broker: b\n    parallelism: 2\n    topics: [\"$share/g/a/+\"]\n":                                                                            `source "s": topic "$share/g/a/+" is a shared subscription, which a source of parallelism above 1 cannot take`,
		"brokers:\n  b:\n    url: tcp://b:1883\nsources:\n  - id: s\n    parallelism: 2\n    simulator: {devices: 1, rate: 1}\nsinks:\n  - id: out\n    input: s\n    broker: b\n    topic: o\n    parallelism: 3\n": `x.yaml:13:18: sink "out": parallelism 3 must be 1 or its input's, 2`,
		"sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\noperators:\n  - id: o\n    type: union\n    inputs: []\n":                                                                                        `operator "o": no inputs`,
		"sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\noperators:\n  - id: w\n    type: window\n    inputs: [s]\n    key_by: key\n    window: {kind: tumbling, size: 500us}\n    aggregate: count\n":    "at least 1ms",
	} {
		_, errs := Parse("x.yaml", []byte(src), env(nil))
		if !strings.Contains(errs.Error(), want) {
			t.Errorf("%q: errors %q lack %q", src, errs.Error(), want)
		}
	}
}

func TestLogLevel(t *testing.T) {
	const pipeline = "sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n"
	c, errs := Parse("x.yaml", []byte(pipeline), env(nil))
	if len(errs) > 0 || c.Agent.Level != slog.LevelInfo {
		t.Fatalf("default level %v, errors %v; want info", c.Agent.Level, errs)
	}
	for level, want := range map[string]slog.Level{"debug": slog.LevelDebug, "WARN": slog.LevelWarn, "error": slog.LevelError} {
		c, errs := Parse("x.yaml", []byte("agent:\n  log_level: "+level+"\n"+pipeline), env(nil))
		if len(errs) > 0 || c.Agent.Level != want {
			t.Errorf("log_level %s: level %v, errors %v; want %v", level, c.Agent.Level, errs, want)
		}
	}
	_, errs = Parse("x.yaml", []byte("agent:\n  log_level: verbose\n"+pipeline), env(nil))
	if want := `x.yaml:2:14: log_level: "verbose" is not one of debug, info, warn, error`; !strings.Contains(errs.Error(), want) {
		t.Fatalf("errors %q lack %q", errs.Error(), want)
	}
}

func TestMaxOutputBacklog(t *testing.T) {
	const pipeline = "sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n"
	c, errs := Parse("x.yaml", []byte(pipeline), env(nil))
	if len(errs) > 0 || c.Agent.MaxOutputBacklogBytes != 32<<20 {
		t.Fatalf("default %d bytes, errors %v; want 32MiB", c.Agent.MaxOutputBacklogBytes, errs)
	}
	c, errs = Parse("x.yaml", []byte("agent:\n  max_output_backlog: 4MB\n"+pipeline), env(nil))
	if len(errs) > 0 || c.Agent.MaxOutputBacklogBytes != 4e6 {
		t.Fatalf("4MB: %d bytes, errors %v", c.Agent.MaxOutputBacklogBytes, errs)
	}
	for _, bad := range []string{"lots", "1KiB"} {
		_, errs := Parse("x.yaml", []byte("agent:\n  max_output_backlog: "+bad+"\n"+pipeline), env(nil))
		if want := `x.yaml:2:23: max_output_backlog: "` + bad + `" is not a size of at least 64KiB`; !strings.Contains(errs.Error(), want) {
			t.Errorf("errors %q lack %q", errs.Error(), want)
		}
	}
}

// DataDir finds the data directory of a file whose other secrets are not
// in the environment, and of one with errors elsewhere; a data_dir that
// needs a missing variable is an error at its section.
func TestDataDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const rest = "brokers:\n  b:\n    url: tcp://h:1883\n    password: ${CAIRN_TEST_UNSET_SECRET}\nsources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n"
	secrets := write("secrets.yaml", "agent:\n  data_dir: /var/lib/cairn\n"+rest)
	if _, err := Load(secrets); err == nil || !strings.Contains(err.Error(), "CAIRN_TEST_UNSET_SECRET is not set") {
		t.Fatalf("Load: %v, want the unset secret", err)
	}
	if got, err := DataDir(secrets); err != nil || got != "/var/lib/cairn" {
		t.Fatalf("DataDir = %q, %v; want /var/lib/cairn", got, err)
	}
	t.Setenv("CAIRN_TEST_SITE", "north")
	if got, err := DataDir(write("env.yaml", "agent:\n  data_dir: /srv/${CAIRN_TEST_SITE}\n  log_level: loud\n")); err != nil || got != "/srv/north" {
		t.Fatalf("DataDir = %q, %v; want /srv/north despite the bad log_level", got, err)
	}
	// A relative data_dir is beside the file, wherever the command runs.
	t.Chdir(t.TempDir())
	if got, err := DataDir(write("default.yaml", rest)); err != nil || got != filepath.Join(dir, "data") {
		t.Fatalf("DataDir = %q, %v; want the default beside the file", got, err)
	}
	relative := write("relative.yaml", "agent:\n  data_dir: state/site\n"+strings.ReplaceAll(rest, "    password: ${CAIRN_TEST_UNSET_SECRET}\n", ""))
	if got, err := DataDir(relative); err != nil || got != filepath.Join(dir, "state", "site") {
		t.Fatalf("DataDir = %q, %v; want it beside the file", got, err)
	}
	if c, err := Load(relative); err != nil || c.Agent.DataDir != filepath.Join(dir, "state", "site") {
		t.Fatalf("Load: %v, data_dir %q; want it beside the file", err, c.Agent.DataDir)
	}
	_, err := DataDir(write("unset.yaml", "agent:\n  data_dir: /srv/${CAIRN_TEST_UNSET_DIR}\n"+rest))
	if want := "unset.yaml:2:3: agent.data_dir: environment variable CAIRN_TEST_UNSET_DIR is not set"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("DataDir: %v, want %q", err, want)
	}
	if _, err := DataDir(write("bad.yaml", "agent: [\n")); err == nil || !strings.Contains(err.Error(), "not valid YAML") {
		t.Fatalf("DataDir of a broken file: %v", err)
	}
}

func TestMemoryLimit(t *testing.T) {
	const pipeline = "sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n"
	for limit, want := range map[string]int64{"48MiB": 48 << 20, "64MB": 64e6, "1.5GiB": 3 << 29, "33554432": 32 << 20} {
		c, errs := Parse("x.yaml", []byte("agent:\n  memory_limit: "+limit+"\n"+pipeline), env(nil))
		if len(errs) > 0 || c.Agent.MemoryLimitBytes != want {
			t.Errorf("memory_limit %s: %d bytes, errors %v; want %d", limit, c.Agent.MemoryLimitBytes, errs, want)
		}
	}
	for limit, want := range map[string]string{
		"lots": `x.yaml:2:17: memory_limit: "lots" is not a size`,
		"-1MB": `"-1MB" is not a size`,
		"4MiB": `memory_limit "4MiB" is below 8MiB`,
	} {
		_, errs := Parse("x.yaml", []byte("agent:\n  memory_limit: "+limit+"\n"+pipeline), env(nil))
		if !strings.Contains(errs.Error(), want) {
			t.Errorf("memory_limit %s: errors %q lack %q", limit, errs.Error(), want)
		}
	}
}

func TestLogSettings(t *testing.T) {
	const pipeline = "sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n"
	c, errs := Parse("x.yaml", []byte(pipeline), env(nil))
	if len(errs) > 0 || c.Agent.LogFormat != "text" || c.Agent.LogSummaryInterval != 5*time.Minute {
		t.Fatalf("defaults: format %q, summary every %v, errors %v", c.Agent.LogFormat, c.Agent.LogSummaryInterval, errs)
	}
	for agent, want := range map[string]string{
		"log_format: xml":             `x.yaml:2:15: log_format: "xml" is neither text nor json`,
		"log_summary_interval: 100ms": "x.yaml:2:25: log_summary_interval 100ms is below 1s",
	} {
		_, errs := Parse("x.yaml", []byte("agent:\n  "+agent+"\n"+pipeline), env(nil))
		if !strings.Contains(errs.Error(), want) {
			t.Errorf("%s: errors %q lack %q", agent, errs.Error(), want)
		}
	}
	dir := t.TempDir()
	for text, want := range map[string]string{"agent:\n  log_format: json\n": "json", "agent:\n  log_format: json\n  data_dir: ${UNSET_X}\n": "json", "agent: [\n": "text"} {
		path := filepath.Join(dir, "p.yaml")
		if err := os.WriteFile(path, []byte(text+pipeline), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := LogFormat(path); got != want {
			t.Errorf("LogFormat of %q = %q, want %q", text, got, want)
		}
	}
	if got := LogFormat(filepath.Join(dir, "missing.yaml")); got != "text" {
		t.Errorf("LogFormat of a missing file = %q", got)
	}
}

// TestClientIDRefusals: a client id holding a character a client id may
// not (MQTT's wildcards, its level separator, a space) is refused at its
// position, naming the characters, unless it came from the environment;
// letters, digits and - _ . : pass.
func TestClientIDRefusals(t *testing.T) {
	file := func(id string) []byte {
		return []byte("brokers:\n  b:\n    url: tcp://broker:1883\n    client_id: " + id + "\nsources:\n  - {id: s, simulator: {devices: 1, rate: 1}}\n")
	}
	for id, want := range map[string]string{
		"gw#1":          `c.yaml:4:16: broker "b": client_id "gw#1" holds '#': a client id may hold letters, digits and - _ . :`,
		"'gw+1/x y'":    `c.yaml:4:16: broker "b": client_id "gw+1/x y" holds '+', '/', ' ':`,
		"gw-${ID}":      `c.yaml:4:16: broker "b": client_id "gw-${ID}" (from the environment) holds characters it may not:`,
		"gw-0042.a_b:1": "",
	} {
		_, errs := Parse("c.yaml", file(id), env(map[string]string{"ID": "secret#"}))
		switch {
		case want == "" && len(errs) > 0:
			t.Errorf("client_id %s refused: %v", id, errs)
		case want != "" && (len(errs) == 0 || !strings.Contains(errs.Error(), want)):
			t.Errorf("client_id %s: %v\nwant %s", id, errs, want)
		case strings.Contains(errs.Error(), "secret"):
			t.Errorf("client_id %s: the error shows what the environment gave: %v", id, errs)
		}
	}
}

// TestSinkOutputRefusals: an output shape a sink cannot publish is
// refused at the setting at fault.
func TestSinkOutputRefusals(t *testing.T) {
	file := func(output string) []byte {
		return []byte("brokers:\n  b: {url: tcp://broker:1883}\nsources:\n  - {id: s, simulator: {devices: 1, rate: 1}}\nsinks:\n  - id: out\n    input: s\n    broker: b\n    topic: out/{key}\n    output:\n" + output)
	}
	for output, want := range map[string]string{
		"      version: 3\n":           `o.yaml:11:16: sink "out": output version 3: write 2 (the default) or 1`,
		"      time: iso\n":            `o.yaml:11:13: sink "out": output time "iso" is not one of millis, rfc3339, both`,
		"      names: {key: value}\n":  `o.yaml:11:14: sink "out": output fields key and value would both be "value"`,
		"      names: {kee: device}\n": `o.yaml:11:14: sink "out": output has no field "kee" to rename`,
		"      add: {time: x}\n":       `o.yaml:11:12: sink "out": output field "time" added is the name of the field time`,
		"      names: {key: device}\n      add: {gateway: gw-1}\n      time: both\n": "",
	} {
		_, errs := Parse("o.yaml", file(output), env(nil))
		switch {
		case want == "" && len(errs) > 0:
			t.Errorf("output %q refused: %v", output, errs)
		case want != "" && (len(errs) == 0 || !strings.Contains(errs.Error(), want)):
			t.Errorf("output %q: %v\nwant %s", output, errs, want)
		}
	}
}
