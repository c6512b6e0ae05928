package broker

import (
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/cairn-edge/cairn/internal/testing/mqttraw"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

var brokerSeeds = flag.Int("broker.seeds", 5, "TestBrokerBoundsHold: how many generated runs")

// smallLimits are limits a test reaches in a few hundred packets.
var smallLimits = Limits{
	MaxClients: 8, MaxConnectionRate: 10_000,
	MaxTopicLevels: 6, MaxTopicLength: 64, MaxFiltersPerSubscribe: 5,
	MaxSubscriptions: 12, MaxSubscriptionsTotal: 30,
	MaxQueuedMessages: 20, MaxQueuedBytes: 96 << 10, MaxQueuedBytesTotal: 256 << 10,
	MaxQueuedBytesPerAddress: 192 << 10, // all the clients' (127.0.0.1)
	MaxRetainedBytes:         64 << 10, AgentQueuedBytes: 4 << 20,
	MaxSessionsPerAddress: 6, OfflineSessionExpiry: 300 * time.Millisecond,
}

// TestBrokerBoundsHold drives an embedded broker of small limits with
// generated clients — connecting under a few ids, persistent or not, with
// wills; subscribing to filters of every shape (too deep, too long, too
// many, wildcards, $SYS, shared), reading what comes or never; publishing
// messages of every shape and size at every QoS, retained or not,
// releasing their QoS 2 messages or hoarding them — and checks after every
// step, against mochi's own state, that no bound is passed, and that the
// broker still answers.
func TestBrokerBoundsHold(t *testing.T) {
	refused, ended := make(map[string]int64), make(map[string]int64)
	ran := 0
	for seed := range uint64(*brokerSeeds) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			ran++
			b := limitedBroker(t, smallLimits)
			r := rand.New(rand.NewPCG(seed, 31))
			drive(t, b, smallLimits, func(n int) int { return r.IntN(n) }, 300)
			for what, n := range b.refer.counted() {
				refused[what] += n
			}
			for why, n := range b.EndedSessions() {
				ended[why] += n
			}
		})
	}
	t.Logf("refused: %v; offline sessions ended: %v", refused, ended)
	if ran < 5 {
		return // too few to reach every limit
	}
	// The runs reach every limit they can. (Not an offline session's
	// drops nor its expiry: whether messages are still in flight when a
	// generated client goes, and whether it stays gone for 300 ms, depend
	// on timing; TestOfflineSessionsTakeNoRoom reaches both.)
	for _, want := range []string{"topic filter: over max_topic_levels", "topic filter: over max_topic_length",
		"topic filter: over max_filters_per_subscribe", "topic filter: over max_subscriptions", "topic filter: over max_subscriptions_total",
		"dropped a message: topic over max_topic_levels", "dropped a message: topic over max_topic_length",
		"dropped messages to a session: over max_queued_messages", "dropped messages to a session: over max_queued_bytes",
		"did not retain a message: over max_retained_bytes", "CONNECT: will topic over"} {
		found := false
		for what := range refused {
			found = found || strings.Contains(what, want)
		}
		if !found {
			t.Errorf("no run refused %q", want)
		}
	}
	if ended["for a new session over max_sessions_per_address"] == 0 {
		t.Errorf("no run ended an offline session for a new one over max_sessions_per_address")
	}
}

func limitedBroker(t testing.TB, lim Limits) *Server {
	// A client that reads nothing stalls the broker's writes to it for
	// writeStall, and with them the publishers of its topics: shorter,
	// the runs go faster.
	times := listenTimes{connect: connectTimeout, largePacket: largePacketTime, writeStall: 200 * time.Millisecond}
	b, err := Start(Config{Addr: "127.0.0.1:0", AllowAnonymous: true, Limits: lim, times: times}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// genClient is a client drive plays.
type genClient struct {
	id     string
	conn   *mqttraw.Conn
	broker *mqtt.Client // the broker's client of conn
	reads  bool         // reads and acknowledges what comes; else reads nothing
	nextID uint16
	done   chan struct{}
}

// drive plays steps steps of generated clients against b, choosing with
// pick (a number below its argument), and checks the bounds after each.
func drive(t *testing.T, b *Server, lim Limits, pick func(int) int, steps int) {
	addr := strings.TrimPrefix(b.URL(), "tcp://")
	clients := make([]*genClient, 6)
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.close()
			}
		}
	}()
	for step := range steps {
		i := pick(len(clients))
		c := clients[i]
		if c == nil || pick(10) == 0 {
			if c != nil {
				c.close()
				awaitGone(t, b, c)
			}
			clients[i] = connectGen(t, b, lim, pick)
			continue
		}
		switch pick(3) {
		case 0:
			subscribeGen(t, c, lim, pick)
		default:
			publishGen(t, c, lim, pick)
		}
		checkBounds(t, b, lim, fmt.Sprintf("step %d", step))
	}
	for _, c := range clients {
		if c != nil {
			c.close()
		}
	}
	clear(clients)
	checkBounds(t, b, lim, "the end")
	checkCounts(t, b)
	if err := ping(addr); err != nil {
		t.Fatalf("the broker no longer answers: %v", err)
	}
}

