package broker

import (
	"log/slog"
	"strings"
	"sync"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/cairn-edge/cairn/mqttio"
)

// ingress hands the publishes on topics the agent's durable sources read
// to their subtasks in this process (Server.Attach), and acknowledges a
// QoS 1 or 2 publish to its client only once every source that reads it
// has it in its ingest log: it holds the publish (mochi's OnPublish,
// which then neither acknowledges nor delivers it) and, once the last
// source acknowledges it, injects it again as the client's, marked, for
// mochi to acknowledge, retain and deliver to its subscribers as any. A
// client's publishes are released in the order they came, so its PUBACKs
// are too (MQTT 3.1.1, 4.6). A publish on a source's topic while no
// subtask of the source is attached (the job restarting) waits for one;
// one handed to a subtask that stops before acknowledging it is handed to
// the next, as a duplicate.
//
// A client may have at most maxHeldPerClient publishes held, and all
// together maxHeldBytes of payload: past either, the client's connection
// reads no more until its publishes are released (backpressure for the
// client that sends, not for all).
type ingress struct {
	mqtt.HookBase
	srv *mqtt.Server
	// refused says why the broker refuses a topic (brokerGuard's
	// topicRefusal), "" if it does not: such a publish is handed to no
	// source, and the guard drops it (after the client's held ones).
	refused func(topic string) (why string, attr slog.Attr)

	mu sync.Mutex
	// reads are the filters the sources read, by source name (SetReads);
	// index matches them and the attached subtasks' filters to topics.
	reads   map[string][]string
	index   *mqtt.TopicsIndex
	readers map[string][]*reader
	clients map[*mqtt.Client]*outbox
	bytes   int           // payload held, all clients
	room    chan struct{} // closed, and replaced, when a publish is released
}

// maxHeldPerClient and maxHeldBytes bound what ingress holds: the
// publishes of one client, and the payload of all.
const (
	maxHeldPerClient = 1000
	maxHeldBytes     = 16 << 20
)

// releaseMark marks a publish that ingress injects again once it is
// durable: the reason code, which a PUBLISH does not carry on the wire,
// so a client cannot set it. ingress clears it.
const releaseMark = 0xfe

// reader is an attached subtask of a source (Server.Attach).
type reader struct {
	source  string
	filters []string
	pick    func(topic string) bool
	take    func(mqttio.Handoff) bool
}

// outbox is a client's publishes held, in the order they came, and
// their parts to hand to the sources' subtasks, in the order assigned.
type outbox struct {
	held      []*heldPublish
	releasing bool // a goroutine releases what is ready
	toHand    []handing
	handing   bool // a goroutine hands toHand
}

// heldPublish is a QoS 1 or 2 publish waiting for the sources that read
// it, or, if none does, for its client's publishes held before it.
type heldPublish struct {
	cl    *mqtt.Client
	pk    packets.Packet
	parts []*part
	owed  int // parts not done
}

// part is a held publish's due from one source.
type part struct {
	source string
	r      *reader // the subtask it was handed to; nil: waiting for one
	handed bool    // handed to a subtask once: a second time is a duplicate
	done   bool    // durable in the source's log, or the source is gone
}

func newIngress(srv *mqtt.Server, reads map[string][]string, refused func(string) (string, slog.Attr)) *ingress {
	in := &ingress{srv: srv, refused: refused, reads: reads, readers: make(map[string][]*reader), clients: make(map[*mqtt.Client]*outbox), room: make(chan struct{})}
	in.reindexLocked()
	return in
}

// ingressID is the ingress's hook id.
const ingressID = "cairn-ingress"

func (in *ingress) ID() string { return ingressID }

func (in *ingress) Provides(b byte) bool { return b == mqtt.OnPublish }

// setReads sets the filters each source reads, by source name. A source
// no longer among them, and with no subtask attached, owes nothing: its
// parts of held publishes are done.
func (in *ingress) setReads(reads map[string][]string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.reads = reads
	in.reindexLocked()
	for _, out := range in.clients {
		for _, h := range out.held {
			for _, p := range h.parts {
				if !p.done && !in.readLocked(p.source) {
					in.doneLocked(h, p)
				}
			}
		}
	}
}

// reindexLocked indexes the filters of the sources' reads and of their
// subtasks attached, by source name.
func (in *ingress) reindexLocked() {
	in.index = mqtt.NewTopicsIndex()
	add := func(source string, filters []string) {
		for _, f := range filters {
			in.index.Subscribe(source, packets.Subscription{Filter: unshared(f)})
		}
	}
	for source, filters := range in.reads {
		add(source, filters)
	}
	for _, rs := range in.readers {
		for _, r := range rs {
			add(r.source, r.filters)
		}
	}
}

// readLocked reports whether source is read: one of the reads, or
// attached.
func (in *ingress) readLocked(source string) bool {
	_, ok := in.reads[source]
	return ok || len(in.readers[source]) > 0
}

