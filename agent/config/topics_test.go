package config

import (
	"strings"
	"testing"
)

// TestTopics checks the topics a pipeline publishes to (a sink's, a
// source's dead_letter_topic, a broker's status_topic): one a broker does
// not take is refused, at the very character where the file holds the
// value as it is; one from the environment is not shown.
func TestTopics(t *testing.T) {
	const head = "brokers:\n  b: {url: 'tcp://b:1883'}\nsources:\n  - id: s\n    broker: b\n    topics: [in/x]\n"
	sink := func(topic string) string {
		return head + "sinks:\n  - id: out\n    input: s\n    broker: b\n    topic: " + topic + "\n"
	}
	for _, good := range []string{
		sink("out/{key}/count"),
		sink("'{key}'"),
		sink("cairn/${GW}/avg/{key}"),
		sink("$aws/things/t/shadow/update"),
		head + "    dead_letter_topic: dead/s\n",
		"brokers:\n  b: {url: 'tcp://b:1883', status_topic: gw/status}\nsources:\n  - id: s\n    broker: b\n    topics: [in/x]\n",
	} {
		if _, errs := Parse("a.yaml", []byte(good), env(map[string]string{"GW": "gateway-0001"})); len(errs) > 0 {
			t.Errorf("%s: %v", good, errs)
		}
	}
	for src, want := range map[string]string{
		sink(`"out/#/{key}"`):                      `a.yaml:11:17: sink "out": topic "out/#/{key}" is not a valid MQTT topic: contains the wildcard #`,
		sink("out/{key}/+"):                        `a.yaml:11:22: sink "out": topic "out/{key}/+" is not a valid MQTT topic: contains the wildcard +`,
		sink(`"ünï/€/{key}#"`):                     `a.yaml:11:24: sink "out": topic "ünï/€/{key}#" is not a valid MQTT topic: contains the wildcard #`,
		sink(`"out/\0/{key}"`):                     `a.yaml:11:12: sink "out": topic "out/\x00/{key}" is not a valid MQTT topic: contains NUL (U+0000)`,
		sink(`"out/\x85/{key}"`):                   `a.yaml:11:12: sink "out": topic "out/\u0085/{key}" is not a valid MQTT topic: contains the control character U+0085`,
		sink(`""`):                                 `a.yaml:11:12: sink "out": topic "" is not a valid MQTT topic: is empty`,
		sink("cairn/${GW}/avg/{key}"):              `a.yaml:11:12: sink "out": topic "cairn/${GW}/avg/{key}" (from the environment) is not a valid MQTT topic: it is empty, over 65,535 bytes or 201 levels, or holds a wildcard (+, #), NUL, a control character or a noncharacter`,
		sink(strings.Repeat("l/", 201) + "{key}"):  `a.yaml:11:12: sink "out": topic "l/l/l/`,
		head + "    dead_letter_topic: 'dead/#'\n": `a.yaml:7:30: source "s": dead_letter_topic "dead/#" is not a valid MQTT topic: contains the wildcard #`,
		"brokers:\n  b: {url: 'tcp://b:1883', status_topic: gw/+/status}\nsources:\n  - id: s\n    broker: b\n    topics: [in/x]\n": `a.yaml:2:45: broker "b": status_topic "gw/+/status" is not a valid MQTT topic: contains the wildcard +`,
		// 201 levels are the most a broker takes: none is left for /json.
		"brokers:\n  b: {url: 'tcp://b:1883', status_topic: " + strings.Repeat("l/", 200) + "s}\nsources:\n  - id: s\n    broker: b\n    topics: [in/x]\n": `broker "b": status_topic "l/l/`,
		"brokers:\n  b: {url: 'tcp://b:1883', status_topic: gw/status, status_interval: 500ms}\nsources:\n  - id: s\n    broker: b\n    topics: [in/x]\n":  `a.yaml:2:70: broker "b": status_interval 500ms is less than 1s`,
	} {
		_, errs := Parse("a.yaml", []byte(src), env(map[string]string{"GW": "a+b"}))
		if !strings.Contains(errs.Error(), want) || len(errs) != 1 || strings.Contains(errs.Error(), "a+b") {
			t.Errorf("%s\ngave %v\nwant %s", src, errs, want)
		}
	}
	// A missing topic is reported as missing, once.
	src := head + "sinks:\n  - id: out\n    input: s\n    broker: b\n"
	if _, errs := Parse("a.yaml", []byte(src), env(nil)); len(errs) != 1 || !strings.Contains(errs.Error(), `missing required field "topic"`) {
		t.Errorf("%s\ngave %v", src, errs)
	}
}