// awaitGone waits until b has processed the end of c's connection. (A
// client that connects under an id whose last connection mochi 2.7.9 is
// still ending may lose its session: attachClient ends the old one after
// checking that it was not taken over, and so may remove the new one from
// its clients.)
func awaitGone(t *testing.T, b *Server, c *genClient) {
	t.Helper()
	if c.broker == nil {
		return // not a client of the broker's even as it connected (mochi's race above)
	}
	var state string
	if !testwait.Poll(10*time.Second, func() bool {
		cl := c.broker
		now, _ := b.srv.Clients.Get(c.id)
		state = fmt.Sprintf("closed %v, clean %v, a client of the broker %v", cl.Closed(), cl.Properties.Clean, now == cl)
		return cl.Closed() && (!cl.Properties.Clean || now != cl)
	}) {
		t.Fatalf("the broker did not end client %s's connection within 10 s: %s", c.id, state)
	}
}

// ping connects a client of its own to addr and pings, unless the broker
// refuses it a session (all taken: CONNACK 3), an answer too.
func ping(addr string) error {
	c, err := mqttraw.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	code, err := c.Connect(mqttraw.Session{ID: "pinger", Clean: true})
	switch {
	case err != nil || code != 0 && code != 3:
		return fmt.Errorf("CONNACK %d, %v", code, err)
	case code == 3:
		return nil
	}
	return c.Ping(10 * time.Second)
}

func connectGen(t *testing.T, b *Server, lim Limits, pick func(int) int) *genClient {
	c := &genClient{id: fmt.Sprint("gen-", pick(12)), reads: pick(3) != 0, done: make(chan struct{})}
	conn, err := mqttraw.Dial(strings.TrimPrefix(b.URL(), "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	s := mqttraw.Session{ID: c.id, Clean: pick(2) == 0}
	if pick(4) == 0 {
		s.WillTopic, s.WillPayload, s.WillRetain = genTopic(lim, pick, false), make([]byte, genSize(pick)), pick(2) == 0
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	code, err := conn.Connect(s)
	conn.SetDeadline(time.Time{})
	if err != nil || code != 0 {
		conn.Close()
		return nil // refused: its will, or a session over max_clients
	}
	c.conn = conn
	// The CONNACK is sent once the client is the broker's under its id.
	c.broker, _ = b.srv.Clients.Get(c.id)
	go c.read()
	return c
}

// read reads what the broker sends; a client that reads acknowledges it
// and releases its QoS 2 messages, one that does not stops reading at
// once.
func (c *genClient) read() {
	defer close(c.done)
	if !c.reads {
		return
	}
	for {
		pk, err := c.conn.ReadPacket()
		if err != nil {
			return
		}
		var ack packets.Packet
		switch {
		case pk.FixedHeader.Type == packets.Publish && pk.FixedHeader.Qos == 1:
			ack = packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: pk.PacketID}
		case pk.FixedHeader.Type == packets.Publish && pk.FixedHeader.Qos == 2:
			ack = packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubrec}, PacketID: pk.PacketID}
		case pk.FixedHeader.Type == packets.Pubrec:
			ack = packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubrel, Qos: 1}, PacketID: pk.PacketID}
		case pk.FixedHeader.Type == packets.Pubrel:
			ack = packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubcomp}, PacketID: pk.PacketID}
		default:
			continue
		}
		if c.conn.Send(ack) != nil {
			return
		}
	}
}

