package broker

import (
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Limits bound what the clients of an embedded broker may make it
// hold and do, so that no client, whatever it sends, takes the agent's
// memory or CPU. They bind the clients of Config.Addr; the agent's
// own clients (Server.DialAgent) are bound only by AgentQueuedBytes and
// MaxRetainedBytes. A field at 0 is no limit.
type Limits struct {
	// MaxClients bounds the connections at once, refused as they are
	// accepted, and the sessions kept, connected or not: a CONNECT under
	// a new client id, once its login is let in, ends the session
	// offline longest, or, with none offline, is refused (CONNACK
	// "server unavailable").
	MaxClients int
	// MaxSessionsPerAddress bounds the sessions of the clients last
	// connected from one address, the same way, among that address's.
	MaxSessionsPerAddress int
	// OfflineSessionExpiry is how long a session is kept once its client
	// is gone (by the monotonic clock): then it ends, with what it holds.
	// An MQTT 5 client may ask for less.
	OfflineSessionExpiry time.Duration
	// MaxConnectionRate is the connections an address may open a second,
	// in bursts of up to twice as many: more are closed as they are
	// accepted.
	MaxConnectionRate int
	// MaxTopicLevels and MaxTopicLength (bytes) bound a topic filter a
	// client subscribes to (a filter over one gets SUBACK 0x80), a topic
	// it publishes to (the message is acknowledged and dropped: MQTT
	// 3.1.1 has no negative PUBACK) and its will's topic (its CONNECT is
	// refused).
	MaxTopicLevels, MaxTopicLength int
	// MaxFiltersPerSubscribe bounds the filters of one SUBSCRIBE: those
	// after it get 0x80.
	MaxFiltersPerSubscribe int
	// MaxSubscriptions bounds a client's subscriptions, and
	// MaxSubscriptionsTotal those of all clients: a filter over either
	// gets 0x80.
	MaxSubscriptions, MaxSubscriptionsTotal int
	// MaxQueuedMessages and MaxQueuedBytes bound what the broker holds for
	// a client's session: the messages not yet written to its connection
	// and, of QoS 1 and 2, those not yet acknowledged, its will and the
	// QoS 2 messages it sent and did not release; MaxQueuedBytesTotal
	// bounds all sessions' together. A message that would go over is not
	// delivered to that session (the others get it); a QoS 2 message the
	// session would hold over them is not acknowledged. A session whose
	// client is gone (offline) holds within its own limits and, with the
	// other offline sessions, within half of MaxQueuedBytesTotal, and
	// within what connected sessions leave of it: over any, the oldest
	// message of that session (over its own) or of the offline session
	// holding most (over the others) is dropped for the new one.
	MaxQueuedMessages                   int
	MaxQueuedBytes, MaxQueuedBytesTotal int64
	// MaxQueuedBytesPerAddress bounds what the sessions of the clients
	// last connected from one address hold together, as
	// MaxQueuedBytesTotal bounds all: the address's offline sessions hold
	// within half of it and within what its connected ones leave of it.
	// So no one address, however many sessions it opens, takes what the
	// others need.
	MaxQueuedBytesPerAddress int64
	// MaxRetainedBytes bounds the retained messages of all clients, the
	// agent's too: a message that would go over is delivered, not
	// retained.
	MaxRetainedBytes int64
	// AgentQueuedBytes bounds what the broker holds for each of the
	// agent's own sessions (a source's, when the source falls behind):
	// over it, messages to that session are dropped.
	AgentQueuedBytes int64
}

// Costs of what the broker holds, as Limits count them: a message
// is its payload and messageOverhead (a mochi packets.Packet, 800 bytes,
// and its place in a map or a channel); a retained one also its topic and
// a node of the topic index for each level (about 620 bytes).
const (
	messageOverhead = 1024
	levelOverhead   = 640
)

func messageCost(payload []byte) int64 { return int64(len(payload)) + messageOverhead }

func retainedCost(topic string, payload []byte) int64 {
	if len(payload) == 0 {
		return 0 // deletes the topic's retained message
	}
	return messageCost(payload) + int64(len(topic)) + int64(strings.Count(topic, "/")+1)*levelOverhead
}

// agentMaxQueued is how many messages the broker holds for one of the
// agent's sessions, and mochi's bound on the QoS 1 and 2 messages in
// flight to any client (Capabilities.MaximumInflight); agentMaxUnsent, of
// those, how many not yet written to its connection, the room of mochi's
// channel of writes of each client (MaximumClientWritesPending: it takes
// 8 bytes a message for every connection). Limits bind the other
// clients' well below.
const (
	agentMaxQueued = 1 << 15
	agentMaxUnsent = 1 << 13
)

// brokerGuard is the embedded broker's hook that enforces Limits
// (those the listener does not: clientListener), and logs what it refuses
// through refusals. What a session holds is counted as mochi tells its
// hooks (queue); what a delivery will cost, when mochi asks whether to
// make it (OnACLCheck), from the publish under way on its topic
// (sending).
type brokerGuard struct {
	mqtt.HookBase
	srv   *mqtt.Server
	lim   Limits
	acl   *brokerACL // what a client may read (OnACLCheck)
	refer *refusals
	// admits is brokerAuth's decision whether to let a CONNECT in, which
	// mochi asks after OnConnect.
	admits func(*mqtt.Client, packets.Packet) bool

	mu sync.Mutex
	// subscribing holds, for a client whose SUBSCRIBE is being processed,
	// the filters granted: mochi's access check of a filter is no
	// delivery.
	subscribing map[*mqtt.Client]*subscribe
	// subs are the filters of each session of a client other than the
	// agent's, by client id, from OnSubscribe on (those refused taken
	// back at OnSubscribed); subsTotal counts them all. (mochi's own
	// count misses a session's while another client takes it over.)
	subs      map[string]map[string]bool
	subsTotal int
	// queues are what the broker holds for each session, by the client
	// that holds it now (stale hooks of a client whose session another
	// took over touch nothing of it); session, which client that is, by
	// client id.
	queues  map[*mqtt.Client]*queue
	session map[string]*mqtt.Client
	queued  int64 // bytes held for the sessions of clients other than the agent's
	// byAddress is queued and offlineQueued for the sessions of each
	// address (queue.host) that holds any.
	byAddress map[string]*addressBytes
	seq       uint64 // the last inflight.seq given
	// offline are the queues of the sessions whose client is gone (not
	// the agent's), offlineQueued the bytes they hold, drops the
	// messages dropped from each session for them, by client id, while
	// the session lasts, and ended the offline sessions ended since the
	// broker started, by why (offline.go).
	offline       map[*queue]struct{}
	offlineQueued int64
	drops         map[string]int64
	ended         map[string]int64
	closed        bool             // the broker stopped: no session ends any more
	retained      map[string]int64 // the retained messages' costs, by topic
	// retainedBytes is their sum.
	retainedBytes int64
	sending       map[string]*sending // the publishes under way, by topic
	sweepAt       time.Time           // when sending is next swept of entries left behind

	// retaining is taken to write by a publish (or a will) being
	// retained, and to read by a SUBSCRIBE, whose retained messages mochi
	// looks up in its index of topics without the lock that retaining
	// one takes (a data race in mochi 2.7.9: topics.go, scanMessages and
	// RetainMessage). holding says which a client's packet holds, until
	// mochi has processed it (OnPacketProcessed) or sent the will.
	retaining sync.RWMutex
	holding   map[*mqtt.Client]bool // true: to write
}

type subscribe struct {
	filters []string // granted
	added   []int    // the indexes in the SUBSCRIBE of those new to the session
	checks  []check  // OnACLCheck's of topics among filters meanwhile
}

// check is an OnACLCheck of a topic that is a filter being subscribed to:
// a delivery or the filter, counted as unsent (added) at cost.
type check struct {
	topic string
	cost  int64
	added bool
	taken bool // taken back as the filter's
}

func newBrokerGuard(srv *mqtt.Server, lim Limits, acl *brokerACL, refer *refusals, admits func(*mqtt.Client, packets.Packet) bool) *brokerGuard {
	return &brokerGuard{srv: srv, lim: lim, acl: acl, refer: refer, admits: admits, subscribing: make(map[*mqtt.Client]*subscribe),
		subs: make(map[string]map[string]bool), queues: make(map[*mqtt.Client]*queue), session: make(map[string]*mqtt.Client),
		retained: make(map[string]int64), sending: make(map[string]*sending), holding: make(map[*mqtt.Client]bool),
		byAddress: make(map[string]*addressBytes), offline: make(map[*queue]struct{}), drops: make(map[string]int64), ended: make(map[string]int64)}
}

func (g *brokerGuard) ID() string { return "cairn-limits" }

func (g *brokerGuard) Provides(b byte) bool {
	switch b {
	case mqtt.OnConnect, mqtt.OnSessionEstablished, mqtt.OnDisconnect, mqtt.OnClientExpired,
		mqtt.OnSubscribe, mqtt.OnSubscribed, mqtt.OnUnsubscribed, mqtt.OnPublish, mqtt.OnPublished, mqtt.OnWill, mqtt.OnWillSent,
		mqtt.OnRetainedExpired, mqtt.OnACLCheck, mqtt.OnQosPublish, mqtt.OnQosComplete, mqtt.OnQosDropped,
		mqtt.OnPublishDropped, mqtt.OnPacketIDExhausted, mqtt.OnPacketSent, mqtt.OnPacketProcessed:
		return true
	}
	return false
}

// topicRefusal says what limit topic, a topic or a filter, is over, if
// any.
func (g *brokerGuard) topicRefusal(topic string) (string, slog.Attr) {
	if g.lim.MaxTopicLength > 0 && len(topic) > g.lim.MaxTopicLength {
		return "over max_topic_length", slog.Int("max_topic_length", g.lim.MaxTopicLength)
	}
	if levels := strings.Count(topic, "/") + 1; g.lim.MaxTopicLevels > 0 && levels > g.lim.MaxTopicLevels {
		return "over max_topic_levels", slog.Int("max_topic_levels", g.lim.MaxTopicLevels)
	}
	return "", slog.Attr{}
}

// refuseConnect answers cl's CONNECT with code (MQTT 5) or "server
// unavailable" (3.1.1, which has no other that fits) and logs why.
func (g *brokerGuard) refuseConnect(cl *mqtt.Client, code packets.Code, why string, detail ...slog.Attr) error {
	if cl.Properties.ProtocolVersion < 5 {
		code = packets.ErrServerUnavailable
	}
	g.srv.SendConnack(cl, code, false, nil)
	g.refer.noteClient(cl, "embedded broker refused a client's CONNECT: "+why, 1, detail...)
	return errRefused
}

// OnConnect refuses a client a will over the topic limits or the queue
// limits, and makes room for a new session (room), if the client is let
// in: mochi authenticates it after OnConnect, and a CONNECT refused its
// login must end no one's session.
func (g *brokerGuard) OnConnect(cl *mqtt.Client, pk packets.Packet) error {
	if isAgent(cl) {
		return nil
	}
	if pk.Connect.WillFlag {
		if why, attr := g.topicRefusal(pk.Connect.WillTopic); why != "" {
			return g.refuseConnect(cl, packets.ErrTopicNameInvalid, "will topic "+why, attr)
		}
		will := messageCost(pk.Connect.WillPayload)
		g.mu.Lock()
		per := g.lim.MaxQueuedBytesPerAddress
		over := g.lim.MaxQueuedBytes > 0 && will > g.lim.MaxQueuedBytes || g.lim.MaxQueuedBytesTotal > 0 && g.queued+will > g.lim.MaxQueuedBytesTotal ||
			per > 0 && g.addressLocked(hostOf(cl.Net.Remote)).queued+will > per
		g.mu.Unlock()
		if over {
			return g.refuseConnect(cl, packets.ErrQuotaExceeded, "will over max_queued_bytes, max_queued_bytes_per_address or max_queued_bytes_total", slog.Int64("will_bytes", will))
		}
	}
	if _, ok := g.srv.Clients.Get(cl.ID); !ok && g.admits(cl, pk) {
		if limit, n := g.room(cl); limit != "" {
			return g.refuseConnect(cl, packets.ErrServerBusy, "a new session over "+limit, slog.Int(limit, n))
		}
	}
	return nil
}

// OnSessionEstablished counts cl's will, in the queue of its session.
func (g *brokerGuard) OnSessionEstablished(cl *mqtt.Client, pk packets.Packet) {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.queueLocked(cl)
	g.addLocked(q, -q.will)
	q.will = 0
	if pk.Connect.WillFlag && !q.agent {
		q.will = messageCost(pk.Connect.WillPayload)
		g.addLocked(q, q.will)
	}
}

// OnDisconnect forgets a session that ends with its connection, and
// takes one that does not offline.
func (g *brokerGuard) OnDisconnect(cl *mqtt.Client, _ error, expire bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.subscribing, cl)
	switch {
	case cl.IsTakenOver():
	case expire:
		g.dropSessionLocked(cl)
	default:
		g.offlineLocked(cl)
	}
}

