package broker

import (
	"log/slog"
	"slices"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// What a session holds, as brokerGuard counts it: the deliveries mochi
// asks to make (OnACLCheck), each counted as unsent until mochi writes it
// (QoS 0) or holds it in flight (QoS 1 and 2: OnQosPublish), then until
// it is acknowledged or dropped; what a delivery costs is known, when
// mochi asks, from the publish under way to its topic (sending).

// sending is the publishes under way to a topic: how many, and the cost
// of the largest.
type sending struct {
	n    int
	cost int64
	at   time.Time
}

// sendingTTL is how long a publish is taken to be under way at most: one
// mochi never finishes (its acknowledgement could not be written) is
// forgotten after that.
const sendingTTL = time.Minute

// sendingLocked notes a publish of cost under way to topic, and forgets
// those left behind for sendingTTL.
func (g *brokerGuard) sendingLocked(topic string, cost int64) {
	now := time.Now()
	if now.After(g.sweepAt) {
		for t, s := range g.sending {
			if now.Sub(s.at) > sendingTTL {
				delete(g.sending, t)
			}
		}
		g.sweepAt = now.Add(sendingTTL)
	}
	s := g.sending[topic]
	if s == nil {
		s = &sending{}
		g.sending[topic] = s
	}
	s.n++
	s.cost = max(s.cost, cost)
	s.at = now
}

// sentLocked notes that a publish to topic is no longer under way.
func (g *brokerGuard) sentLocked(topic string) {
	if s := g.sending[topic]; s != nil {
		if s.n--; s.n <= 0 {
			delete(g.sending, topic)
		}
	}
}

// deliveryCostLocked is what a delivery of a message to topic costs at
// most: the largest publish under way to it, or its retained message
// (what mochi sends a client that subscribes), or one without payload
// ($SYS).
func (g *brokerGuard) deliveryCostLocked(topic string) int64 {
	cost := int64(messageOverhead)
	if s := g.sending[topic]; s != nil {
		cost = s.cost
	}
	if pk, ok := g.srv.Topics.Retained.Get(topic); ok {
		cost = max(cost, messageCost(pk.Payload))
	}
	return cost
}

// OnACLCheck lets every client publish and subscribe to anything (the
// limits on topics are OnPublish's and OnSubscribe's, the grants
// brokerAccess's); it is mochi's question before each delivery, too: a
// message to a topic the client may not read (none should come:
// brokerAccess grants a client only filters it may read, and refuses it
// another user's session) or that would take a session over its limits
// is not delivered to it. (A filter mochi asks about is one brokerAccess
// let through, which grants it as a topic too.)
func (g *brokerGuard) OnACLCheck(cl *mqtt.Client, topic string, write bool) bool {
	if write {
		return true
	}
	if !isAgent(cl) && !g.acl.maySubscribe(g.acl.of(cl.Properties.Username), cl.ID, topic) {
		g.refer.noteClient(cl, "embedded broker did not deliver a message: a topic not granted to the client", 1, slog.String("topic", clientText(topic)))
		return false
	}
	g.mu.Lock()
	q := g.queueLocked(cl)
	cost := g.deliveryCostLocked(topic)
	var why string
	if q.offline {
		why = g.unfitLocked(q, cost)
	} else {
		why = g.overLocked(q, cost)
	}
	added := why == "" && !cl.Closed()
	if added {
		q.unsent++
		q.unsentBytes += cost
		g.addLocked(q, cost)
	}
	if s := g.subscribing[cl]; s != nil && slices.Contains(s.filters, topic) {
		// mochi asks the same of a filter being subscribed to, which
		// OnSubscribed takes back (a filter is no delivery, nor ever
		// written): one cannot tell it from a delivery to the same topic
		// meanwhile. (So a client whose queue is full is refused a
		// filter too.)
		s.checks = append(s.checks, check{topic: topic, cost: cost, added: added})
	}
	g.mu.Unlock()
	if why != "" {
		if q.agent {
			g.refer.noteClient(cl, "embedded broker dropped messages to the agent's session: "+why, 1, slog.Int64("agent_queued_bytes", g.lim.AgentQueuedBytes))
		} else {
			g.refer.noteClient(cl, "embedded broker dropped messages to a session: "+why, 1)
		}
		return false
	}
	return true
}

// overLocked says which limit a message of cost would take q over, if
// any.
func (g *brokerGuard) overLocked(q *queue, cost int64) string {
	if q.agent {
		switch {
		case q.messages() >= agentMaxQueued:
			return "it holds 32768 messages"
		case q.unsent >= agentMaxUnsent:
			return "8192 messages wait to be written to its connection"
		case g.lim.AgentQueuedBytes > 0 && q.bytes()+cost > g.lim.AgentQueuedBytes:
			return "over agent_queued_bytes"
		}
		return ""
	}
	switch {
	case g.lim.MaxQueuedMessages > 0 && q.messages() >= g.lim.MaxQueuedMessages:
		return "over max_queued_messages"
	case g.lim.MaxQueuedBytes > 0 && q.bytes()+cost > g.lim.MaxQueuedBytes:
		return "over max_queued_bytes"
	case g.lim.MaxQueuedBytesPerAddress > 0 && g.addressLocked(q.host).queued+cost > g.lim.MaxQueuedBytesPerAddress:
		return "over max_queued_bytes_per_address"
	case g.lim.MaxQueuedBytesTotal > 0 && g.queued+cost > g.lim.MaxQueuedBytesTotal:
		return "over max_queued_bytes_total"
	}
	return ""
}

// OnQosPublish counts a QoS 1 or 2 message mochi holds for cl until it
// is acknowledged (mochi's inflight, keyed by packet id, holds the
// acknowledgements of cl's own QoS 2 messages too, until cl releases
// them); a message counted as unsent since OnACLCheck is now counted in
// flight.
func (g *brokerGuard) OnQosPublish(cl *mqtt.Client, pk packets.Packet, _ int64, _ int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.queueLocked(cl)
	switch pk.FixedHeader.Type {
	case packets.Puback:
		// Of a QoS 1 message of cl's, taken out once written: only the
		// one whose writing failed as the connection broke stays (until
		// the session resumes), and it is not counted.
		g.setInflightLocked(q, pk.PacketID, 0)
		return
	case packets.Pubrec, packets.Pubrel, packets.Pubcomp:
		// Of a QoS 2 message of cl's, until cl releases it: counted, and
		// checked by OnPublish.
		g.setInflightLocked(q, pk.PacketID, messageOverhead)
		return
	}
	if _, ok := q.inflight[pk.PacketID]; ok && pk.FixedHeader.Dup {
		return // sent again
	}
	cost := messageCost(pk.Payload)
	g.setInflightLocked(q, pk.PacketID, cost)
	if !pk.FixedHeader.Dup && !cl.Closed() {
		g.takeUnsentLocked(q, cost)
	}
	if q.offline {
		q.order = append(q.order, held{id: pk.PacketID, seq: q.inflight[pk.PacketID].seq})
		g.trimLocked(q)
	}
}

// OnQosComplete and OnQosDropped forget a message mochi no longer holds
// for cl; but the messages of a session taken over stay with the client
// that took it (which has the same id).
func (g *brokerGuard) OnQosComplete(cl *mqtt.Client, pk packets.Packet) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if q := g.queues[cl]; q != nil {
		g.setInflightLocked(q, pk.PacketID, 0)
	}
}

