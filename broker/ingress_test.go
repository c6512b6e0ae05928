package broker

import (
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/cairn-edge/cairn/internal/testing/mqttraw"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
	"github.com/cairn-edge/cairn/mqttio"
)

// startIngress starts a broker whose source "src" reads reads, and
// returns it with a function that connects a raw client.
func startIngress(t *testing.T, reads ...string) (*Server, func(id string) *mqttraw.Conn) {
	t.Helper()
	return startLimitedIngress(t, Limits{}, reads...)
}

// startLimitedIngress is startIngress with limits lim.
func startLimitedIngress(t *testing.T, lim Limits, reads ...string) (*Server, func(id string) *mqttraw.Conn) {
	t.Helper()
	b, err := Start(Config{Addr: "127.0.0.1:0", AllowAnonymous: true, Reads: map[string][]string{"src": reads}, Limits: lim}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	addr := strings.TrimPrefix(b.URL(), "tcp://")
	return b, func(id string) *mqttraw.Conn {
		t.Helper()
		c, err := mqttraw.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if code, err := c.Connect(mqttraw.Session{ID: id, Clean: true}); err != nil || code != 0 {
			t.Fatalf("%s: CONNACK %d, %v", id, code, err)
		}
		return c
	}
}

// acksSoFar sends c a PINGREQ and returns the packet ids of the PUBACKs
// the broker sent before its PINGRESP: the broker serves a connection's
// packets in order, so a PUBLISH it acknowledged at once is acknowledged
// by then.
func acksSoFar(t *testing.T, c *mqttraw.Conn) []uint16 {
	t.Helper()
	if err := c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pingreq}}); err != nil {
		t.Fatal(err)
	}
	var ids []uint16
	for {
		pk, err := c.ReadPacket()
		if err != nil {
			t.Fatalf("waiting for PINGRESP: %v", err)
		}
		switch pk.FixedHeader.Type {
		case packets.Pingresp:
			return ids
		case packets.Puback:
			ids = append(ids, pk.PacketID)
		}
	}
}

// readAcks reads c's next n PUBACKs and returns their packet ids, in
// the order they came.
func readAcks(t *testing.T, c *mqttraw.Conn, n int) []uint16 {
	t.Helper()
	var ids []uint16
	for len(ids) < n {
		pk, err := c.ReadType(packets.Puback, false)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, pk.PacketID)
	}
	return ids
}

// taker is a source's subtask as the broker sees it: what it is handed
// goes to a channel; it acknowledges nothing by itself.
func taker() (chan mqttio.Handoff, func(mqttio.Handoff) bool) {
	got := make(chan mqttio.Handoff, 100)
	return got, func(h mqttio.Handoff) bool { got <- h; return true }
}