// OnClientExpired ends a session mochi expired (one whose MQTT 5 client
// asked for less than OfflineSessionExpiry, by the wall clock).
func (g *brokerGuard) OnClientExpired(cl *mqtt.Client) { g.endSession(cl) }

// endSession ends the session cl holds: out of mochi's index of topics,
// its messages in flight and its clients, and forgotten. (mochi 2.7.9,
// expiring a session, only forgets the client, whose subscriptions then
// stay in its index for good, and are a new session's of the same id.)
func (g *brokerGuard) endSession(cl *mqtt.Client) {
	g.srv.UnsubscribeClient(cl)
	cl.ClearInflights()
	g.srv.Clients.Delete(cl.ID)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dropSessionLocked(cl)
}

// dropSessionLocked forgets the session cl holds.
func (g *brokerGuard) dropSessionLocked(cl *mqtt.Client) {
	g.dropQueueLocked(cl)
	if g.session[cl.ID] == cl {
		delete(g.session, cl.ID)
		delete(g.drops, cl.ID)
		g.subsTotal -= len(g.subs[cl.ID])
		delete(g.subs, cl.ID)
	}
}

// OnSubscribe refuses the filters of a SUBSCRIBE that go over the limits,
// by making them empty: mochi answers an invalid filter with SUBACK 0x80
// (MQTT 5: 0x8F), before it indexes it.
func (g *brokerGuard) OnSubscribe(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	type refusal struct {
		n    int
		attr slog.Attr
	}
	refused := make(map[string]*refusal)
	g.hold(cl, false)
	g.mu.Lock()
	s := &subscribe{}
	if !isAgent(cl) {
		mine := g.subs[cl.ID]
		if mine == nil {
			mine = make(map[string]bool)
			g.subs[cl.ID] = mine
		}
		for i := range pk.Filters {
			f := pk.Filters[i].Filter
			if f == "" {
				continue // refused (brokerAccess), or none
			}
			why, attr := g.topicRefusal(f)
			if why == "" && g.lim.MaxFiltersPerSubscribe > 0 && i >= g.lim.MaxFiltersPerSubscribe {
				why, attr = "over max_filters_per_subscribe", slog.Int("max_filters_per_subscribe", g.lim.MaxFiltersPerSubscribe)
			}
			if why == "" && !mine[f] {
				switch {
				case g.lim.MaxSubscriptions > 0 && len(mine) >= g.lim.MaxSubscriptions:
					why, attr = "over max_subscriptions", slog.Int("max_subscriptions", g.lim.MaxSubscriptions)
				case g.lim.MaxSubscriptionsTotal > 0 && g.subsTotal >= g.lim.MaxSubscriptionsTotal:
					why, attr = "over max_subscriptions_total", slog.Int("max_subscriptions_total", g.lim.MaxSubscriptionsTotal)
				default:
					mine[f] = true
					g.subsTotal++
					s.added = append(s.added, i)
				}
			}
			if why != "" {
				if refused[why] == nil {
					refused[why] = &refusal{attr: attr}
				}
				refused[why].n++
				pk.Filters[i].Filter = ""
				continue
			}
			s.filters = append(s.filters, f)
		}
	} else {
		for _, f := range pk.Filters {
			s.filters = append(s.filters, f.Filter)
		}
	}
	g.subscribing[cl] = s
	g.mu.Unlock()
	for _, why := range slices.Sorted(maps.Keys(refused)) {
		g.refer.noteClient(cl, "embedded broker refused a topic filter: "+why, refused[why].n, refused[why].attr)
	}
	return pk
}

