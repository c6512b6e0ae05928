package broker

import (
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/cairn-edge/cairn/mqttio"
)

// Grants are the topics a client of an embedded broker may publish and
// subscribe to, in mosquitto's ACL model: topic filters in which a level
// that is exactly %u stands for the client's user name and one that is
// exactly %c for its client id. A nil list grants every topic, an empty
// one none. A client whose user name or client id holds +, # or / is
// granted nothing by a filter with %u or %c (it would widen the filter),
// nor is an anonymous client by one with %u. Whatever they grant, only
// the agent's own clients publish to the agent's topics
// (Config.AgentTopics), and no client to $SYS topics.
type Grants struct {
	Publish, Subscribe []string
}

// CheckGrant returns a *mqttio.TopicError if pattern is no filter Grants
// may hold: a valid topic filter (wildcards whole levels, # the last; no
// character mqttio.CheckTopic refuses but them; not too long or deep) in
// which %u and %c are whole levels.
func CheckGrant(pattern string) error {
	if pattern == "" {
		return &mqttio.TopicError{Topic: pattern, At: -1, Reason: "is empty"}
	}
	at := 0
	for level := range strings.SplitSeq(pattern, "/") {
		switch {
		case level == "+" || level == "%u" || level == "%c":
		case level == "#":
			if at+len(level) != len(pattern) {
				return &mqttio.TopicError{Topic: pattern, At: at, Reason: "# must be the last level"}
			}
		case strings.Contains(level, "%u") || strings.Contains(level, "%c"):
			return &mqttio.TopicError{Topic: pattern, At: at + strings.IndexByte(level, '%'), Reason: "%u and %c stand for a whole level only"}
		default:
			if i, reason := mqttio.BadTopicChar(level); i >= 0 {
				if c := level[i]; c == '+' || c == '#' {
					reason = "a wildcard must be a whole level"
				}
				return &mqttio.TopicError{Topic: pattern, At: at + i, Reason: reason}
			}
		}
		at += len(level) + 1
	}
	return mqttio.CheckTopicSize(pattern)
}

// brokerACL decides what the clients of an embedded broker may publish
// and subscribe to (Config.Grants, AnonymousGrants, AgentTopics).
// It holds no state of clients: a decision reads the client's user name
// and id. Safe for concurrent use once made.
type brokerACL struct {
	agent     atomic.Pointer[[]mqttio.TopicTemplate] // the agent's topics
	users     map[string]*access                     // the users with Grants, by name
	anonymous *access
}

// access is what a client may do: its user name, and its grants
// compiled.
type access struct {
	user               string
	publish, subscribe grantList
}

// grantList is a list of Grants, each filter split into its levels; all
// grants every topic (a nil list).
type grantList struct {
	all     bool
	filters [][]string
}

// everything is the access of a client whose grants are not listed.
var everything = &access{publish: grantList{all: true}, subscribe: grantList{all: true}}

func newBrokerACL(cfg Config) *brokerACL {
	a := &brokerACL{users: make(map[string]*access), anonymous: compileAccess("", cfg.AnonymousGrants)}
	a.setAgentTopics(cfg.AgentTopics)
	for user, g := range cfg.Grants {
		a.users[user] = compileAccess(user, g)
	}
	return a
}

// setAgentTopics makes topics (Config.AgentTopics) the agent's.
func (a *brokerACL) setAgentTopics(topics []string) {
	var ts []mqttio.TopicTemplate
	for _, t := range topics {
		ts = append(ts, mqttio.NewTopicTemplate(t))
	}
	a.agent.Store(&ts)
}

func compileAccess(user string, g Grants) *access {
	list := func(filters []string) grantList {
		l := grantList{all: filters == nil}
		for _, f := range filters {
			l.filters = append(l.filters, strings.Split(f, "/"))
		}
		return l
	}
	return &access{user: user, publish: list(g.Publish), subscribe: list(g.Subscribe)}
}

// of returns the access of the client with user name user (empty:
// anonymous).
func (a *brokerACL) of(user []byte) *access {
	if len(user) == 0 {
		return a.anonymous
	}
	if ac := a.users[string(user)]; ac != nil {
		return ac
	}
	return everything
}