// TestIngressAcknowledgesOnceDurable: a QoS 1 publish on a topic a source
// reads is handed to the source with its publisher and packet id, and is
// acknowledged to its client, and delivered to subscribers, only once the
// source acknowledged it; a client's PUBACKs keep the order of its
// publishes, whatever order the source acknowledges them in, a publish
// on a topic no source reads included, which waits for those before it.
// Another client's publish on such a topic is acknowledged at once.
func TestIngressAcknowledgesOnceDurable(t *testing.T) {
	b, connect := startIngress(t, "dev/#")
	got, take := taker()
	detach := b.Attach("src", []string{"dev/#"}, nil, take)
	defer detach()
	watch := connect("watch")
	if _, err := watch.SubscribeAck(1, 1, "#"); err != nil {
		t.Fatal(err)
	}
	dev := connect("device")
	for id := uint16(1); id <= 3; id++ {
		if err := dev.Publish(id, fmt.Sprint("dev/", id), []byte{byte(id)}, 1, false); err != nil {
			t.Fatal(err)
		}
	}
	var handed []mqttio.Handoff
	for range 3 {
		h := testwait.Recv(t, got, 10*time.Second, "a publish handed to the source")
		if h.Publisher != "device" || h.QoS != 1 || h.Duplicate || h.Topic != fmt.Sprint("dev/", h.PacketID) || h.Ack == nil {
			t.Fatalf("handed %+v", h)
		}
		handed = append(handed, h)
	}
	if acks := acksSoFar(t, dev); len(acks) != 0 {
		t.Fatalf("PUBACKs %v before the source acknowledged anything", acks)
	}
	handed[2].Ack()
	handed[1].Ack()
	if acks := acksSoFar(t, dev); len(acks) != 0 {
		t.Fatalf("PUBACKs %v before the first publish was acknowledged", acks)
	}
	if err := dev.Publish(9, "other/topic", nil, 1, false); err != nil {
		t.Fatal(err)
	}
	if acks := acksSoFar(t, dev); len(acks) != 0 {
		t.Fatalf("a publish no source reads, after three held: PUBACKs %v before those three's", acks)
	}
	other := connect("other")
	if err := other.Publish(9, "other/topic", nil, 1, false); err != nil {
		t.Fatal(err)
	}
	if acks := acksSoFar(t, other); !slices.Equal(acks, []uint16{9}) {
		t.Fatalf("another client's publish no source reads: PUBACKs %v, want 9 at once", acks)
	}
	handed[0].Ack()
	handed[0].Ack() // twice: no harm
	acks := readAcks(t, dev, 4)
	if !slices.Equal(acks, []uint16{1, 2, 3, 9}) {
		t.Fatalf("PUBACKs in the order %v, want 1 2 3 9", acks)
	}
	var topics []string
	for len(topics) < 5 {
		pk, err := watch.ReadType(packets.Publish, true)
		if err != nil {
			t.Fatal(err)
		}
		topics = append(topics, pk.TopicName)
	}
	if !slices.Equal(topics, []string{"other/topic", "dev/1", "dev/2", "dev/3", "other/topic"}) {
		t.Fatalf("the subscriber was sent %v", topics)
	}
}

// TestIngressRefusedTopicKeepsOrder: a publish on a topic a source reads
// that the limits refuse (too deep) is handed to no source, and dropped
// and acknowledged as the limits say, but after the client's publishes
// held before it: its PUBACKs keep the order of its publishes.
func TestIngressRefusedTopicKeepsOrder(t *testing.T) {
	b, connect := startLimitedIngress(t, Limits{MaxTopicLevels: 4}, "dev/#")
	got, take := taker()
	detach := b.Attach("src", []string{"dev/#"}, nil, take)
	defer detach()
	dev := connect("device")
	if err := dev.Publish(1, "dev/1", []byte{1}, 1, false); err != nil {
		t.Fatal(err)
	}
	h := testwait.Recv(t, got, 10*time.Second, "a publish handed to the source")
	if err := dev.Publish(2, "dev/a/b/c/d", []byte{2}, 1, false); err != nil {
		t.Fatal(err)
	}
	if acks := acksSoFar(t, dev); len(acks) != 0 {
		t.Fatalf("PUBACKs %v before the held publish was acknowledged", acks)
	}
	h.Ack()
	acks := readAcks(t, dev, 2)
	if !slices.Equal(acks, []uint16{1, 2}) {
		t.Fatalf("PUBACKs in the order %v, want 1 2", acks)
	}
	if len(got) != 0 {
		t.Fatalf("the source was handed the refused publish: %+v", <-got)
	}
	if b.Refusals()["embedded broker dropped a message: topic over max_topic_levels"] != 1 {
		t.Fatalf("refusals %v, want the deep topic's", b.Refusals())
	}
}

