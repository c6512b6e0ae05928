package config

import (
	"math"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/cairn-edge/cairn/broker"
)

// BrokerLimits are an embedded broker's limits (broker.Limits;
// docs/security.md says how the defaults were chosen).
type BrokerLimits struct {
	Pos
	// The clients connected at once, and the sessions kept for clients
	// connected or not: a connection over it is closed as it is accepted;
	// a CONNECT under a new client id whose login is let in ends the
	// session offline (its client gone) longest, or, with none offline,
	// is refused (CONNACK 3, server unavailable).
	MaxClients int `yaml:"max_clients" default:"100"`
	// The sessions of the clients last connected from one address, the
	// same way among that address's.
	MaxSessionsPerAddress int `yaml:"max_sessions_per_address" default:"20"`
	// How long a session is kept once its client is gone (clean=false),
	// by the agent's monotonic clock: then it ends, with what it holds.
	// An MQTT 5 client may ask for less.
	OfflineSessionExpiry time.Duration `yaml:"offline_session_expiry" default:"1h"`
	// The connections an address may open a second, in bursts of up to
	// twice as many: more are closed as they are accepted. Failed logins
	// come no faster.
	MaxConnectionRate int `yaml:"max_connection_rate" default:"10"`
	// The levels of a topic or topic filter: a filter with more gets SUBACK
	// 0x80, a message to a topic with more is acknowledged and dropped,
	// a CONNECT whose will has one is refused.
	MaxTopicLevels int `yaml:"max_topic_levels" default:"32"`
	// The bytes of a topic or topic filter, the same way.
	MaxTopicLength int `yaml:"max_topic_length" default:"1024"`
	// The topic filters of one SUBSCRIBE: those after get 0x80.
	MaxFiltersPerSubscribe int `yaml:"max_filters_per_subscribe" default:"64"`
	// A client's subscriptions: a filter over gets 0x80.
	MaxSubscriptions int `yaml:"max_subscriptions" default:"100"`
	// All clients' subscriptions together, the same way.
	MaxSubscriptionsTotal int `yaml:"max_subscriptions_total" default:"500"`
	// The messages the broker holds for a client's session: not yet
	// written to its connection, or (QoS 1 and 2) not yet acknowledged.
	// A message over it is not delivered to that session (the others get
	// it); to an offline session, it takes the place of the session's
	// oldest, which is dropped and counted.
	MaxQueuedMessages int `yaml:"max_queued_messages" default:"1000"`
	// The bytes the broker holds for a client's session, its will
	// included, each message counted with 1 KiB of the broker's own, a
	// size of at least `64KiB`: a message over it is not delivered to that
	// session.
	MaxQueuedBytes string `yaml:"max_queued_bytes" default:"4MiB"`
	// MaxQueuedBytesN is MaxQueuedBytes parsed.
	MaxQueuedBytesN int64 `yaml:"-"`
	// The bytes held for all clients' sessions together, the same way;
	// offline sessions hold half of it at most, and never what connected
	// ones need: over it, the oldest message of the offline session that
	// holds most is dropped for a new one.
	MaxQueuedBytesTotal string `yaml:"max_queued_bytes_total" default:"16MiB"`
	// MaxQueuedBytesTotalN is MaxQueuedBytesTotal parsed.
	MaxQueuedBytesTotalN int64 `yaml:"-"`
	// The bytes held for the sessions of the clients last connected from
	// one address together, the same way (offline ones hold half of it
	// at most): no one address takes all of max_queued_bytes_total.
	// Loopback is one address, every local client's.
	MaxQueuedBytesPerAddress string `yaml:"max_queued_bytes_per_address" default:"8MiB"`
	// MaxQueuedBytesPerAddressN is MaxQueuedBytesPerAddress parsed.
	MaxQueuedBytesPerAddressN int64 `yaml:"-"`
	// The retained messages of all clients, the agent's too, each
	// counted with its topic, 1 KiB and 640 bytes a topic level: a
	// message over it is delivered, not retained.
	MaxRetainedBytes string `yaml:"max_retained_bytes" default:"4MiB"`
	// MaxRetainedBytesN is MaxRetainedBytes parsed.
	MaxRetainedBytesN int64 `yaml:"-"`
	// The bytes the broker holds for each of the agent's own sessions
	// (which no other limit here binds; mochi holds 32,768 messages for
	// one at most), at least `2MiB`: a source that falls behind its input
	// by more loses the messages over it, logged at ERROR.
	AgentQueuedBytes string `yaml:"agent_queued_bytes" default:"32MiB"`
	// AgentQueuedBytesN is AgentQueuedBytes parsed.
	AgentQueuedBytesN int64 `yaml:"-"`
}