func (c *genClient) close() {
	c.conn.Close()
	<-c.done
}

func (c *genClient) packetID() uint16 {
	c.nextID = c.nextID%65535 + 1
	return c.nextID
}

// genTopic makes a topic (a filter if filter) of a shape an attacker
// might send: near or far over the limits, with wildcards, empty levels,
// $SYS, shared.
func genTopic(lim Limits, pick func(int) int, filter bool) string {
	words := []string{"a", "b", "c", "d", "", "+", "#", "ü"}
	levels := 1 + pick(lim.MaxTopicLevels+2)
	switch pick(16) {
	case 0:
		return strings.Repeat("/", pick(65535))
	case 1:
		return strings.Repeat("x", lim.MaxTopicLength-2+pick(5))
	case 2:
		levels = 1 + pick(400)
	case 3:
		if filter {
			return "$share/g/" + genTopic(lim, pick, true)
		}
	case 4:
		return "$SYS/#"
	case 5:
		if pick(20) == 0 {
			return "a/\x00" // malformed: the broker ends the connection
		}
	}
	parts := make([]string, levels)
	for i := range parts {
		parts[i] = words[pick(len(words))]
		if !filter && (parts[i] == "+" || parts[i] == "#") {
			parts[i] = "w"
		}
	}
	return strings.Join(parts, "/")
}

func genSize(pick func(int) int) int {
	switch pick(4) {
	case 0:
		return 0
	case 1:
		return 50_000 + pick(150_000)
	}
	return pick(5000)
}

func subscribeGen(t *testing.T, c *genClient, lim Limits, pick func(int) int) {
	n := 1 + pick(3*lim.MaxFiltersPerSubscribe)
	filters := make([]string, n)
	for i := range filters {
		filters[i] = genTopic(lim, pick, true)
	}
	c.conn.Subscribe(c.packetID(), byte(pick(3)), filters...)
}

func publishGen(t *testing.T, c *genClient, lim Limits, pick func(int) int) {
	qos := byte(pick(3))
	var id uint16
	if qos > 0 {
		id = c.packetID()
	}
	c.conn.Publish(id, genTopic(lim, pick, false), make([]byte, genSize(pick)), qos, pick(4) == 0)
}

// checkBounds fails t if b holds more than lim lets it, by mochi's own
// state: sessions, subscriptions, messages in flight, retained messages.
// (What it does not export, messages not yet written and wills, the
// limits count as they count messages in flight, which checkCounts
// checks.)
func checkBounds(t *testing.T, b *Server, lim Limits, when string) {
	t.Helper()
	var problems []string
	sessions, subscriptions := 0, 0
	for id, cl := range b.srv.Clients.GetAll() {
		if isAgent(cl) {
			continue
		}
		sessions++
		subs := cl.State.Subscriptions.GetAll()
		subscriptions += len(subs)
		if len(subs) > lim.MaxSubscriptions {
			problems = append(problems, fmt.Sprintf("client %s has %d subscriptions", id, len(subs)))
		}
		for f := range subs {
			if len(f) > lim.MaxTopicLength || strings.Count(f, "/")+1 > lim.MaxTopicLevels {
				problems = append(problems, fmt.Sprintf("client %s subscribed to a filter of %d bytes, %d levels", id, len(f), strings.Count(f, "/")+1))
			}
		}
		inflight, held := inflightOf(cl)
		over := func() bool { return len(inflight) > lim.MaxQueuedMessages || held > lim.MaxQueuedBytes }
		// An offline session is over by the message mochi holds for it
		// until OnQosPublish trims it (trimLocked), for a moment.
		if over() && cl.Closed() {
			testwait.Poll(time.Second, func() bool { inflight, held = inflightOf(cl); return !over() })
		}
		if over() {
			problems = append(problems, fmt.Sprintf("client %s: %d messages in flight, %d bytes", id, len(inflight), held))
		}
	}
	// The sums, the same way: a session whose connection closed is
	// trimmed to the offline share once mochi tells the broker it is gone
	// (OnDisconnect), and by a message mochi holds until OnQosPublish.
	share := min(lim.MaxQueuedBytesTotal, lim.MaxQueuedBytesPerAddress)
	offline, all := heldOf(b)
	if over := func() bool { return offline > share/offlineShare || all > share }; over() {
		testwait.Poll(time.Second, func() bool { offline, all = heldOf(b); return !over() })
	}
	if offline > share/offlineShare {
		problems = append(problems, fmt.Sprintf("the offline sessions hold %d bytes in flight", offline))
	}
	if all > share {
		problems = append(problems, fmt.Sprintf("the sessions of 127.0.0.1 hold %d bytes in flight", all))
	}
	if sessions > lim.MaxClients {
		problems = append(problems, fmt.Sprintf("%d sessions", sessions))
	}
	// Clients are read one by one while mochi works: the sum of their
	// subscriptions holds once it settled.
	if subscriptions > lim.MaxSubscriptionsTotal && !testwait.Poll(time.Second, func() bool { return subscriptionsOf(b) <= lim.MaxSubscriptionsTotal }) {
		problems = append(problems, fmt.Sprintf("%d subscriptions", subscriptionsOf(b)))
	}
	var retained int64
	for topic, pk := range b.srv.Topics.Retained.GetAll() {
		if strings.HasPrefix(topic, mqtt.SysPrefix) {
			continue
		}
		retained += retainedCost(topic, pk.Payload)
	}
	if retained > lim.MaxRetainedBytes {
		problems = append(problems, fmt.Sprintf("%d bytes retained", retained))
	}
	if len(problems) > 0 {
		t.Fatalf("%s: %s", when, strings.Join(problems, "; "))
	}
}

