package broker

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/cairn-edge/cairn/internal/testing/mqttraw"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// defaultLimits are the limits of config's defaults (docs/security.md),
// but for a short expiry.
var defaultLimits = Limits{
	MaxClients: 100, MaxConnectionRate: 10_000, MaxTopicLevels: 32, MaxTopicLength: 1024,
	MaxFiltersPerSubscribe: 64, MaxSubscriptions: 100, MaxSubscriptionsTotal: 500,
	MaxQueuedMessages: 1000, MaxQueuedBytes: 4 << 20, MaxQueuedBytesTotal: 16 << 20,
	MaxQueuedBytesPerAddress: 8 << 20, MaxRetainedBytes: 4 << 20, AgentQueuedBytes: 32 << 20,
	MaxSessionsPerAddress: 20, OfflineSessionExpiry: time.Hour,
}

// TestOfflineSessionsTakeNoRoom: four clients connect with clean=false,
// subscribe to #, and go; 2,000 QoS 1 messages of 10 KB later (which
// took the whole of max_queued_bytes_total, so that a connected reader
// got 1,049 and every new filter 0x80), the reader has every message, a
// new filter is granted, the offline sessions hold their newest messages
// within half the total and count what they lost, and after their expiry
// they are gone, from mochi's index of topics too, and their bytes with
// them.
func TestOfflineSessionsTakeNoRoom(t *testing.T) {
	lim := defaultLimits
	lim.OfflineSessionExpiry = 8 * time.Second // from their going
	// Its clients are all of one address: the share of all is what it
	// tests (TestAddressShareLeavesOthersRoom, the address's).
	lim.MaxQueuedBytesPerAddress = 0
	b := limitedBroker(t, lim)
	addr := strings.TrimPrefix(b.URL(), "tcp://")
	offline := []string{"off-0", "off-1", "off-2", "off-3"}
	for _, id := range offline {
		c := rawConn(t, addr, mqttraw.Session{ID: id})
		if codes, err := c.SubscribeAck(1, 1, "#"); err != nil || !slices.Equal(codes, []byte{1}) {
			t.Fatalf("%s subscribing to #: %x %v", id, codes, err)
		}
		c.Close()
		awaitOffline(t, b, id)
	}
	reader := rawConn(t, addr, mqttraw.Session{ID: "reader", Clean: true})
	if codes, err := reader.SubscribeAck(1, 1, "plant/#"); err != nil || !slices.Equal(codes, []byte{1}) {
		t.Fatalf("the reader subscribing: %x %v", codes, err)
	}
	read := countReads(reader)
	const messages = 2000
	pub := rawConn(t, addr, mqttraw.Session{ID: "pub", Clean: true})
	publishNumbered(t, pub, "plant/line-1", messages)
	if !testwait.Poll(10*time.Second, func() bool { return read.Load() == messages }) {
		t.Fatalf("the connected reader got %d of %d messages", read.Load(), messages)
	}
	if codes, err := pub.SubscribeAck(2, 1, "late/#"); err != nil || !slices.Equal(codes, []byte{1}) {
		t.Fatalf("a new filter: SUBACK %x, %v; want 01", codes, err)
	}

	// The offline sessions hold within half the total, each its newest
	// messages, and count the others.
	drops := b.OfflineDrops()
	b.guard.mu.Lock()
	held := make(map[string]int, len(offline))
	for q := range b.guard.offline {
		held[q.cl.ID] = len(q.inflight)
	}
	offlineBytes := b.guard.offlineQueued
	b.guard.mu.Unlock()
	t.Logf("the offline sessions hold %v messages, %d bytes; dropped %v", held, offlineBytes, drops)
	if offlineBytes > lim.MaxQueuedBytesTotal/offlineShare {
		t.Errorf("the offline sessions hold %d bytes, over half of max_queued_bytes_total", offlineBytes)
	}
	for _, id := range offline {
		if held[id] == 0 || int64(held[id])+drops[id] != messages {
			t.Errorf("session %s holds %d messages and dropped %d, of %d", id, held[id], drops[id], messages)
		}
	}
	// The first, back, is sent what it held: the newest.
	back := rawConn(t, addr, mqttraw.Session{ID: offline[0]})
	var got []int
	for range held[offline[0]] {
		pk, err := back.ReadType(packets.Publish, false)
		if err != nil {
			t.Fatalf("%s back, after %d messages: %v", offline[0], len(got), err)
		}
		got = append(got, int(binary.BigEndian.Uint32(pk.Payload)))
		back.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: pk.PacketID})
	}
	slices.Sort(got)
	if got[0] != messages-len(got) || got[len(got)-1] != messages-1 {
		t.Errorf("%s back was sent messages %d..%d, want the newest %d..%d", offline[0], got[0], got[len(got)-1], messages-len(got), messages-1)
	}

	// The others expire, and what they held with them.
	gone := func() string {
		for _, id := range offline[1:] {
			if _, ok := b.srv.Clients.Get(id); ok {
				return id + " is still a session"
			}
			if _, ok := b.srv.Topics.Subscribers("plant/line-1").Subscriptions[id]; ok {
				return id + " is still subscribed in mochi's index of topics"
			}
		}
		b.guard.mu.Lock()
		defer b.guard.mu.Unlock()
		if b.guard.offlineQueued != 0 || len(b.guard.offline) != 0 {
			return fmt.Sprintf("%d offline sessions holding %d bytes are counted", len(b.guard.offline), b.guard.offlineQueued)
		}
		return ""
	}
	var why string
	if !testwait.Poll(lim.OfflineSessionExpiry+10*time.Second, func() bool { why = gone(); return why == "" }) {
		t.Fatalf("after offline_session_expiry: %s", why)
	}
	if drops := b.OfflineDrops(); len(drops) != 1 || drops[offline[0]] == 0 {
		t.Errorf("drops counted after the expiry: %v, want %s's only", drops, offline[0])
	}
	// Ended, counted as such, and no refusal.
	if ended := b.EndedSessions(); len(ended) != 1 || ended["after offline_session_expiry"] != int64(len(offline)-1) {
		t.Errorf("offline sessions ended: %v, want %d after offline_session_expiry", ended, len(offline)-1)
	}
	for what := range b.Refusals() {
		if strings.Contains(what, "ended") {
			t.Errorf("counted as a refusal: %q", what)
		}
	}
}