// OnSubscribed takes back the filters OnSubscribe counted that mochi
// refused (an invalid one, say), and what OnACLCheck counted of the
// filters as deliveries.
func (g *brokerGuard) OnSubscribed(cl *mqtt.Client, pk packets.Packet, codes []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.subscribing[cl]
	if s == nil {
		return
	}
	delete(g.subscribing, cl)
	for _, i := range s.added {
		if i < len(codes) && codes[i] >= packets.ErrUnspecifiedError.Code {
			g.unsubscribeLocked(cl.ID, pk.Filters[i].Filter)
		}
	}
	// Each filter mochi asked OnACLCheck about is the first check of its
	// topic not yet taken: a delivery to that topic meanwhile came as
	// well, or after.
	q := g.queues[cl]
	for _, f := range s.filters {
		if !mqtt.IsValidFilter(f, false) {
			continue // not asked about
		}
		for i := range s.checks {
			if c := &s.checks[i]; c.topic == f && !c.taken {
				c.taken = true
				if c.added && q != nil {
					g.takeUnsentLocked(q, c.cost)
				}
				break
			}
		}
	}
}

// OnUnsubscribed forgets the filters a client unsubscribed from, or that
// its session's end took; but not those of a client whose session
// another has since (mochi may end the old one's after the new one
// subscribed again).
func (g *brokerGuard) OnUnsubscribed(cl *mqtt.Client, pk packets.Packet) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if owner := g.session[cl.ID]; owner != nil && owner != cl {
		return
	}
	for _, f := range pk.Filters {
		g.unsubscribeLocked(cl.ID, f.Filter)
	}
}