// MQTT returns the limits as mqttio takes them.
func (l *BrokerLimits) MQTT() broker.Limits {
	return broker.Limits{
		MaxClients: l.MaxClients, MaxSessionsPerAddress: l.MaxSessionsPerAddress,
		OfflineSessionExpiry: l.OfflineSessionExpiry, MaxConnectionRate: l.MaxConnectionRate,
		MaxTopicLevels: l.MaxTopicLevels, MaxTopicLength: l.MaxTopicLength,
		MaxFiltersPerSubscribe: l.MaxFiltersPerSubscribe,
		MaxSubscriptions:       l.MaxSubscriptions, MaxSubscriptionsTotal: l.MaxSubscriptionsTotal,
		MaxQueuedMessages: l.MaxQueuedMessages,
		MaxQueuedBytes:    l.MaxQueuedBytesN, MaxQueuedBytesTotal: l.MaxQueuedBytesTotalN,
		MaxQueuedBytesPerAddress: l.MaxQueuedBytesPerAddressN,
		MaxRetainedBytes:         l.MaxRetainedBytesN, AgentQueuedBytes: l.AgentQueuedBytesN,
	}
}

// limits checks the limits of embedded broker name, and sets what is
// parsed from them.
func (v *validator) limits(name string, l *BrokerLimits) {
	c := v.c
	for _, f := range []struct {
		name string
		n    *int
		max  int
	}{
		{"max_clients", &l.MaxClients, math.MaxInt32},
		{"max_sessions_per_address", &l.MaxSessionsPerAddress, math.MaxInt32},
		{"max_connection_rate", &l.MaxConnectionRate, math.MaxInt32},
		{"max_topic_levels", &l.MaxTopicLevels, 65535},
		{"max_topic_length", &l.MaxTopicLength, 65535},
		{"max_filters_per_subscribe", &l.MaxFiltersPerSubscribe, math.MaxInt32},
		{"max_subscriptions", &l.MaxSubscriptions, math.MaxInt32},
		{"max_subscriptions_total", &l.MaxSubscriptionsTotal, math.MaxInt32},
		{"max_queued_messages", &l.MaxQueuedMessages, math.MaxInt32},
	} {
		if *f.n < 1 || *f.n > f.max {
			v.errorf(c.at(f.n, l.Pos), "broker %q: limits.%s %s is outside 1..%d", name, f.name, c.show(f.n), f.max)
		}
	}
	if l.OfflineSessionExpiry < time.Second {
		v.errorf(c.at(&l.OfflineSessionExpiry, l.Pos), "broker %q: limits.offline_session_expiry %s is under 1s", name, c.show(&l.OfflineSessionExpiry))
	}
	for _, f := range []struct {
		name  string
		text  *string
		bytes *int64
		least string
	}{
		{"max_queued_bytes", &l.MaxQueuedBytes, &l.MaxQueuedBytesN, "64KiB"},
		{"max_queued_bytes_total", &l.MaxQueuedBytesTotal, &l.MaxQueuedBytesTotalN, "64KiB"},
		{"max_queued_bytes_per_address", &l.MaxQueuedBytesPerAddress, &l.MaxQueuedBytesPerAddressN, "64KiB"},
		{"max_retained_bytes", &l.MaxRetainedBytes, &l.MaxRetainedBytesN, "64KiB"},
		{"agent_queued_bytes", &l.AgentQueuedBytes, &l.AgentQueuedBytesN, "2MiB"},
	} {
		least, _ := humanize.ParseBytes(f.least)
		n, err := humanize.ParseBytes(*f.text)
		if err != nil || n > math.MaxInt64 || n < least {
			v.errorf(c.at(f.text, l.Pos), "broker %q: limits.%s: %s is not a size of at least %s, such as 4MiB", name, f.name, c.show(f.text), f.least)
			continue
		}
		*f.bytes = int64(n)
	}
}