// agentTopic reports whether topic is one of the agent's.
func (a *brokerACL) agentTopic(topic string) bool {
	ts := *a.agent.Load()
	for i := range ts {
		if ts[i].Makes(topic) {
			return true
		}
	}
	return false
}

// mayPublish reports whether a client with access ac and id client may
// publish to topic (a topic name, without wildcards), and, if it may not,
// whether that is because topic is the agent's.
func (a *brokerACL) mayPublish(ac *access, client, topic string) (ok, agents bool) {
	if a.agentTopic(topic) {
		return false, true
	}
	return ac.publish.grants(topic, ac.user, client), false
}

// maySubscribe reports whether a client with access ac and id client may
// subscribe to filter: whether a grant matches every topic the filter
// does (of a shared subscription, $share/GROUP/ left out). Given a topic
// name, it says whether the client may read it.
func (a *brokerACL) maySubscribe(ac *access, client, filter string) bool {
	if ac.subscribe.all {
		return true
	}
	if mqtt.IsSharedFilter(filter) {
		_, rest, _ := strings.Cut(filter, "/")
		_, filter, _ = strings.Cut(rest, "/")
	}
	return ac.subscribe.grants(filter, ac.user, client)
}

// grants reports whether a filter of l matches every topic filter does
// (a topic name: matches it), its levels %u and %c standing for user and
// client.
func (l *grantList) grants(filter, user, client string) bool {
	if l.all {
		return true
	}
	userOK, clientOK := substitutable(user), substitutable(client)
	for _, g := range l.filters {
		if covers(g, filter, user, client, userOK, clientOK) {
			return true
		}
	}
	return false
}

// substitutable reports whether s, a user name or client id, may stand
// for %u or %c: a level of its own that widens no filter.
func substitutable(s string) bool { return s != "" && !strings.ContainsAny(s, "+#/") }

// covers reports whether grant, a filter split into levels, matches
// every topic that filter matches (MQTT 3.1.1 section 4.7: + is one
// level, # the parent level and any below; a topic that begins with $
// is matched by no filter that begins with a wildcard). A level %u of
// grant stands for user and %c for client, if they may (userOK,
// clientOK); else grant covers nothing.
func covers(grant []string, filter, user, client string, userOK, clientOK bool) bool {
	rest, more := filter, true
	for i, g := range grant {
		if g == "#" {
			return i > 0 || !strings.HasPrefix(filter, "$")
		}
		if !more {
			return false
		}
		var level string
		level, rest, more = strings.Cut(rest, "/")
		if level == "#" {
			// Any levels from here, one at least at the first level:
			// matched by grant's # alone, or at the first level by +/#.
			return len(grant) == i+2 && i == 0 && g == "+" && grant[1] == "#"
		}
		switch g {
		case "+":
			if i == 0 && strings.HasPrefix(level, "$") {
				return false
			}
		case "%u":
			if !userOK || level != user {
				return false
			}
		case "%c":
			if !clientOK || level != client {
				return false
			}
		default:
			if level != g {
				return false
			}
		}
	}
	return !more
}

// brokerAccess is the embedded broker's hook that enforces its brokerACL
// on the clients other than the agent's: a publish it refuses is
// acknowledged and dropped (QoS 0 dropped; MQTT 3.1.1 has no negative
// PUBACK, and mosquitto does the same), a filter gets SUBACK 0x80, a
// will it refuses its CONNECT (CONNACK "not authorized"), and so does a
// session another user holds under the client's id, and a will it
// refuses once sent (the agent's topics changed since) is dropped; and
// it closes the connection of a CONNECT that MQTT 3.1.1 forbids (a
// password without a user name, a will topic with a wildcard). A
// delivery the client may not read is brokerGuard's to refuse, as mochi
// asks it (OnACLCheck). Each refusal is counted and logged through
// refusals.
type brokerAccess struct {
	mqtt.HookBase
	srv   *mqtt.Server
	acl   *brokerACL
	refer *refusals
	// admits is brokerAuth's decision whether to let a CONNECT in, which
	// mochi asks after OnConnect.
	admits func(*mqtt.Client, packets.Packet) bool

	// claims are the client ids of the CONNECTs let in whose sessions
	// mochi has not established yet, and their users: a CONNECT under
	// one of them by another user is refused as one under a session of
	// theirs is, so that of two racing, the second cannot take the
	// session mochi gives the first.
	mu     sync.Mutex
	claims map[string]claim
}

