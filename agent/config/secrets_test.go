package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// secrets is the environment of TestNoValueFromTheEnvironment: values that
// nothing else in its files holds (hunter2, 99999, 31337), so an error
// that has one took it from the environment.
var secrets = map[string]string{
	"SECRET": "hunter2-secret",
	"NUM":    "99999",
	"PORT":   "31337",
	"URL":    "tcp://hunter2-url:1883",
}

// TestNoValueFromTheEnvironment: an error about a value that took
// something from the environment (a password, often) is at the value's
// position and shows the file's text, never the value: errors go to the
// log, to `cairn status` and to `cairn top`. The same file with the values
// written in gets the errors it always got, the values quoted.
func TestNoValueFromTheEnvironment(t *testing.T) {
	const simulator = "sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n"
	const broker = "brokers:\n  b: {url: 'tcp://b:1883'}\n"
	const remote = "remote:\n  endpoint: s3:9000\n  bucket: bkt\n  access_key: a\n  secret_key: s\n"
	const op = simulator + "operators:\n  - id: o\n    inputs: [s]\n    key_by: key\n"
	for _, tc := range []struct {
		name, file string
		// want is in the errors of file; literal in those of file with
		// the values written in ("": shown nowhere, as a URL's password).
		want, literal string
	}{
		// The decoder's types.
		{"duration", "brokers:\n  b:\n    keepalive: ${SECRET}\n    url: tcp://b:1883\n" + simulator,
			`x.yaml:3:16: want a duration such as 500ms or 10s, not "${SECRET}" (from the environment)`,
			`x.yaml:3:16: want a duration such as 500ms or 10s, not "hunter2-secret"`},
		{"bool", simulator + remote + "  tls: ${SECRET}\n",
			`x.yaml:9:8: want true or false, not "${SECRET}" (from the environment)`, `not "hunter2-secret"`},
		{"whole number", "brokers:\n  b:\n    url: tcp://b:1883\n    max_inflight: ${SECRET}\n" + simulator,
			`x.yaml:4:19: want a whole number, not "${SECRET}" (from the environment)`, `not "hunter2-secret"`},
		{"number", op + "    type: threshold\n    high: ${SECRET}\n    low: 1\n",
			`x.yaml:9:11: want a number, not "${SECRET}" (from the environment)`, `not "hunter2-secret"`},
		{"alias", "agent:\n  log_level: &s ${SECRET}\n  log_format: *s\n" + simulator,
			`x.yaml:3:15: log_format: "${SECRET}" (from the environment) is neither text nor json`, `log_format: "hunter2-secret"`},
		// The agent section.
		{"log_level", "agent:\n  log_level: ${SECRET}\n" + simulator,
			`x.yaml:2:14: log_level: "${SECRET}" (from the environment) is not one of debug, info, warn, error`,
			`x.yaml:2:14: log_level: "hunter2-secret" is not one of`},
		{"memory_limit", "agent:\n  memory_limit: x${SECRET}\n" + simulator,
			`x.yaml:2:17: memory_limit: "x${SECRET}" (from the environment) is not a size`, `memory_limit: "xhunter2-secret"`},
		{"max_output_backlog", "agent:\n  max_output_backlog: ${SECRET}\n" + simulator,
			`x.yaml:2:23: max_output_backlog: "${SECRET}" (from the environment) is not a size`, `max_output_backlog: "hunter2-secret"`},
		{"metrics", "agent:\n  metrics: ${SECRET}\n" + simulator,
			`x.yaml:2:12: agent.metrics: "${SECRET}" (from the environment) is not host:port`, `agent.metrics: "hunter2-secret" is not host:port`},
		{"metrics port alone", "agent:\n  metrics: ${PORT}\n" + simulator,
			`x.yaml:2:12: agent.metrics: "${PORT}" (from the environment) is not host:port: write 127.0.0.1:9100 (this device only) or :9100`,
			`agent.metrics: "31337" is not host:port: write 127.0.0.1:31337`},
		{"api port", "agent:\n  api: '127.0.0.1:${SECRET}'\n  api_token_file: /t\n" + simulator,
			`x.yaml:2:8: agent.api: the port of "127.0.0.1:${SECRET}" (from the environment) is not a number 0–65535`,
			`agent.api: port "hunter2-secret" of "127.0.0.1:hunter2-secret" is not a number`},
		// Brokers.
		{"listen", "brokers:\n  l: {embedded: true, listen: '${SECRET}'}\n" + simulator,
			`x.yaml:2:31: broker "l": listen: "${SECRET}" (from the environment) is not host:port`, `listen: "hunter2-secret" is not host:port`},
		{"max_inflight", "brokers:\n  b: {url: 'tcp://b:1883', max_inflight: '${NUM}'}\n" + simulator,
			`x.yaml:2:42: broker "b": max_inflight "${NUM}" (from the environment) is outside 1..65535`, `max_inflight 99999 is outside`},
		{"url", "brokers:\n  b:\n    url: ${SECRET}\n" + simulator,
			`x.yaml:3:10: broker "b": URL "${SECRET}" (from the environment) is none the agent can dial`,
			`broker "b": URL "hunter2-secret" has no scheme: write tcp://hunter2-secret:1883`},
		{"url host", "brokers:\n  b:\n    url: tcp://${SECRET}\n" + simulator,
			`x.yaml:3:10: broker "b": URL "tcp://${SECRET}" (from the environment) is none the agent can dial`,
			`URL "tcp://hunter2-secret" has no port: write tcp://hunter2-secret:1883`},
		{"url password", "brokers:\n  b:\n    url: mqtt://u:${SECRET}@b\n" + simulator,
			`x.yaml:3:10: broker "b": URL "mqtt://u:${SECRET}@b" (from the environment) is none`,
			""},
		{"url scheme", "brokers:\n  b:\n    url: ${URL}\n    ca_file: /ca\n" + simulator,
			`x.yaml:4:14: broker "b": ca_file needs a url that speaks TLS, such as ssl://HOST:8883`, `ca_file needs a url that speaks TLS, such as ssl://HOST:8883, not tcp://`},
		{"password", "brokers:\n  b: {url: 'tcp://b:1883', password: '${SECRET}', password_file: /p}\n" + simulator,
			`x.yaml:2:6: broker "b": password or password_file, not both`, ""},
		{"user", "brokers:\n  l:\n    embedded: true\n    users: [{username: '${SECRET}', password: a}, {username: '${SECRET}'}]\n" + simulator,
			`x.yaml:4:62: broker "l": user "${SECRET}" (from the environment) is there twice`, `user "hunter2-secret" is there twice`},
		{"user without password", "brokers:\n  l:\n    embedded: true\n    users: [{username: '${SECRET}'}]\n" + simulator,
			`x.yaml:4:13: broker "l": user "${SECRET}" (from the environment) needs password`, `user "hunter2-secret" needs password`},
		// Checkpoints.
		{"mode", "checkpoints:\n  mode: ${SECRET}\n" + simulator,
			`x.yaml:2:9: checkpointing mode "${SECRET}" (from the environment) is none of exactly-once, at-least-once, unaligned`,
			`unknown checkpointing mode "hunter2-secret"`},
		// Sources.
		{"id", "sources:\n  - id: ${SECRET}\n    broker: b\n" + broker,
			`x.yaml:2:5: source "${SECRET}" (from the environment): no topics`, `source "hunter2-secret": no topics`},
		{"bad id", "sources:\n  - id: ${SECRET}!\n    simulator: {devices: 1, rate: 1}\n",
			`x.yaml:2:5: id "${SECRET}!" (from the environment) must be 1 to 64 letters`, `id "hunter2-secret!" may hold only letters`},
		{"id twice", simulator + "  - id: ${SECRET}\n    simulator: {devices: 1, rate: 1}\n  - id: ${SECRET}\n    simulator: {devices: 1, rate: 1}\n",
			`x.yaml:6:5: id "${SECRET}" (from the environment) is used twice`, `id "hunter2-secret" is used twice`},
		{"parallelism", "sources:\n  - id: s\n    parallelism: ${NUM}\n    simulator: {devices: 1, rate: 1}\n",
			`x.yaml:3:18: parallelism "${NUM}" (from the environment) is outside 1..128`, `parallelism 99999 is outside`},
		{"topic", broker + "sources:\n  - id: s\n    broker: b\n    topics: ['${SECRET}/{}']\n",
			`x.yaml:6:14: topic "${SECRET}/{}" (from the environment) is no pattern`, `topic "hunter2-secret/{}": level 1 has an empty name`},
		{"shared topic", broker + "sources:\n  - id: s\n    broker: b\n    parallelism: 2\n    topics: ['$share/${SECRET}/x']\n",
			`x.yaml:7:14: source "s": topic "$share/${SECRET}/x" (from the environment) is a shared subscription`, `topic "$share/hunter2-secret/x" is a shared`},
		{"field type", broker + "sources:\n  - id: s\n    broker: b\n    topics: [t]\n    fields: {a: '${SECRET}'}\n",
			`x.yaml:7:17: source "s": fields: a: type "${SECRET}" (from the environment) is none of number`, `fields: a: type "hunter2-secret" is none of`},
		{"format", broker + "sources:\n  - id: s\n    broker: b\n    topics: [t]\n    format: ${SECRET}\n",
			`x.yaml:7:13: source "s": format "${SECRET}" (from the environment) is neither json nor raw`, `format "hunter2-secret" is neither`},
		{"source broker", "sources:\n  - id: s\n    broker: ${SECRET}\n    topics: [t]\n",
			`x.yaml:2:5: no broker named "${SECRET}" (from the environment) under brokers`, `no broker named "hunter2-secret"`},
		{"topic level as a field", broker + "sources:\n  - id: s\n    broker: b\n    topics: ['a/{${SECRET}}']\n    fields: {x: number}\n" +
			"operators:\n  - {id: f, type: filter, inputs: [s], expr: y > 1}\n",
			`x.yaml:9:46: operator "f": expr "y > 1" does not compile: unknown name y (1:1); its records have key, time, value and the fields x, and fields that levels of topics from the environment name`,
			`its records have key, time, value and the fields hunter2-secret, x`},
		// Operators.
		{"input", op + "    type: count\n  - {id: p, type: union, inputs: [o, '${SECRET}']}\n",
			`x.yaml:9:38: operator "p": input "${SECRET}" (from the environment) is not a source`, `input "hunter2-secret" is not`},
		{"type", op + "    type: ${SECRET}\n",
			`x.yaml:8:11: operator "o": unknown type "${SECRET}" (from the environment)`, `unknown type "hunter2-secret"`},
		{"on_error", op + "    type: count\n    on_error: ${SECRET}\n",
			`x.yaml:9:15: operator "o": on_error "${SECRET}" (from the environment) is none of`, `on_error "hunter2-secret" is none of`},
		{"operator id", op + "    type: count\n  - {id: '${SECRET}', type: filter, inputs: [s]}\n",
			`x.yaml:9:5: operator "${SECRET}" (from the environment): filter needs expr`, `operator "hunter2-secret": filter needs expr`},
		{"expr", op + "    type: count\n  - id: f\n    type: filter\n    inputs: [o]\n    expr: value > ${SECRET}\n",
			`x.yaml:12:11: operator "f": expr "value > ${SECRET}" (from the environment) does not compile;`,
			`operator "f": expr "value > hunter2-secret" does not compile: unknown name hunter2`},
		{"expr's type", op + "    type: filter\n    expr: value + ${NUM}\n",
			`x.yaml:9:11: operator "o": a filter's expr must give true or false; "value + ${NUM}" (from the environment) gives a number`,
			`"value + 99999" gives a number`},
		{"aggregate", op + "    type: window\n    window: {kind: tumbling, size: 1m}\n    aggregate: ${SECRET}\n",
			`x.yaml:10:16: operator "o": aggregate "${SECRET}" (from the environment) is none of count`, `unknown aggregate "hunter2-secret"`},
		{"window kind", op + "    type: window\n    window: {kind: '${SECRET}', size: 1m}\n    aggregate: sum\n",
			`x.yaml:9:13: window kind "${SECRET}" (from the environment) is not tumbling`, `window kind "hunter2-secret" is not`},
		{"window time", op + "    type: window\n    window: {kind: tumbling, size: 1m, time: '${SECRET}'}\n    aggregate: sum\n",
			`x.yaml:9:13: window time "${SECRET}" (from the environment) is neither`, `window time "hunter2-secret" is neither`},
		{"threshold", op + "    type: threshold\n    high: 1\n    low: ${NUM}\n",
			`x.yaml:10:10: operator "o": threshold's low ("${NUM}" (from the environment)) is above its high (1)`, `threshold's low (99999) is above its high (1)`},
		// Sinks.
		{"sink", broker + simulator + "sinks:\n  - {id: k, input: '${SECRET}', broker: '${SECRET}', topic: t}\n",
			`x.yaml:7:5: sink "k": input "${SECRET}" (from the environment) is not a source`, `sink "k": input "hunter2-secret"`},
		// Remote storage.
		{"endpoint", simulator + strings.Replace(remote, "s3:9000", "'https://${SECRET}'", 1),
			`x.yaml:5:13: remote: endpoint "https://${SECRET}" (from the environment): want host:port`, `endpoint "https://hunter2-secret": want`},
		{"device", simulator + remote + "  device: ${SECRET}/x\n",
			`x.yaml:9:11: remote: device: device name "${SECRET}/x" (from the environment): want a non-empty name`, `device name "hunter2-secret/x": want`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := Parse("x.yaml", []byte(tc.file), env(secrets))
			if !strings.Contains(errs.Error(), tc.want) {
				t.Errorf("errors lack %s:\n%v", tc.want, errs)
			}
			for _, e := range errs {
				for _, value := range []string{"hunter2", "99999", "31337"} {
					if strings.Contains(e.Error(), value) {
						t.Errorf("error shows a value from the environment: %s", e.Error())
					}
				}
			}
			literal := envRef.ReplaceAllStringFunc(tc.file, func(ref string) string { return secrets[ref[2:len(ref)-1]] })
			_, errs = Parse("x.yaml", []byte(literal), env(nil))
			switch {
			case tc.literal == "" && strings.Contains(errs.Error(), secrets["SECRET"]):
				t.Errorf("with the value written in, errors show it:\n%v", errs)
			case !strings.Contains(errs.Error(), tc.literal):
				t.Errorf("with the value written in, errors lack %s:\n%v", tc.literal, errs)
			}
		})
	}
}

// TestNoPathFromTheEnvironment: Load's errors about files do not show a
// path that came from the environment either.
func TestNoPathFromTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	text := "brokers:\n  b:\n    url: tcp://b:1883\n    password_file: /run/${CAIRN_TEST_SECRET}\n    users: []\n" +
		"sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CAIRN_TEST_SECRET", "hunter2-secret")
	_, err := Load(path)
	if want := `p.yaml:4:20: broker "b": password_file "/run/${CAIRN_TEST_SECRET}" (from the environment): no such file or directory`; err == nil ||
		!strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Load: %v\nwant %s", err, want)
	}
}
