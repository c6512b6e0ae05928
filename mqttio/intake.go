package mqttio

import (
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/ingest"
)

// intake holds the messages a durable source received and has not logged
// yet, between paho's goroutine, which adds them, and the source's
// ingester, which logs them in group commits. Handing each message to the
// ingester over a channel woke it (and a thread) for every message; the
// intake wakes it only for the first message of a group and when a group
// is due at once (the broker's window is full, or maxPendingBytes wait).
// Its window (window.go) learns the broker's in-flight window from the
// messages owed (received, not yet acknowledged) as each arrives.
type intake struct {
	// hold is how many messages may be owed before paho's goroutine
	// waits: at most the most a group may hold (maxGroup).
	hold int
	// keep is the most of a payload kept: one byte over the decoder's
	// limit, so that a larger payload is a dead letter still, and is not
	// written whole (MQTT allows 256 MiB, more than a record of the log).
	keep int
	kick chan struct{}
	// room is closed, and replaced, when an acknowledged group makes room:
	// every add that waits for room (one per publisher, with the agent's
	// own broker) looks again.
	room chan struct{}

	mu      sync.Mutex
	window  window
	pending []inbound
	toLog   int // pending messages that are to be logged: not acknowledge-only
	// committing is the group taken, until it is committed or put back:
	// a redelivery of one of its messages must be known as one, and its
	// messages are owed.
	committing []inbound
	spare      []inbound // the last group's slice, for the next
	bytes      int       // payload bytes pending
	// logged are the publish ids and payload sums of the newest messages
	// logged, to recognise their senders' redeliveries of them.
	logged recent
}

// maxGroup is the most messages a group holds, and so the most a source
// owes the broker: after a crash the log recognises a redelivery among
// its newest RedeliveryWindow messages (Log.Logged), and the broker
// redelivers what it was owed, acknowledgements in flight included.
const maxGroup = ingest.RedeliveryWindow / 2

// maxHeldBytes is the payload that may wait before paho's goroutine waits
// too: a group is due at maxPendingBytes, so only commits that fail or
// are held back (SourceConfig.MaxLag) let more wait.
const maxHeldBytes = 8 * maxPendingBytes

// inbound is a received message waiting for its group commit.
type inbound struct {
	m         paho.Message
	publisher string    // the client id that published m to the agent's own broker, or ""
	payload   []byte    // m's, or as much of it as is kept
	sum       uint64    // PayloadSum of the topic and payload
	at        time.Time // when it arrived
	// logged marks a message to acknowledge only: a redelivery of one
	// already logged, or one another subtask logs.
	logged bool
}

// newIntake returns an intake whose window is learned, with interval
// the sync interval and limit, if above 0, a window known (both
// SourceConfig's); keep is the most of a payload kept, logged the
// messages the log holds (Log.Logged).
func newIntake(interval time.Duration, limit, keep int, logged map[ingest.PublishID]uint64) *intake {
	hold := maxGroup
	if limit > 0 {
		hold = min(hold, maxGroups*limit)
	}
	in := &intake{window: newWindow(interval, limit), hold: hold, keep: keep,
		kick: make(chan struct{}, 1), room: make(chan struct{})}
	for id, sum := range logged {
		in.logged.note(id, sum)
	}
	return in
}

// add takes m, published by publisher (SourceConfig.Ingress; "" from a
// remote broker), from paho's goroutine or the agent's own broker,
// waiting while the intake is full (backpressure: paho reads no more, and
// the broker's in-flight window fills; the publisher's connection reads
// no more), until stop closes. It reports whether m was taken, and
// whether it is a redelivery of a message logged or pending. A message
// another subtask logs (other) is only acknowledged, in its turn.
func (in *intake) add(m paho.Message, publisher string, stop <-chan struct{}, other bool) (taken, redelivered bool) {
	payload := m.Payload()
	payload = payload[:min(len(payload), in.keep)]
	sum := ingest.PayloadSum(m.Topic(), payload)
	if other {
		payload = nil // not written: it counts for no commit's bytes
	}
	for {
		in.mu.Lock()
		if in.owedLocked() < in.hold && in.bytes < maxHeldBytes {
			break
		}
		room := in.room
		in.mu.Unlock()
		select {
		case <-room:
		case <-stop:
			return false, false
		}
	}
	now := time.Now()
	e := inbound{m: m, publisher: publisher, payload: payload, sum: sum, logged: other || in.redeliveredLocked(m, publisher, sum), at: now}
	in.pending = append(in.pending, e)
	in.bytes += len(payload)
	if !e.logged {
		in.toLog++
	}
	full := in.window.arrived(now, in.owedLocked()) || in.owedLocked() >= in.hold
	n, bytes := len(in.pending), in.bytes
	in.mu.Unlock()
	// Wake the ingester for a group's first message, to time it, and for
	// the message that makes a group due at once.
	if n == 1 || full || bytes >= maxPendingBytes && bytes-len(payload) < maxPendingBytes {
		select {
		case in.kick <- struct{}{}:
		default:
		}
	}
	return true, e.logged && !other
}