func (g *brokerGuard) unsubscribeLocked(id, filter string) {
	if mine := g.subs[id]; mine[filter] {
		delete(mine, filter)
		g.subsTotal--
	}
}

// OnPublish drops, acknowledged, a message to a topic over the limits;
// does not retain one over MaxRetainedBytes; does not acknowledge a QoS 2
// message the session has no room to hold; and notes the cost of the
// others' deliveries (sending).
func (g *brokerGuard) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	agent := isAgent(cl)
	if !agent {
		if why, attr := g.topicRefusal(pk.TopicName); why != "" {
			g.refer.noteClient(cl, "embedded broker dropped a message: topic "+why, 1, attr)
			return pk, packets.CodeSuccessIgnore
		}
	}
	cost := messageCost(pk.Payload)
	g.mu.Lock()
	var why string
	if q := g.queueLocked(cl); pk.FixedHeader.Qos > 0 {
		if _, ok := cl.State.Inflight.Get(pk.PacketID); !ok {
			// mochi dropped what it had in flight to cl under this
			// packet id, without a word: client and broker ids are one
			// space to it.
			g.setInflightLocked(q, pk.PacketID, 0)
		}
		if !agent && pk.FixedHeader.Qos == 2 {
			// Counted at once, as mochi will hold its acknowledgement
			// (OnQosPublish counts it again, the same).
			if why = g.overLocked(q, messageOverhead); why == "" {
				g.setInflightLocked(q, pk.PacketID, messageOverhead)
			}
		}
	}
	keep := true
	if why == "" && pk.FixedHeader.Retain {
		keep = g.retainLocked(pk.TopicName, pk.Payload)
		pk.FixedHeader.Retain = keep
	}
	if why == "" {
		g.sendingLocked(pk.TopicName, cost)
	}
	g.mu.Unlock()
	switch {
	case why != "":
		g.refer.noteClient(cl, "embedded broker did not acknowledge a QoS 2 message: the session "+why, 1)
		return pk, packets.ErrRejectPacket
	case !keep:
		g.refer.noteClient(cl, "embedded broker did not retain a message: over max_retained_bytes", 1, slog.Int64("max_retained_bytes", g.lim.MaxRetainedBytes))
	case pk.FixedHeader.Retain:
		g.hold(cl, true)
	}
	return pk, nil
}