// countReads reads what c is sent until its connection ends,
// acknowledging each QoS 1 message, and counts those.
func countReads(c *mqttraw.Conn) *atomic.Int64 {
	var n atomic.Int64
	go func() {
		for {
			pk, err := c.ReadPacket()
			if err != nil {
				return
			}
			if pk.FixedHeader.Type == packets.Publish && pk.FixedHeader.Qos == 1 {
				n.Add(1)
				c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: pk.PacketID})
			}
		}
	}()
	return &n
}

// publishNumbered publishes messages QoS 1 messages of 10 KB to topic
// from c, numbered from 0 in their first 4 bytes, each acknowledged
// before the next.
func publishNumbered(t *testing.T, c *mqttraw.Conn, topic string, messages int) {
	t.Helper()
	payload := make([]byte, 10_000)
	for i := range messages {
		binary.BigEndian.PutUint32(payload, uint32(i))
		if err := c.Publish(uint16(i%65535+1), topic, payload, 1, false); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ReadType(packets.Puback, false); err != nil {
			t.Fatalf("message %d not acknowledged: %v", i, err)
		}
	}
}

// rawConn connects to addr as s, or fails t.
func rawConn(t *testing.T, addr string, s mqttraw.Session) *mqttraw.Conn {
	t.Helper()
	return rawConnFrom(t, addr, "", s)
}

// rawConnFrom connects to addr from local address host as s, or fails t.
func rawConnFrom(t *testing.T, addr, host string, s mqttraw.Session) *mqttraw.Conn {
	t.Helper()
	c, err := mqttraw.DialFrom(addr, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(time.Minute))
	if code, err := c.Connect(s); err != nil || code != 0 {
		t.Fatalf("connecting as %s: CONNACK %d, %v", s.ID, code, err)
	}
	return c
}

