package config

import (
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/broker"
)

// TestBrokerLimits: an embedded broker has its limits, the defaults where
// the file says none, as mqttio takes them; a value out of range is an
// error at its position; a broker that is not embedded has none.
func TestBrokerLimits(t *testing.T) {
	const pipeline = "sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n"
	c, errs := Parse("l.yaml", []byte("brokers:\n  l: {embedded: true}\n"+pipeline), env(nil))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := broker.Limits{MaxClients: 100, MaxConnectionRate: 10, MaxTopicLevels: 32, MaxTopicLength: 1024,
		MaxFiltersPerSubscribe: 64, MaxSubscriptions: 100, MaxSubscriptionsTotal: 500, MaxQueuedMessages: 1000,
		MaxQueuedBytes: 4 << 20, MaxQueuedBytesTotal: 16 << 20, MaxRetainedBytes: 4 << 20, AgentQueuedBytes: 32 << 20,
		MaxQueuedBytesPerAddress: 8 << 20, MaxSessionsPerAddress: 20, OfflineSessionExpiry: time.Hour}
	if got := c.Brokers["l"].Limits.MQTT(); got != want {
		t.Fatalf("defaults %+v\nwant %+v", got, want)
	}
	c, errs = Parse("l.yaml", []byte("brokers:\n  l:\n    embedded: true\n    limits: {max_clients: 3, max_queued_bytes: 1MB}\n"+pipeline), env(nil))
	if l := c.Brokers["l"].Limits.MQTT(); len(errs) > 0 || l.MaxClients != 3 || l.MaxQueuedBytes != 1e6 || l.MaxTopicLevels != 32 {
		t.Fatalf("limits %+v, errors %v", l, errs)
	}
	for src, want := range map[string]string{
		"brokers:\n  l:\n    embedded: true\n    limits:\n      max_topic_levels: -1\n":               `l.yaml:5:25: broker "l": limits.max_topic_levels -1 is outside 1..65535`,
		"brokers:\n  l:\n    embedded: true\n    limits:\n      max_topic_length: 70000\n":            `l.yaml:5:25: broker "l": limits.max_topic_length 70000 is outside 1..65535`,
		"brokers:\n  l:\n    embedded: true\n    limits:\n      max_clients: -5\n":                    `l.yaml:5:20: broker "l": limits.max_clients -5 is outside 1..`,
		"brokers:\n  l:\n    embedded: true\n    limits:\n      max_sessions_per_address: 0\n":        `l.yaml:5:33: broker "l": limits.max_sessions_per_address 0 is outside 1..`,
		"brokers:\n  l:\n    embedded: true\n    limits:\n      offline_session_expiry: 10ms\n":       `l.yaml:5:31: broker "l": limits.offline_session_expiry 10ms is under 1s`,
		"brokers:\n  l:\n    embedded: true\n    limits:\n      max_queued_bytes: 1KiB\n":             `l.yaml:5:25: broker "l": limits.max_queued_bytes: "1KiB" is not a size of at least 64KiB, such as 4MiB`,
		"brokers:\n  l:\n    embedded: true\n    limits:\n      agent_queued_bytes: 1MiB\n":           `l.yaml:5:27: broker "l": limits.agent_queued_bytes: "1MiB" is not a size of at least 2MiB`,
		"brokers:\n  l:\n    embedded: true\n    limits:\n      max_retained_bytes: lots\n":           `l.yaml:5:27: broker "l": limits.max_retained_bytes: "lots" is not a size`,
		"brokers:\n  l:\n    embedded: true\n    limits:\n      max_subscription: 3\n":                `l.yaml:5:7: unknown field "max_subscription"`,
		"brokers:\n  b:\n    url: tcp://b:1883\n    limits:\n      max_clients: 3\n":                  `l.yaml:5:7: broker "b": limits are an embedded broker's`,
		"brokers:\n  l:\n    embedded: true\n    limits:\n      max_queued_bytes_total: 0B\n":         `l.yaml:5:31: broker "l": limits.max_queued_bytes_total: "0B" is not a size of at least 64KiB`,
		"brokers:\n  l:\n    embedded: true\n    limits:\n      max_queued_bytes_per_address: 1000\n": `l.yaml:5:37: broker "l": limits.max_queued_bytes_per_address: "1000" is not a size of at least 64KiB`,
	} {
		_, errs := Parse("l.yaml", []byte(src+pipeline), env(nil))
		if errs == nil || !strings.Contains(errs.Error(), want) {
			t.Errorf("%s\ngave %v\nwant %s", src, errs, want)
		}
	}
}