// unshared is the filter of a shared subscription ($share/group/filter),
// or filter: a source takes every publish its filter matches.
func unshared(filter string) string {
	if rest, ok := strings.CutPrefix(filter, "$share/"); ok {
		if _, f, ok := strings.Cut(rest, "/"); ok {
			return f
		}
	}
	return filter
}

// attach attaches a subtask of source, and hands it what waits for one
// of its source, each client's in its order.
func (in *ingress) attach(source string, filters []string, pick func(string) bool, take func(mqttio.Handoff) bool) (detach func()) {
	r := &reader{source: source, filters: filters, pick: pick, take: take}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.readers[source] = append(in.readers[source], r)
	in.reindexLocked()
	for _, out := range in.clients {
		for _, h := range out.held {
			for _, p := range h.parts {
				if p.source == source && p.r == nil && !p.done && r.picks(h.pk.TopicName) {
					in.handLocked(out, assignLocked(h, p, r))
				}
			}
		}
	}
	return func() { in.detach(r) }
}

// handLocked queues w to be handed after what out queued before: one
// goroutine a client hands its publishes' parts, in the order they were
// assigned, so that a source logs a client's publishes in their order,
// those that waited for it first.
func (in *ingress) handLocked(out *outbox, w handing) {
	out.toHand = append(out.toHand, w)
	if !out.handing {
		out.handing = true
		go in.handOut(w.h.cl, out)
	}
}

// handOut hands the parts queued in cl's outbox out, in order, until
// there are none.
func (in *ingress) handOut(cl *mqtt.Client, out *outbox) {
	for {
		in.mu.Lock()
		if len(out.toHand) == 0 {
			out.handing = false
			in.forgetIdleLocked(cl, out)
			in.mu.Unlock()
			return
		}
		w := out.toHand[0]
		out.toHand = out.toHand[1:]
		in.mu.Unlock()
		in.hand(w)
	}
}

// handing is a part to hand to a subtask, as a duplicate or not.
type handing struct {
	h   *heldPublish
	p   *part
	r   *reader
	dup bool
}

// assignLocked assigns part p of h to r: a duplicate if it was assigned
// before, to a subtask that may have taken it.
func assignLocked(h *heldPublish, p *part, r *reader) handing {
	w := handing{h, p, r, p.handed}
	p.r, p.handed = r, true
	return w
}

// detach detaches r: what it was handed and did not acknowledge waits for
// the next subtask of its source, or, if its source is no longer read,
// for nothing.
func (in *ingress) detach(r *reader) {
	in.mu.Lock()
	defer in.mu.Unlock()
	rs := in.readers[r.source]
	for i, x := range rs {
		if x == r {
			in.readers[r.source] = append(rs[:i:i], rs[i+1:]...)
			break
		}
	}
	in.reindexLocked()
	read := in.readLocked(r.source)
	for _, out := range in.clients {
		for _, h := range out.held {
			for _, p := range h.parts {
				switch {
				case p.r != r || p.done:
				case read:
					p.r = nil
				default:
					in.doneLocked(h, p) // no source of that name waits for it
				}
			}
		}
	}
}

func (r *reader) picks(topic string) bool { return r.pick == nil || r.pick(topic) }

// readerLocked is the attached subtask of source that takes topic, or nil.
func (in *ingress) readerLocked(source, topic string) *reader {
	for _, r := range in.readers[source] {
		if r.picks(topic) {
			return r
		}
	}
	return nil
}

// OnPublish holds a QoS 1 or 2 publish on a topic a source reads until
// every such source has it durable (see ingress), and hands a QoS 0 one
// to the sources' subtasks attached, which never acknowledge it.
func (in *ingress) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if pk.ReasonCode == releaseMark {
		pk.ReasonCode = 0 // released (ingress.release): as any publish now
		return pk, nil
	}
	in.mu.Lock()
	var sources []string
	for source := range in.index.Subscribers(pk.TopicName).Subscriptions {
		sources = append(sources, source)
	}
	if why, _ := in.refused(pk.TopicName); why != "" && len(sources) > 0 && !isAgent(cl) {
		sources = nil // the guard drops it, and no source may read it
	}
	if len(sources) == 0 {
		// No source reads it; but a client's PUBACKs go out in the order of
		// its publishes (MQTT 3.1.1, 4.6), so it waits for those held, if
		// any are, or being released (a publish the guard drops, too: it
		// is acknowledged).
		out := in.clients[cl]
		if pk.FixedHeader.Qos == 0 || out == nil || len(out.held) == 0 && !out.releasing {
			in.mu.Unlock()
			return pk, nil
		}
		out.held = append(out.held, &heldPublish{cl: cl, pk: pk})
		in.bytes += len(pk.Payload)
		in.mu.Unlock()
		in.awaitRoom(cl)
		return pk, packets.ErrRejectPacket
	}
	if pk.FixedHeader.Qos == 0 {
		var rs []*reader
		for _, s := range sources {
			if r := in.readerLocked(s, pk.TopicName); r != nil {
				rs = append(rs, r)
			}
		}
		in.mu.Unlock()
		for _, r := range rs {
			r.take(in.handoff(cl, pk, false, nil))
		}
		return pk, nil
	}
	out := in.clients[cl]
	if out == nil {
		out = new(outbox)
		in.clients[cl] = out
	}
	h := &heldPublish{cl: cl, pk: pk, owed: len(sources)}
	out.held = append(out.held, h)
	in.bytes += len(pk.Payload)
	for _, s := range sources {
		p := &part{source: s}
		h.parts = append(h.parts, p)
		if r := in.readerLocked(s, pk.TopicName); r != nil {
			in.handLocked(out, assignLocked(h, p, r))
		}
	}
	in.mu.Unlock()
	in.awaitRoom(cl)
	return pk, packets.ErrRejectPacket // not acknowledged, nor delivered, until released
}