// claim is a CONNECT's claim to a client id, until its session is
// established or its connection ends.
type claim struct {
	cl   *mqtt.Client
	user string
}

// maxStaleClaims is how many claims may be left by CONNECTs that ended
// before their sessions were established before they are swept.
const maxStaleClaims = 64

func (h *brokerAccess) ID() string { return "cairn-access" }

func (h *brokerAccess) Provides(b byte) bool {
	switch b {
	case mqtt.OnConnect, mqtt.OnSessionEstablished, mqtt.OnDisconnect, mqtt.OnPacketRead, mqtt.OnSubscribe, mqtt.OnPublish, mqtt.OnWill:
		return true
	}
	return false
}

// OnConnect closes the connection of a CONNECT with a password and no
// user name (MQTT 3.1.1: 3.1.2-22; MQTT 5 allows it) or a will topic
// with a wildcard (3.1.2-9, 4.7.3), without CONNACK; and answers "not
// authorized" to one whose will topic the client may not publish to, and
// to one let in (brokerAuth) under a client id whose session, connected
// or offline, is another user's, or that another user's CONNECT claims
// (anonymous clients are one user): mochi would end that user's
// connection, and hand the new client the session's subscriptions and
// the messages it holds, which it sends without asking OnACLCheck.
func (h *brokerAccess) OnConnect(cl *mqtt.Client, pk packets.Packet) error {
	if isAgent(cl) {
		return nil
	}
	c := &pk.Connect
	if c.PasswordFlag && !c.UsernameFlag && cl.Properties.ProtocolVersion < 5 {
		h.refer.noteClient(cl, "embedded broker closed a client's connection: a CONNECT with a password and no user name", 1)
		return errRefused
	}
	if c.WillFlag && strings.ContainsAny(c.WillTopic, "+#") {
		h.refer.noteClient(cl, "embedded broker closed a client's connection: a will topic with a wildcard", 1, slog.String("topic", clientText(c.WillTopic)))
		return errRefused
	}
	if c.WillFlag {
		if ok, agents := h.acl.mayPublish(h.acl.of(c.Username), cl.ID, c.WillTopic); !ok {
			return h.notAuthorized(cl, "a will to "+refusedTopic(agents), slog.String("topic", clientText(c.WillTopic)))
		}
	}
	if !h.admits(cl, pk) {
		return nil // refused at authentication, next
	}
	if !h.claim(cl, string(c.Username)) {
		return h.notAuthorized(cl, "a session of another user under its client id")
	}
	return nil
}

// claim claims cl's client id for user, unless another user's session or
// CONNECT holds it; it sweeps the claims whose connections ended once
// there are too many. The claims are looked at before the sessions, both
// under the lock: a claim ends only once its session is in mochi's
// clients.
func (h *brokerAccess) claim(cl *mqtt.Client, user string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if held, ok := h.claims[cl.ID]; ok && held.cl != cl && !held.cl.Closed() && held.user != user {
		return false
	}
	if other, ok := h.srv.Clients.Get(cl.ID); ok && string(other.Properties.Username) != user && !(other.Closed() && endsWithConnection(other)) {
		return false
	}
	if h.claims == nil {
		h.claims = make(map[string]claim)
	}
	if len(h.claims) >= maxStaleClaims {
		for id, held := range h.claims {
			if held.cl.Closed() {
				delete(h.claims, id)
			}
		}
	}
	h.claims[cl.ID] = claim{cl: cl, user: user}
	return true
}

// endsWithConnection reports whether cl's session ends with its
// connection (clean session in MQTT 3.1.1, no expiry in MQTT 5), as
// mochi decides when the connection ends: such a session of another
// user whose connection is closed is no obstacle to a new one.
func endsWithConnection(cl *mqtt.Client) bool {
	if cl.Properties.ProtocolVersion == 5 {
		return cl.Properties.Props.SessionExpiryInterval == 0
	}
	return cl.Properties.Clean
}

// OnSessionEstablished ends cl's claim to its client id: mochi holds its
// session now, which OnConnect finds.
func (h *brokerAccess) OnSessionEstablished(cl *mqtt.Client, _ packets.Packet) { h.unclaim(cl) }

