package config

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/cairn-edge/cairn/broker"
	"github.com/cairn-edge/cairn/mqttio"
)

// BrokerGrants are the topics a client of an embedded broker may publish
// and subscribe to, as mosquitto's ACL patterns say them: topic filters
// in which a whole level `%u` stands for the client's user name and `%c`
// for its client id (a name or id holding `+`, `#` or `/` is granted
// nothing by them). Whatever they say, only the agent's own clients
// publish to the agent's topics (its sinks', dead letters' and status
// topics), and no client to `$SYS`.
type BrokerGrants struct {
	// The topic filters the client may publish to, in which a level
	// `%u` is its user name and `%c` its client id, such as
	// `sensors/%u/#`. Left out: any topic; `[]`: none. Never the agent's
	// own topics (its sinks', dead letters' and status topics) nor
	// `$SYS`. A message to another topic is acknowledged and dropped.
	Publish []string `yaml:"publish"`
	// The topic filters it may subscribe to, such as `setpoints/%u/#`:
	// a filter is granted when one of them matches every topic it
	// matches (else SUBACK 0x80), and a message is delivered on a topic
	// one of them matches. Left out: any topic; `[]`: none.
	Subscribe []string `yaml:"subscribe"`
}

// BrokerAnonymous are the grants of an embedded broker's clients that
// give no user name.
type BrokerAnonymous struct {
	Pos
	BrokerGrants
}

// MQTT returns the grants as mqttio takes them.
func (g *BrokerGrants) MQTT() broker.Grants {
	return broker.Grants{Publish: g.Publish, Subscribe: g.Subscribe}
}

// grants checks the grants g of who (a user, or the anonymous clients)
// of embedded broker name, positioned at def.
func (v *validator) grants(name, who string, g *BrokerGrants, def Pos) {
	for _, l := range []struct {
		field   string
		filters *[]string
	}{{"publish", &g.Publish}, {"subscribe", &g.Subscribe}} {
		for i, f := range *l.filters {
			at := entry{l.filters, i}
			p := v.c.at(at, def)
			err := broker.CheckGrant(f)
			var te *mqttio.TopicError
			switch {
			case errors.As(err, &te):
				reason := te.Reason
				if v.c.fromEnv(at) {
					reason = "it is empty, too long or too deep, or holds a wildcard that is not a whole level (or # not the last), %u or %c inside a level, NUL, a control character or a noncharacter"
				} else if q, ok := v.c.inside(at, utf8.RuneCountInString(f[:max(te.At, 0)])+1); ok && te.At >= 0 {
					p = q
				}
				v.errorf(p, "broker %q: %s: %s %s is no topic filter to grant: %s", name, who, l.field, v.c.show(at), reason)
			case who == "anonymous" && hasLevel(f, "%u"):
				v.errorf(p, "broker %q: anonymous: %s %s holds %%u, and anonymous clients have no user name", name, l.field, v.c.show(at))
			}
		}
	}
}

// hasLevel reports whether filter has a level that is exactly level.
func hasLevel(filter, level string) bool {
	for l := range strings.SplitSeq(filter, "/") {
		if l == level {
			return true
		}
	}
	return false
}

// anonymousGrants checks the anonymous clients' grants of embedded broker
// name, b: they need anonymous clients let in.
func (v *validator) anonymousGrants(name string, b *Broker) {
	a := b.Anonymous
	if a == nil {
		return
	}
	if !b.AnonymousAllowed() {
		v.errorf(a.Pos, "broker %q: anonymous: grants for clients it does not let in: say allow_anonymous: true", name)
	}
	v.grants(name, "anonymous", &a.BrokerGrants, a.Pos)
}