// handoff is pk of cl as a source takes it; ack, if set, is called once
// the source has it durable.
func (in *ingress) handoff(cl *mqtt.Client, pk packets.Packet, dup bool, ack func()) mqttio.Handoff {
	return mqttio.Handoff{Topic: pk.TopicName, Payload: pk.Payload, Publisher: cl.ID, PacketID: pk.PacketID,
		QoS: pk.FixedHeader.Qos, Retained: pk.FixedHeader.Retain, Duplicate: dup || pk.FixedHeader.Dup, Ack: ack}
}

// hand hands a part to the subtask it is assigned to, unless it was
// assigned again since (detach, attach) or is done; if the subtask stops
// before it takes it, to the source's next subtask attached, or none: it
// then waits for one (attach).
func (in *ingress) hand(w handing) {
	h, p := w.h, w.p
	for {
		in.mu.Lock()
		stale := p.done || p.r != w.r
		in.mu.Unlock()
		if stale || w.r.take(in.handoff(h.cl, h.pk, w.dup, func() { in.acked(h, p) })) {
			return
		}
		in.mu.Lock()
		if p.done || p.r != w.r {
			in.mu.Unlock()
			return // done, or assigned again by detach and attach
		}
		next := in.readerLocked(p.source, h.pk.TopicName)
		if next == nil || next == w.r {
			p.r = nil // none, or this one, stopping: it detaches soon
			in.mu.Unlock()
			return
		}
		w = assignLocked(h, p, next)
		in.mu.Unlock()
	}
}

// acked notes part p of h durable.
func (in *ingress) acked(h *heldPublish, p *part) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !p.done {
		in.doneLocked(h, p)
	}
}

// doneLocked marks p done, and starts the release of h's client's
// publishes if h was the last they waited for.
func (in *ingress) doneLocked(h *heldPublish, p *part) {
	p.done = true
	if h.owed--; h.owed > 0 {
		return
	}
	out := in.clients[h.cl]
	if out.releasing || out.held[0].owed > 0 {
		return
	}
	out.releasing = true
	go in.release(h.cl, out)
}

// forgetIdleLocked forgets cl's outbox out once it holds nothing and no
// goroutine releases or hands from it: while one does, a new publish of
// cl's must queue behind, in the same outbox, or the parts it hands could
// overtake those handed before (a duplicate of a publish since done is
// still handed).
func (in *ingress) forgetIdleLocked(cl *mqtt.Client, out *outbox) {
	if len(out.held) == 0 && !out.releasing && !out.handing && in.clients[cl] == out {
		delete(in.clients, cl)
	}
}

// release releases the publishes of cl that are ready, in order, from the
// first: each is injected again as cl's, for mochi to acknowledge and
// deliver, unless cl is gone (its publisher sends it again when it
// reconnects, and the source knows it as a redelivery).
func (in *ingress) release(cl *mqtt.Client, out *outbox) {
	for {
		in.mu.Lock()
		n := 0
		for n < len(out.held) && out.held[n].owed == 0 {
			n++
		}
		ready := out.held[:n:n]
		out.held = out.held[n:]
		if n == 0 {
			out.releasing = false
			in.forgetIdleLocked(cl, out)
			in.mu.Unlock()
			return
		}
		for _, h := range ready {
			in.bytes -= len(h.pk.Payload)
		}
		close(in.room)
		in.room = make(chan struct{})
		in.mu.Unlock()
		for _, h := range ready {
			if cl.Closed() {
				continue
			}
			pk := h.pk
			pk.ReasonCode = releaseMark
			pk.Properties.TopicAliasFlag = false // its topic is resolved
			in.srv.InjectPacket(cl, pk)
		}
	}
}

// closedPoll is how often a client waiting for room is looked at again
// for having closed: mochi gives no signal of it.
const closedPoll = 100 * time.Millisecond

// awaitRoom waits while cl holds maxHeldPerClient publishes, or all
// clients maxHeldBytes, until cl closes.
func (in *ingress) awaitRoom(cl *mqtt.Client) {
	for {
		in.mu.Lock()
		out := in.clients[cl]
		full := out != nil && len(out.held) >= maxHeldPerClient || in.bytes > maxHeldBytes
		room := in.room
		in.mu.Unlock()
		if !full || cl.Closed() {
			return
		}
		select {
		case <-room:
		case <-time.After(closedPoll):
		}
	}
}
