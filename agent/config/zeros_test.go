package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// zeroFile is a pipeline file whose field at path (a.b, a[].b) is written
// with the zero value zero; it has what every file needs besides, and a
// broker, an operator and a sink for their fields.
func zeroFile(path, zero string) string {
	sections := map[string]string{
		"agent":       "agent:\n  data_dir: d\n",
		"brokers":     "brokers:\n  b:\n    url: tcp://broker:1883\n",
		"checkpoints": "checkpoints:\n  interval: 10s\n",
		"sources":     "sources:\n  - id: s\n    broker: b\n    topics: [a/b]\n    time: ts\n",
		"operators":   "operators:\n  - id: w\n    type: window\n    inputs: [s]\n    key_by: key\n    window: {kind: tumbling, size: 1s}\n    aggregate: avg\n",
		"sinks":       "sinks:\n  - id: out\n    input: w\n    broker: b\n    topic: out/{key}\n",
		"remote":      "",
	}
	parts := strings.Split(path, ".")
	sec := strings.TrimSuffix(parts[0], "[]")
	field := parts[len(parts)-1]
	switch {
	case path == "agent.data_dir":
		sections["agent"] = "agent:\n  data_dir: " + zero + "\n"
	case path == "checkpoints.interval":
		sections["checkpoints"] = "checkpoints:\n  interval: " + zero + "\n"
	case path == "brokers.<name>.listen":
		sections["brokers"] = "brokers:\n  b:\n    embedded: true\n    listen: " + zero + "\n"
	case strings.HasPrefix(path, "brokers.<name>.limits."):
		sections["brokers"] = "brokers:\n  b:\n    embedded: true\n    limits:\n      " + field + ": " + zero + "\n"
	case strings.HasPrefix(path, "brokers."):
		sections["brokers"] += "    " + field + ": " + zero + "\n"
	case strings.HasPrefix(path, "sinks[].output."):
		sections["sinks"] += "    output:\n      " + field + ": " + zero + "\n"
	case strings.HasPrefix(path, "operators[].window."):
		sections["operators"] = strings.Replace(sections["operators"], "size: 1s}", "size: 1s, "+field+": "+zero+"}", 1)
	case strings.HasPrefix(path, "sources[].simulator."):
		sections["sources"] = strings.Replace(sections["sources"], "rate: 1}", "rate: 1, "+field+": "+zero+"}", 1)
	case strings.HasPrefix(path, "remote."):
		sections["remote"] = "remote:\n  endpoint: s3:9000\n  bucket: bkt\n  access_key: a\n  secret_key: s\n  " + field + ": " + zero + "\n"
	case sec == "sources" || sec == "operators" || sec == "sinks":
		sections[sec] += "    " + field + ": " + zero + "\n"
	default:
		sections[sec] += "  " + field + ": " + zero + "\n"
	}
	var b strings.Builder
	for _, s := range []string{"agent", "brokers", "checkpoints", "sources", "operators", "sinks", "remote"} {
		b.WriteString(sections[s])
	}
	return b.String()
}