// owedLocked is how many messages are owed to the broker: received, and
// not yet acknowledged (pending, or being committed).
func (in *intake) owedLocked() int { return len(in.pending) + len(in.committing) }

// redeliveredLocked reports whether m, if the broker marked it as a
// redelivery, is logged already, being committed, or pending. (Acknowledged
// in receipt order, after the group holding the first copy, it is
// acknowledged once that copy is durable.)
func (in *intake) redeliveredLocked(m paho.Message, publisher string, sum uint64) bool {
	if !m.Duplicate() {
		return false
	}
	if in.logged.has(ingest.PublishID{Publisher: publisher, PacketID: m.MessageID()}, sum) {
		return true
	}
	for _, group := range [][]inbound{in.committing, in.pending} {
		for _, p := range group {
			if p.m.MessageID() == m.MessageID() && p.publisher == publisher && p.sum == sum {
				return true
			}
		}
	}
	return false
}

// connected notes a new connection to the broker: its window is learned
// anew.
func (in *intake) connected() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.window.connected()
}

// due reports whether the messages pending are due for a commit at now,
// and why; if they are not, next is when they will be unless a message
// arrives first (zero: none is pending). A group of messages to
// acknowledge only (another subtask's, or redeliveries of logged ones) is
// due at once: it needs no sync, and acknowledged at once it does not
// hold the broker's window.
func (in *intake) due(now time.Time) (why dueReason, next time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	switch {
	case len(in.pending) == 0:
		return notDue, time.Time{}
	case in.toLog == 0:
		return ackOnly, now
	case in.bytes >= maxPendingBytes:
		return bytesDue, now
	case in.owedLocked() >= in.hold:
		return windowFull, now
	}
	return in.window.due(now, in.owedLocked(), in.pending[0].at)
}

// learned is the broker's window as learned, 0 if it is not known.
func (in *intake) learned() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.window.full
}

// take returns every message pending, to commit as a group.
func (in *intake) take() []inbound {
	in.mu.Lock()
	defer in.mu.Unlock()
	group := in.pending
	in.pending, in.spare, in.bytes, in.toLog = in.spare[:0], nil, 0, 0
	in.committing = group
	return group
}

// putBack returns a group that could not be logged, in front of what
// arrived meanwhile.
func (in *intake) putBack(group []inbound) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, e := range group {
		in.bytes += len(e.payload)
		if !e.logged {
			in.toLog++
		}
	}
	in.pending, in.committing = append(group, in.pending...), nil
}

// committed notes a group as logged, about to be acknowledged: its
// messages are no longer owed, and a redelivery of one is known by its
// packet id and payload.
func (in *intake) committed(group []inbound) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, e := range group {
		in.logged.note(ingest.PublishID{Publisher: e.publisher, PacketID: e.m.MessageID()}, e.sum)
	}
	in.committing = nil
	in.window.committed(time.Now())
}

// release lets go of an acknowledged group's messages and makes room for
// paho's goroutine.
func (in *intake) release(group []inbound) {
	in.mu.Lock()
	clear(group)
	if in.spare == nil {
		in.spare = group[:0]
	}
	close(in.room)
	in.room = make(chan struct{})
	in.mu.Unlock()
}

// recent holds the publish ids and payload sums of the newest
// ingest.RedeliveryWindow messages logged, the most a sender may
// redeliver (maxGroup): bounded, whatever the number of publishers and of
// the packet ids each uses.
type recent struct {
	sums  map[ingest.PublishID]recentSum
	order []ingest.PublishID // a ring of the ids noted, the oldest at next once full
	next  int
}

// recentSum is the payload sum of the newest message noted under an id,
// and how many of the ids in the ring are that id.
type recentSum struct {
	sum uint64
	n   int
}

// note notes the newest message logged under id, forgetting the oldest
// once the ring is full.
func (r *recent) note(id ingest.PublishID, sum uint64) {
	if r.sums == nil {
		r.sums = make(map[ingest.PublishID]recentSum)
	}
	if len(r.order) < ingest.RedeliveryWindow {
		r.order = append(r.order, id)
	} else {
		old := r.order[r.next]
		if e := r.sums[old]; e.n > 1 {
			r.sums[old] = recentSum{e.sum, e.n - 1}
		} else {
			delete(r.sums, old)
		}
		r.order[r.next] = id
		r.next = (r.next + 1) % len(r.order)
	}
	r.sums[id] = recentSum{sum, r.sums[id].n + 1}
}

// has reports whether the newest message noted under id has payload sum
// sum.
func (r *recent) has(id ingest.PublishID, sum uint64) bool {
	e, ok := r.sums[id]
	return ok && e.sum == sum
}