func (g *brokerGuard) OnQosDropped(cl *mqtt.Client, pk packets.Packet) {
	if cl.IsTakenOver() {
		return
	}
	g.OnQosComplete(cl, pk)
}

// OnPublishDropped: mochi dropped a delivery to cl, its channel of
// writes full; a QoS 1 or 2 one it took out of its inflight without
// saying which.
func (g *brokerGuard) OnPublishDropped(cl *mqtt.Client, pk packets.Packet) {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.queues[cl]
	if q == nil {
		return
	}
	dropped := false
	for id := range q.inflight {
		if _, ok := cl.State.Inflight.Get(id); !ok {
			g.setInflightLocked(q, id, 0)
			dropped = true
		}
	}
	if !dropped {
		g.takeUnsentLocked(q, messageCost(pk.Payload))
	}
}

// OnPacketIDExhausted: mochi dropped a QoS 1 or 2 delivery to cl, which
// has 65535 in flight.
func (g *brokerGuard) OnPacketIDExhausted(cl *mqtt.Client, pk packets.Packet) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if q := g.queues[cl]; q != nil {
		g.takeUnsentLocked(q, messageCost(pk.Payload))
	}
}

// OnPacketSent: a QoS 0 message written to cl's connection is no longer
// held.
func (g *brokerGuard) OnPacketSent(cl *mqtt.Client, pk packets.Packet, _ []byte) {
	if pk.FixedHeader.Type != packets.Publish || pk.FixedHeader.Qos != 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if q := g.queues[cl]; q != nil {
		g.takeUnsentLocked(q, messageCost(pk.Payload))
	}
}