// TestWrittenZerosAreNotReplaced: a value the file writes is the value
// that runs, a zero too: every setting whose default is not its zero,
// written with its zero, is an error at that setting that says what to
// write instead, or, where the zero means something (checkpoints.interval:
// 0s, only when asked for), the zero runs. Defaults apply only to what
// the file leaves out. The table covers every such setting the types
// have.
func TestWrittenZerosAreNotReplaced(t *testing.T) {
	honoured := map[string]func(*Config) bool{
		"checkpoints.interval":   func(c *Config) bool { return c.Checkpoints.Interval == 0 },
		"sources[].max_future":   func(c *Config) bool { return c.Sources[0].MaxFuture == 0 },
		"sources[].idle_timeout": func(c *Config) bool { return c.Sources[0].IdleTimeout == 0 },
	}
	zeros := map[string]string{
		"agent.data_dir": `""`, "agent.log_level": `""`, "agent.log_format": `""`, "agent.log_summary_interval": "0s",
		"agent.retained_savepoints": "0", "agent.max_output_backlog": `""`, "agent.sync_interval": "0s",
		"brokers.<name>.listen": `""`, "brokers.<name>.keepalive": "0s", "brokers.<name>.status_interval": "0s",
		"checkpoints.interval": "0s", "checkpoints.mode": `""`, "checkpoints.timeout": "0s", "checkpoints.max_concurrent": "0",
		"checkpoints.retained": "0", "checkpoints.max_chain": "0", "sources[].parallelism": "0", "sources[].format": `""`,
		"sources[].max_future": "0s", "sources[].min_time": `""`, "sources[].idle_timeout": "0s",
		"operators[].parallelism": "0", "operators[].on_error": `""`, "operators[].window.time": `""`,
		"brokers.<name>.limits.max_clients": "0", "brokers.<name>.limits.max_connection_rate": "0",
		"brokers.<name>.limits.max_sessions_per_address": "0", "brokers.<name>.limits.offline_session_expiry": "0s",
		"brokers.<name>.limits.max_topic_levels": "0", "brokers.<name>.limits.max_topic_length": "0",
		"brokers.<name>.limits.max_filters_per_subscribe": "0", "brokers.<name>.limits.max_subscriptions": "0",
		"brokers.<name>.limits.max_subscriptions_total": "0", "brokers.<name>.limits.max_queued_messages": "0",
		"brokers.<name>.limits.max_queued_bytes": `""`, "brokers.<name>.limits.max_queued_bytes_total": `""`,
		"brokers.<name>.limits.max_queued_bytes_per_address": `""`, "brokers.<name>.limits.max_retained_bytes": `""`,
		"brokers.<name>.limits.agent_queued_bytes": `""`, "sinks[].parallelism": "0",
		"sinks[].output.version": "0", "sinks[].output.time": `""`, "remote.timeout": "0s", "remote.tls": "false",
	}
	for _, path := range nonZeroDefaults(reflect.TypeOf(Config{}), "") {
		if _, ok := zeros[path]; !ok {
			t.Errorf("%s has a default other than its zero, and no case here", path)
		}
	}
	for path, zero := range zeros {
		file := zeroFile(path, zero)
		c, errs := Parse("z.yaml", []byte(file), env(nil))
		line := 1 + strings.Count(file[:strings.Index(file, zeroKey(path)+": "+zero)], "\n")
		switch {
		case honoured[path] != nil:
			if len(errs) > 0 || !honoured[path](c) {
				t.Errorf("%s: %s: %v; want it to run as written", path, zero, errs)
			}
		case path == "remote.tls": // false is no zero to refuse: https is off, as written
			if len(errs) > 0 || c.Remote.TLS {
				t.Errorf("remote.tls: false: %v, TLS %v", errs, c.Remote.TLS)
			}
		case len(errs) == 0:
			t.Errorf("%s: %s is taken, as it would not be where it means nothing (it was once replaced by the default)", path, zero)
		case !strings.HasPrefix(errs[0].Error(), fmt.Sprintf("z.yaml:%d:", line)) || strings.Contains(errs[0].Error(), "given twice"):
			t.Errorf("%s: %s: the error is not at the setting (line %d): %v", path, zero, line, errs)
		}
	}
}

// zeroKey is the name path's setting has in the file.
func zeroKey(path string) string { return path[strings.LastIndex(path, ".")+1:] }

// nonZeroDefaults returns the paths of the settings of t (as docs/config.md
// names them, under prefix) whose default is not their type's zero.
func nonZeroDefaults(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	var out []string
	for _, f := range fileFields(t) {
		name := prefix + f.name
		ft := t.FieldByIndex(f.Index).Type
		if def, ok := t.FieldByIndex(f.Index).Tag.Lookup("default"); ok {
			if def != "0" && def != "0s" && def != "false" && def != "" {
				out = append(out, name)
			}
			continue
		}
		elem := ft
		for elem.Kind() == reflect.Pointer || elem.Kind() == reflect.Slice || elem.Kind() == reflect.Map {
			elem = elem.Elem()
		}
		if elem.Kind() != reflect.Struct {
			continue
		}
		switch ft.Kind() {
		case reflect.Slice:
			out = append(out, nonZeroDefaults(ft, name+"[].")...)
		case reflect.Map:
			out = append(out, nonZeroDefaults(ft, name+".<name>.")...)
		default:
			out = append(out, nonZeroDefaults(ft, name+".")...)
		}
	}
	return out
}