// heldOf returns the bytes mochi holds in flight for the sessions of
// clients other than the agent's whose connection closed, and for all of
// them.
func heldOf(b *Server) (offline, all int64) {
	for _, cl := range b.srv.Clients.GetAll() {
		if isAgent(cl) {
			continue
		}
		_, held := inflightOf(cl)
		if cl.Closed() {
			offline += held
		}
		all += held
	}
	return offline, all
}

func subscriptionsOf(b *Server) int {
	n := 0
	for _, cl := range b.srv.Clients.GetAll() {
		if !isAgent(cl) {
			n += cl.State.Subscriptions.Len()
		}
	}
	return n
}

// inflightOf returns the costs of what mochi holds in flight for cl, by
// packet id, and their sum: but for the acknowledgement of a QoS 1
// message of cl's, which mochi keeps only if writing it failed, and then
// until the session resumes, and the limits do not count.
func inflightOf(cl *mqtt.Client) (map[uint16]int64, int64) {
	costs := make(map[uint16]int64)
	var sum int64
	for _, pk := range cl.State.Inflight.GetAll(false) {
		if pk.FixedHeader.Type == packets.Puback {
			continue
		}
		costs[pk.PacketID] = messageCost(pk.Payload)
		sum += costs[pk.PacketID]
	}
	return costs, sum
}

// checkCounts fails t unless, once b has processed what it was sent, the
// limits count for each session what mochi holds in flight for it, and
// no fewer subscriptions than there are.
func checkCounts(t *testing.T, b *Server) {
	t.Helper()
	var diff string
	ok := testwait.Poll(10*time.Second, func() bool {
		diff = ""
		b.guard.mu.Lock()
		defer b.guard.mu.Unlock()
		subscriptions := 0
		for id, cl := range b.srv.Clients.GetAll() {
			if isAgent(cl) {
				continue
			}
			subscriptions += cl.State.Subscriptions.Len()
			inflight, _ := inflightOf(cl)
			counted := make(map[uint16]int64)
			if q := b.guard.queues[cl]; q != nil {
				for id, e := range q.inflight {
					counted[id] = e.cost
				}
			}
			// The same packets, each counted at no less than it costs (a
			// message acknowledged in part is counted whole).
			same := len(inflight) == len(counted)
			for id, cost := range inflight {
				same = same && counted[id] >= cost
			}
			if !same {
				diff += fmt.Sprintf("client %s: mochi holds %v in flight, the limits count %v; ", id, inflight, counted)
			}
		}
		// A SUBSCRIBE that mochi processes while another client takes its
		// session over is counted and lands with the old client only.
		if subscriptions > b.guard.subsTotal {
			diff += fmt.Sprintf("%d subscriptions, %d counted", subscriptions, b.guard.subsTotal)
		}
		return diff == ""
	})
	if !ok {
		t.Fatal(diff)
	}
}