// OnPublished notes that a publish is no longer under way.
func (g *brokerGuard) OnPublished(_ *mqtt.Client, pk packets.Packet) {
	if pk.Ignore {
		return // refused by OnPublish, not under way
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sentLocked(pk.TopicName)
}

// OnWill does not retain a will over MaxRetainedBytes, and notes the cost
// of its deliveries. (A will mochi sends later, after its delay, is
// retained without OnWill's lock: MQTT 5 only, and rare.)
func (g *brokerGuard) OnWill(cl *mqtt.Client, will mqtt.Will) (mqtt.Will, error) {
	g.mu.Lock()
	keep := true
	if will.Retain {
		keep = g.retainLocked(will.TopicName, will.Payload)
		will.Retain = keep
	}
	g.sendingLocked(will.TopicName, messageCost(will.Payload))
	g.mu.Unlock()
	if !keep {
		g.refer.noteClient(cl, "embedded broker did not retain a will: over max_retained_bytes", 1, slog.Int64("max_retained_bytes", g.lim.MaxRetainedBytes))
	}
	if will.Retain && will.WillDelayInterval == 0 {
		g.hold(cl, true)
	}
	return will, nil
}

// OnWillSent notes that a will is no longer under way.
func (g *brokerGuard) OnWillSent(cl *mqtt.Client, pk packets.Packet) {
	g.release(cl)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sentLocked(pk.TopicName)
}

// OnPacketProcessed releases what cl's packet held of retaining.
func (g *brokerGuard) OnPacketProcessed(cl *mqtt.Client, _ packets.Packet, _ error) { g.release(cl) }

// hold takes retaining for cl's packet: to write if write.
func (g *brokerGuard) hold(cl *mqtt.Client, write bool) {
	if write {
		g.retaining.Lock()
	} else {
		g.retaining.RLock()
	}
	g.mu.Lock()
	g.holding[cl] = write
	g.mu.Unlock()
}

// release releases what cl holds of retaining, if anything.
func (g *brokerGuard) release(cl *mqtt.Client) {
	g.mu.Lock()
	write, ok := g.holding[cl]
	delete(g.holding, cl)
	g.mu.Unlock()
	switch {
	case !ok:
	case write:
		g.retaining.Unlock()
	default:
		g.retaining.RUnlock()
	}
}

// OnRetainedExpired forgets a retained message mochi expired.
func (g *brokerGuard) OnRetainedExpired(topic string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.retainedBytes -= g.retained[topic]
	delete(g.retained, topic)
}

// retainLocked reports whether the message payload to topic may be
// retained, replacing the topic's, and counts it if so.
func (g *brokerGuard) retainLocked(topic string, payload []byte) bool {
	cost, old := retainedCost(topic, payload), g.retained[topic]
	if cost > old && g.lim.MaxRetainedBytes > 0 && g.retainedBytes-old+cost > g.lim.MaxRetainedBytes {
		return false
	}
	g.retainedBytes += cost - old
	if cost == 0 {
		delete(g.retained, topic)
	} else {
		g.retained[topic] = cost
	}
	return true
}