// queue is what the broker holds for one session, as Limits count
// it.
type queue struct {
	cl    *mqtt.Client // the client that holds the session
	agent bool         // the agent's own session
	host  string       // the address cl connected from
	// unsent counts the deliveries OnACLCheck let through that mochi
	// has not written yet (QoS 0 ones, but for a moment), and
	// unsentBytes their costs. A delivery's cost is an estimate
	// (deliveryCostLocked), taken back at its writing as its payload
	// says: when none is left unsent, unsentBytes starts again from 0.
	unsent      int
	unsentBytes int64
	// inflight are the costs of what mochi's inflight holds for the
	// session, by packet id, and inflightBytes their sum.
	inflight      map[uint16]inflight
	inflightBytes int64
	will          int64 // the cost of the session's will
	// offline: the session's client is gone (offline.go), since
	// then, until expiry ends the session; order is its messages in
	// flight, oldest first, while offline (some since taken out).
	offline bool
	since   time.Time
	expiry  *time.Timer
	order   []held
}

// inflight is what mochi holds in flight for a session under a packet
// id: its cost, and its place in the order they came to the session.
type inflight struct {
	cost int64
	seq  uint64
}

// held is a place in a queue's order: a packet id and the seq it had
// when it came there.
type held struct {
	id  uint16
	seq uint64
}

func (q *queue) messages() int { return q.unsent + len(q.inflight) }
func (q *queue) bytes() int64  { return q.unsentBytes + q.inflightBytes + q.will }

// queueLocked returns the queue of cl's session, a new one at cl's first
// event. A client that took over another's session has its messages in
// flight (mochi copied them, and the other's late acknowledgements may
// have taken some from the other's copy only), its will, but not what
// was not yet written (the other's channel of writes).
func (g *brokerGuard) queueLocked(cl *mqtt.Client) *queue {
	if q := g.queues[cl]; q != nil {
		return q
	}
	q := &queue{cl: cl, agent: isAgent(cl), host: hostOf(cl.Net.Remote), inflight: make(map[uint16]inflight)}
	if cl.IsTakenOver() {
		return q // the session is another's now: what cl still does is not counted
	}
	if prev := g.session[cl.ID]; prev != nil && prev != cl {
		if old := g.queues[prev]; old != nil && prev.IsTakenOver() {
			q.will = old.will
			g.addLocked(q, q.will)
		}
		g.dropQueueLocked(prev)
	}
	for _, pk := range cl.State.Inflight.GetAll(false) {
		cost := int64(messageOverhead)
		if pk.FixedHeader.Type == packets.Publish {
			cost = messageCost(pk.Payload)
		}
		g.setInflightLocked(q, pk.PacketID, cost)
	}
	g.queues[cl] = q
	g.session[cl.ID] = cl
	return q
}

// addressBytes is what the sessions of one address hold: queued bytes,
// offline of them in offline sessions.
type addressBytes struct{ queued, offline int64 }

// addLocked counts bytes more (or fewer) held for q's session.
func (g *brokerGuard) addLocked(q *queue, bytes int64) {
	if q.offline {
		g.offlineQueued += bytes
	}
	if q.agent || bytes == 0 {
		return
	}
	g.queued += bytes
	a := g.byAddress[q.host]
	if a == nil {
		a = &addressBytes{}
		g.byAddress[q.host] = a
	}
	a.queued += bytes
	if q.offline {
		a.offline += bytes
	}
	if a.queued == 0 {
		delete(g.byAddress, q.host)
	}
}

// addressLocked returns what the sessions of address host hold.
func (g *brokerGuard) addressLocked(host string) addressBytes {
	if a := g.byAddress[host]; a != nil {
		return *a
	}
	return addressBytes{}
}

// setInflightLocked sets what mochi holds in flight for q under packet
// id id: a message of that cost, or nothing (0).
func (g *brokerGuard) setInflightLocked(q *queue, id uint16, cost int64) {
	old, ok := q.inflight[id]
	switch {
	case cost == 0:
		delete(q.inflight, id)
	case ok:
		q.inflight[id] = inflight{cost: cost, seq: old.seq}
	default:
		g.seq++
		q.inflight[id] = inflight{cost: cost, seq: g.seq}
	}
	q.inflightBytes += cost - old.cost
	g.addLocked(q, cost-old.cost)
}

// takeUnsentLocked notes that a delivery of cost to q's session was
// written, dropped or moved in flight.
func (g *brokerGuard) takeUnsentLocked(q *queue, cost int64) {
	if q.unsent--; q.unsent <= 0 {
		cost = q.unsentBytes
		q.unsent = 0
	}
	cost = min(cost, q.unsentBytes)
	q.unsentBytes -= cost
	g.addLocked(q, -cost)
}

func (g *brokerGuard) dropQueueLocked(cl *mqtt.Client) {
	if q := g.queues[cl]; q != nil {
		g.addLocked(q, -q.bytes())
		if q.offline {
			if q.expiry != nil {
				q.expiry.Stop()
			}
			delete(g.offline, q)
		}
		delete(g.queues, cl)
	}
}