// TestIngressHandsOnWhatAStoppedSubtaskOwed: a publish that comes while no
// subtask of its source is attached waits for one; one handed to a subtask
// that detaches, or stops before it takes it, without acknowledging it is
// handed to the next, as a duplicate; a subtask takes only the topics it
// picks.
func TestIngressHandsOnWhatAStoppedSubtaskOwed(t *testing.T) {
	b, connect := startIngress(t, "dev/#")
	dev := connect("device")
	if err := dev.Publish(1, "dev/a", []byte("x"), 1, false); err != nil {
		t.Fatal(err)
	}
	if acks := acksSoFar(t, dev); len(acks) != 0 {
		t.Fatalf("PUBACKs %v while no subtask of the source was attached", acks)
	}
	other, takeOther := taker()
	defer b.Attach("src", []string{"dev/#"}, func(topic string) bool { return topic != "dev/a" }, takeOther)()
	got, take := taker()
	detach := b.Attach("src", []string{"dev/#"}, func(topic string) bool { return topic == "dev/a" }, take)
	if h := testwait.Recv(t, got, 10*time.Second, "the waiting publish handed"); h.Duplicate || h.PacketID != 1 {
		t.Fatalf("handed %+v, want packet 1, not a duplicate", h)
	}
	detach()
	stopping := make(chan struct{})
	detach = b.Attach("src", []string{"dev/#"}, func(topic string) bool { return topic == "dev/a" }, func(mqttio.Handoff) bool {
		close(stopping)
		return false
	})
	<-stopping
	detach()
	got, take = taker()
	defer b.Attach("src", []string{"dev/#"}, func(topic string) bool { return topic == "dev/a" }, take)()
	h := testwait.Recv(t, got, 10*time.Second, "the publish handed again")
	if !h.Duplicate || h.PacketID != 1 || string(h.Payload) != "x" {
		t.Fatalf("handed again %+v, want packet 1 as a duplicate", h)
	}
	select {
	case h := <-other:
		t.Fatalf("a subtask that does not pick dev/a was handed %+v", h)
	default:
	}
	h.Ack()
	if pk, err := dev.ReadType(packets.Puback, false); err != nil || pk.PacketID != 1 {
		t.Fatalf("PUBACK %d, %v; want 1", pk.PacketID, err)
	}
}

// TestIngressQoS0AndReadsGone: a QoS 0 publish is handed without an
// acknowledgement to wait for, and delivered at once; a publish held for
// a source that a reload removes (SetReads) is released.
func TestIngressQoS0AndReadsGone(t *testing.T) {
	b, connect := startIngress(t, "dev/#")
	got, take := taker()
	detach := b.Attach("src", []string{"dev/#"}, nil, take)
	watch := connect("watch")
	if _, err := watch.SubscribeAck(1, 1, "dev/#"); err != nil {
		t.Fatal(err)
	}
	dev := connect("device")
	if err := dev.Publish(0, "dev/q0", []byte("0"), 0, false); err != nil {
		t.Fatal(err)
	}
	if h := testwait.Recv(t, got, 10*time.Second, "a QoS 0 publish handed"); h.QoS != 0 || h.Ack != nil {
		t.Fatalf("handed %+v", h)
	}
	if pk, err := watch.ReadType(packets.Publish, true); err != nil || pk.TopicName != "dev/q0" {
		t.Fatalf("delivered %q, %v", pk.TopicName, err)
	}
	detach()
	if err := dev.Publish(5, "dev/q1", []byte("1"), 1, true); err != nil {
		t.Fatal(err)
	}
	if acks := acksSoFar(t, dev); len(acks) != 0 {
		t.Fatalf("PUBACKs %v while the source's subtask was detached", acks)
	}
	b.SetReads(nil)
	if pk, err := dev.ReadType(packets.Puback, false); err != nil || pk.PacketID != 5 {
		t.Fatalf("PUBACK %d, %v; want 5 once no source reads its topic", pk.PacketID, err)
	}
	if pk, err := watch.ReadType(packets.Publish, true); err != nil || pk.TopicName != "dev/q1" {
		t.Fatalf("delivered %q, %v", pk.TopicName, err)
	}
	late := connect("late")
	if _, err := late.SubscribeAck(1, 1, "dev/q1"); err != nil {
		t.Fatal(err)
	}
	if pk, err := late.ReadType(packets.Publish, true); err != nil || !pk.FixedHeader.Retain || string(pk.Payload) != "1" {
		t.Fatalf("retained %+v, %v", pk, err)
	}
}

// TestIngressQoS2: a QoS 2 publish on a source's topic is answered with
// PUBREC only once the source acknowledged it, and its exchange then ends
// as any (PUBREL, PUBCOMP).
func TestIngressQoS2(t *testing.T) {
	b, connect := startIngress(t, "dev/#")
	got, take := taker()
	defer b.Attach("src", []string{"dev/#"}, nil, take)()
	dev := connect("device")
	if err := dev.Publish(3, "dev/two", []byte("2"), 2, false); err != nil {
		t.Fatal(err)
	}
	h := testwait.Recv(t, got, 10*time.Second, "the QoS 2 publish handed")
	if err := dev.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pingreq}}); err != nil {
		t.Fatal(err)
	}
	if pk, err := dev.ReadPacket(); err != nil || pk.FixedHeader.Type != packets.Pingresp {
		t.Fatalf("before the source acknowledged it, the broker sent a %s (%v), want only a PINGRESP", packets.PacketNames[pk.FixedHeader.Type], err)
	}
	h.Ack()
	if pk, err := dev.ReadType(packets.Pubrec, false); err != nil || pk.PacketID != 3 {
		t.Fatalf("PUBREC %d, %v; want 3", pk.PacketID, err)
	}
	if err := dev.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubrel, Qos: 1}, PacketID: 3}); err != nil {
		t.Fatal(err)
	}
	if pk, err := dev.ReadType(packets.Pubcomp, false); err != nil || pk.PacketID != 3 {
		t.Fatalf("PUBCOMP %d, %v; want 3", pk.PacketID, err)
	}
}