// OnDisconnect ends cl's claim if its session was never established.
func (h *brokerAccess) OnDisconnect(cl *mqtt.Client, _ error, _ bool) { h.unclaim(cl) }

func (h *brokerAccess) unclaim(cl *mqtt.Client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if held, ok := h.claims[cl.ID]; ok && held.cl == cl {
		delete(h.claims, cl.ID)
	}
}

// notAuthorized answers cl's CONNECT with "not authorized" and logs why.
func (h *brokerAccess) notAuthorized(cl *mqtt.Client, why string, detail ...slog.Attr) error {
	code := packets.ErrNotAuthorized
	if cl.Properties.ProtocolVersion < 5 {
		code = packets.ErrBadUsernameOrPassword // 3.1.1's "not authorized", 5
	}
	h.srv.SendConnack(cl, code, false, nil)
	h.refer.noteClient(cl, "embedded broker refused a client's CONNECT: "+why, 1, detail...)
	return errRefused
}

// refusedTopic says why a client may not publish to a topic: it is the
// agent's (agents), or not granted.
func refusedTopic(agents bool) string {
	if agents {
		return "a topic only the agent publishes to"
	}
	return "a topic not granted to the client"
}

// OnPacketRead acknowledges and counts a client's QoS 1 publish to a
// $SYS topic, which mochi drops unanswered before any other hook sees it.
func (h *brokerAccess) OnPacketRead(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if pk.FixedHeader.Type != packets.Publish || isAgent(cl) || len(pk.TopicName) < len(mqtt.SysPrefix) ||
		!strings.EqualFold(pk.TopicName[:len(mqtt.SysPrefix)], mqtt.SysPrefix) {
		return pk, nil
	}
	if pk.FixedHeader.Qos == 1 {
		cl.WritePacket(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: pk.PacketID})
	}
	h.refer.noteClient(cl, "embedded broker dropped a message: a $SYS topic, which only the broker publishes to", 1, slog.String("topic", clientText(pk.TopicName)))
	return pk, nil
}

// OnSubscribe refuses the filters the client may not subscribe to, by
// making them empty, as brokerGuard does those over its limits.
func (h *brokerAccess) OnSubscribe(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if isAgent(cl) {
		return pk
	}
	ac := h.acl.of(cl.Properties.Username)
	for i := range pk.Filters {
		f := &pk.Filters[i].Filter
		if *f != "" && !h.acl.maySubscribe(ac, cl.ID, *f) {
			h.refer.noteClient(cl, "embedded broker refused a topic filter: not granted to the client", 1, slog.String("filter", clientText(*f)))
			*f = ""
		}
	}
	return pk
}

// OnPublish drops, acknowledged, a message to a topic the client may not
// publish to.
func (h *brokerAccess) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if isAgent(cl) {
		return pk, nil
	}
	if ok, agents := h.acl.mayPublish(h.acl.of(cl.Properties.Username), cl.ID, pk.TopicName); !ok {
		h.refer.noteClient(cl, "embedded broker dropped a message: "+refusedTopic(agents), 1, slog.String("topic", clientText(pk.TopicName)))
		return pk, packets.CodeSuccessIgnore
	}
	return pk, nil
}

// OnWill drops a will to a topic the client may not publish to: one let
// in at its CONNECT (OnConnect) whose topic a reload has made the
// agent's since (Server.SetAgentTopics). mochi gives a hook no way to
// drop a will: it is sent to the empty topic, which no filter matches
// (mochi's index of topics finds no subscriber of it), and not retained.
// (An MQTT 5 will that mochi sends after a delay is judged as its client
// goes, when mochi asks OnWill.)
func (h *brokerAccess) OnWill(cl *mqtt.Client, will mqtt.Will) (mqtt.Will, error) {
	if isAgent(cl) {
		return will, nil
	}
	if ok, agents := h.acl.mayPublish(h.acl.of(cl.Properties.Username), cl.ID, will.TopicName); !ok {
		h.refer.noteClient(cl, "embedded broker dropped a will: "+refusedTopic(agents), 1, slog.String("topic", clientText(will.TopicName)))
		return mqtt.Will{}, nil
	}
	return will, nil
}