// TestOfflineSessionQoS0DropsNothing: a full offline session (its
// max_queued_messages of QoS 1 held) loses nothing it holds to a QoS 0
// message, nor to a QoS 1 message through a QoS 0 subscription, which
// mochi keeps nothing of for a client that is gone; its client, back, is
// sent every message it held.
func TestOfflineSessionQoS0DropsNothing(t *testing.T) {
	lim := defaultLimits
	lim.MaxQueuedMessages = 5
	b := limitedBroker(t, lim)
	addr := strings.TrimPrefix(b.URL(), "tcp://")
	c := rawConn(t, addr, mqttraw.Session{ID: "held"})
	if codes, err := c.SubscribeAck(1, 1, "plant/#"); err != nil || !slices.Equal(codes, []byte{1}) {
		t.Fatalf("subscribing at QoS 1: %x %v", codes, err)
	}
	if codes, err := c.SubscribeAck(2, 0, "zero/#"); err != nil || !slices.Equal(codes, []byte{0}) {
		t.Fatalf("subscribing at QoS 0: %x %v", codes, err)
	}
	c.Close()
	awaitOffline(t, b, "held")
	pub := rawConn(t, addr, mqttraw.Session{ID: "pub", Clean: true})
	for i := range lim.MaxQueuedMessages {
		if err := pub.Publish(uint16(i+1), "plant/a", []byte{byte(i)}, 1, false); err != nil {
			t.Fatal(err)
		}
	}
	// mochi serves a connection's packets in order: its PINGRESP comes
	// once it delivered what came before.
	if err := pub.Ping(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	held := func() []uint16 {
		cl, _ := b.srv.Clients.Get("held")
		var ids []uint16
		for _, pk := range cl.State.Inflight.GetAll(false) {
			ids = append(ids, pk.PacketID)
		}
		slices.Sort(ids)
		return ids
	}
	full := held()
	if len(full) != lim.MaxQueuedMessages {
		t.Fatalf("the offline session holds %v, want %d messages", full, lim.MaxQueuedMessages)
	}
	for i := range 3 {
		if err := pub.Publish(0, "plant/a", []byte("qos 0"), 0, false); err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish(uint16(100+i), "zero/a", []byte("through qos 0"), 1, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Ping(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if now := held(); !slices.Equal(now, full) {
		t.Errorf("after QoS 0 deliveries the offline session holds %v, before %v", now, full)
	}
	if drops := b.OfflineDrops(); drops["held"] != 0 {
		t.Errorf("%d of the offline session's messages dropped for QoS 0 deliveries", drops["held"])
	}
	back := rawConn(t, addr, mqttraw.Session{ID: "held"})
	back.SetDeadline(time.Now().Add(10 * time.Second))
	var got []byte
	for range lim.MaxQueuedMessages {
		pk, err := back.ReadType(packets.Publish, false)
		if err != nil {
			t.Fatalf("back, after %d messages: %v", len(got), err)
		}
		got = append(got, pk.Payload...)
		back.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: pk.PacketID})
	}
	slices.Sort(got)
	if !slices.Equal(got, []byte{0, 1, 2, 3, 4}) {
		t.Errorf("back, the client was sent %v, want the 5 it held", got)
	}
}

// awaitOffline waits until b holds the session of client id offline.
func awaitOffline(t *testing.T, b *Server, id string) {
	t.Helper()
	testwait.For(t, 10*time.Second, id+" offline", func() bool {
		cl, ok := b.srv.Clients.Get(id)
		b.guard.mu.Lock()
		defer b.guard.mu.Unlock()
		return ok && cl.Closed() && b.guard.queues[cl] != nil && b.guard.queues[cl].offline
	})
}

// TestOfflineShareDropsFromWhoHoldsMessages: an offline session that
// holds the most only in QoS 2 messages of its own it never released
// (acknowledgements mochi keeps, no message to drop) does not stop the
// offline sessions from being trimmed to their share: the next holding
// most, which holds messages, drops its oldest.
func TestOfflineShareDropsFromWhoHoldsMessages(t *testing.T) {
	lim := defaultLimits
	lim.MaxQueuedBytesTotal = 256 << 10 // the offline sessions' share: 128 KiB
	b := limitedBroker(t, lim)
	addr := strings.TrimPrefix(b.URL(), "tcp://")
	// hoard: 100 QoS 2 messages unreleased, 100 KiB as the limits count.
	const unreleased = 100
	hoard := rawConn(t, addr, mqttraw.Session{ID: "hoard"})
	for i := range unreleased {
		if err := hoard.Publish(uint16(i+1), "hoard/x", []byte("x"), 2, false); err != nil {
			t.Fatal(err)
		}
		if _, err := hoard.ReadType(packets.Pubrec, false); err != nil {
			t.Fatalf("QoS 2 message %d: %v", i, err)
		}
	}
	hoard.Close()
	awaitOffline(t, b, "hoard")
	sub := rawConn(t, addr, mqttraw.Session{ID: "sub"})
	if codes, err := sub.SubscribeAck(1, 1, "plant/#"); err != nil || !slices.Equal(codes, []byte{1}) {
		t.Fatalf("subscribing: %x %v", codes, err)
	}
	sub.Close()
	awaitOffline(t, b, "sub")
	pub := rawConn(t, addr, mqttraw.Session{ID: "pub", Clean: true})
	for i := range 60 { // 2,024 bytes each as the limits count
		if err := pub.Publish(uint16(i+1), "plant/a", make([]byte, 1000), 1, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Ping(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	b.guard.mu.Lock()
	offline := b.guard.offlineQueued
	b.guard.mu.Unlock()
	hoarder, _ := b.srv.Clients.Get("hoard")
	drops := b.OfflineDrops()
	t.Logf("the offline sessions hold %d bytes; dropped %v", offline, drops)
	if offline > lim.MaxQueuedBytesTotal/offlineShare {
		t.Errorf("the offline sessions hold %d bytes, over their share, %d", offline, lim.MaxQueuedBytesTotal/offlineShare)
	}
	if drops["sub"] == 0 || drops["hoard"] != 0 || hoarder.State.Inflight.Len() != unreleased {
		t.Errorf("dropped %v, hoard holds %d; want sub's oldest dropped, hoard's %d kept", drops, hoarder.State.Inflight.Len(), unreleased)
	}
}

// TestRefusedLoginEndsNoSession: at max_sessions_per_address, with an
// offline session holding a message, CONNECTs under new client ids that
// are refused their login (a wrong password, none, the agent's client
// ids) end no session: the offline one keeps its message, which its
// client, back, is sent.
func TestRefusedLoginEndsNoSession(t *testing.T) {
	lim := defaultLimits
	lim.MaxSessionsPerAddress = 2
	b, err := Start(Config{Addr: "127.0.0.1:0", Users: map[string]string{"dev": "pw"}, OwnClientIDs: "cairn-", Limits: lim},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	addr := strings.TrimPrefix(b.URL(), "tcp://")
	c := rawConn(t, addr, mqttraw.Session{ID: "dev-1", User: "dev", Password: "pw"})
	if codes, err := c.SubscribeAck(1, 1, "plant/#"); err != nil || !slices.Equal(codes, []byte{1}) {
		t.Fatalf("subscribing: %x %v", codes, err)
	}
	c.Close()
	awaitOffline(t, b, "dev-1")
	pub := rawConn(t, addr, mqttraw.Session{ID: "dev-2", User: "dev", Password: "pw", Clean: true})
	if err := pub.Publish(1, "plant/a", []byte("held"), 1, false); err != nil {
		t.Fatal(err)
	}
	if err := pub.Ping(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, s := range []mqttraw.Session{
		{ID: "guess", User: "dev", Password: "wrong", Clean: true},
		{ID: "anon", Clean: true},
		{ID: "cairn-1", User: "dev", Password: "pw", Clean: true},
	} {
		if code, err := dialRaw(t, addr).Connect(s); err != nil || code != packets.Err3NotAuthorized.Code {
			t.Fatalf("client %s as %q: CONNACK %d, %v; want %d", s.ID, s.User, code, err, packets.Err3NotAuthorized.Code)
		}
	}
	if n := b.Refusals()["embedded broker refused a client: failed login"]; n != 3 {
		t.Errorf("%d failed logins counted, want 3 (%v)", n, b.Refusals())
	}
	cl, ok := b.srv.Clients.Get("dev-1")
	if !ok || cl.State.Inflight.Len() != 1 {
		t.Fatalf("the offline session: kept %v, holding %v; want kept, holding its message", ok, cl != nil && cl.State.Inflight.Len() == 1)
	}
	pub.Close()
	back := rawConn(t, addr, mqttraw.Session{ID: "dev-1", User: "dev", Password: "pw"})
	back.SetDeadline(time.Now().Add(10 * time.Second))
	if pk, err := back.ReadType(packets.Publish, false); err != nil || string(pk.Payload) != "held" {
		t.Fatalf("back, the client was sent %q, %v; want its message", pk.Payload, err)
	}
}