// TestIngressPropertyOrderAndDurability drives the ingress with generated
// traffic from raw clients: random topics (read by one source, by two, or
// by none), QoS 0, 1 and 2, payloads, acknowledgements by the sources in
// random order, and a source's subtask detached and attached again at
// random. Whatever the schedule, each client is acknowledged (PUBACK or
// PUBREC) each of its QoS 1 and 2 publishes exactly once, in the order
// it sent them, and only once every source that reads its topic has
// acknowledged it; every source that reads a topic is handed each such
// publish, by the subtask that picks it, and any copy but one marked as
// a duplicate; and a subtask is handed a client's publishes in their
// order.
func TestIngressPropertyOrderAndDurability(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { ingressProperty(t, seed) })
	}
}

func ingressProperty(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 11))
	reads := map[string][]string{"a": {"s/#"}, "b": {"s/x/#", "t/#"}}
	b, err := Start(Config{Addr: "127.0.0.1:0", AllowAnonymous: true, Reads: reads}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	readers := map[string][]string{"s/1": {"a"}, "s/x/2": {"a", "b"}, "t/3": {"b"}, "u/4": nil}
	topics := slices.Sorted(maps.Keys(readers))

	type sent struct {
		device string
		id     uint16
		topic  string
	}
	type given struct {
		source string
		h      mqttio.Handoff
	}
	var mu sync.Mutex
	var pending []given                     // handed, not acknowledged
	handed := make(map[sent][]given)        // every handoff, by publish
	acked := make(map[sent]map[string]bool) // the sources that acknowledged it
	durable := make(map[sent]bool)          // every source reading it acknowledged it
	takeFor := func(source string, pick func(string) bool) func(mqttio.Handoff) bool {
		last := make(map[string]uint16) // by publisher: the packet id this subtask was handed last
		return func(h mqttio.Handoff) bool {
			mu.Lock()
			defer mu.Unlock()
			if h.QoS > 0 {
				if h.PacketID <= last[h.Publisher] {
					t.Errorf("source %s's subtask handed %s's packet %d after its packet %d", source, h.Publisher, h.PacketID, last[h.Publisher])
				}
				last[h.Publisher] = h.PacketID
			}
			if pick != nil && !pick(h.Topic) {
				t.Errorf("source %s's subtask handed %s, which it does not pick", source, h.Topic)
			}
			if !slices.Contains(readers[h.Topic], source) {
				t.Errorf("source %s handed %s, which it does not read", source, h.Topic)
			}
			if h.QoS > 0 {
				g := given{source, h}
				s := sent{h.Publisher, h.PacketID, h.Topic}
				// A subtask detached may still be handed the first copy
				// after the next got its own: of the copies a source is
				// handed, in whatever order, one at most is not marked.
				if prev := handed[s]; !h.Duplicate && slices.ContainsFunc(prev, func(p given) bool { return p.source == source && !p.h.Duplicate }) {
					t.Errorf("%+v handed to %s twice not as a duplicate (handed before: %+v)", s, source, prev)
				}
				handed[s] = append(handed[s], g)
				pending = append(pending, g)
			}
			return true
		}
	}
	isX := func(topic string) bool { return topic == "s/x/2" }
	detachA0 := b.Attach("a", reads["a"], func(topic string) bool { return !isX(topic) }, takeFor("a", func(topic string) bool { return !isX(topic) }))
	defer b.Attach("a", reads["a"], isX, takeFor("a", isX))()
	defer b.Attach("b", reads["b"], nil, takeFor("b", nil))()
	attachedA0 := true

	addr := strings.TrimPrefix(b.URL(), "tcp://")
	const devices, publishes = 3, 60
	var order [devices][]sent // each device's QoS 1 and 2 publishes, in order
	var acks [devices]chan uint16
	conns := make([]*mqttraw.Conn, devices)
	for d := range devices {
		c, err := mqttraw.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Minute))
		if code, err := c.Connect(mqttraw.Session{ID: fmt.Sprint("d", d), Clean: true}); err != nil || code != 0 {
			t.Fatalf("CONNACK %d, %v", code, err)
		}
		conns[d], acks[d] = c, make(chan uint16, publishes)
		go func() {
			for {
				pk, err := c.ReadPacket()
				if err != nil {
					close(acks[d])
					return
				}
				switch pk.FixedHeader.Type {
				case packets.Puback, packets.Pubrec:
					mu.Lock()
					for _, o := range order[d] {
						if o.id == pk.PacketID && len(readers[o.topic]) > 0 && !durable[o] {
							t.Errorf("%+v acknowledged to its client before every source had it durable", o)
						}
					}
					mu.Unlock()
					acks[d] <- pk.PacketID
					if pk.FixedHeader.Type == packets.Pubrec {
						c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubrel, Qos: 1}, PacketID: pk.PacketID})
					}
				}
			}
		}()
	}
	ackOne := func() bool {
		mu.Lock()
		if len(pending) == 0 {
			mu.Unlock()
			return false
		}
		i := rng.IntN(len(pending))
		g := pending[i]
		pending = slices.Delete(pending, i, i+1)
		s := sent{g.h.Publisher, g.h.PacketID, g.h.Topic}
		if acked[s] == nil {
			acked[s] = make(map[string]bool)
		}
		acked[s][g.source] = true
		done := true
		for _, src := range readers[s.topic] {
			done = done && acked[s][src]
		}
		durable[s] = durable[s] || done
		mu.Unlock()
		g.h.Ack()
		return true
	}
	next := make([]uint16, devices)
	for range devices * publishes * 2 {
		switch r := rng.IntN(10); {
		case r < 5:
			d := rng.IntN(devices)
			if int(next[d]) == publishes {
				continue
			}
			next[d]++
			topic, qos := topics[rng.IntN(len(topics))], byte(rng.IntN(3))
			id := next[d]
			if qos == 0 {
				id = 0
			} else {
				mu.Lock()
				order[d] = append(order[d], sent{fmt.Sprint("d", d), id, topic})
				mu.Unlock()
			}
			payload := make([]byte, rng.IntN(64))
			for i := range payload {
				payload[i] = byte(rng.Uint32())
			}
			if err := conns[d].Publish(id, topic, payload, qos, rng.IntN(8) == 0); err != nil {
				t.Fatal(err)
			}
		case r < 9:
			ackOne()
		case attachedA0:
			detachA0()
			attachedA0 = false
		default:
			detachA0 = b.Attach("a", reads["a"], func(topic string) bool { return !isX(topic) }, takeFor("a", func(topic string) bool { return !isX(topic) }))
			attachedA0 = true
		}
	}
	if !attachedA0 {
		defer b.Attach("a", reads["a"], func(topic string) bool { return !isX(topic) }, takeFor("a", func(topic string) bool { return !isX(topic) }))()
	} else {
		defer detachA0()
	}
	for d := range devices {
		mu.Lock()
		want := slices.Clone(order[d])
		mu.Unlock()
		for i, s := range want {
			var id uint16
			var ok bool
			if !testwait.Poll(10*time.Second, func() bool {
				select {
				case id, ok = <-acks[d]:
					return true
				default:
					for ackOne() {
					}
					return false
				}
			}) || !ok {
				t.Fatalf("seed %d: device %d: no acknowledgement for its publish %d of %d (%+v)", seed, d, i+1, len(want), s)
			}
			if id != s.id {
				t.Fatalf("seed %d: device %d acknowledged packet %d where %+v was next", seed, d, id, s)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for d := range devices {
		for _, s := range order[d] {
			for _, src := range readers[s.topic] {
				if !slices.ContainsFunc(handed[s], func(g given) bool { return g.source == src }) {
					t.Errorf("seed %d: %+v never handed to %s", seed, s, src)
				}
			}
		}
	}
}
