package mqttio

import (
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// intake holds the messages a durable source received and has not logged
// yet, between paho's goroutine, which adds them, and the source's
// ingester, which logs them in group commits. Handing each message to the
// ingester over a channel woke it (and a thread) for every message; the
// intake wakes it only for the first message of a group and when a group
// is full.
type intake struct {
	window int // a group is full at this many messages (SourceConfig.MaxInflight)
	limit  int // paho's goroutine waits while this many wait
	// keep is the most of a payload kept: one byte over the decoder's
	// limit, so that a larger payload is a dead letter still, and is not
	// written whole (MQTT allows 256 MiB, more than a record of the log).
	keep int
	kick chan struct{}
	room chan struct{}

	mu      sync.Mutex
	pending []inbound
	toLog   int // pending messages that are to be logged: not acknowledge-only
	// committing is the group taken, until it is committed or put back:
	// a redelivery of one of its messages must be known as one.
	committing []inbound
	spare      []inbound // the last group's slice, for the next
	bytes      int       // payload bytes pending
	// last is when the newest message arrived, and gap the typical time
	// between arrivals (a moving average).
	last time.Time
	gap  time.Duration
	// logged are the packet ids and payload sums of the newest messages
	// logged, to recognise the broker's redeliveries of them.
	logged map[uint16]uint64
}

// inbound is a received message waiting for its group commit.
type inbound struct {
	m       paho.Message
	payload []byte    // m's, or as much of it as is kept
	sum     uint64    // PayloadSum of the topic and payload
	at      time.Time // when it arrived
	// logged marks a message to acknowledge only: a redelivery of one
	// already logged, or one another subtask logs.
	logged bool
}

func newIntake(window, limit, keep int, logged map[uint16]uint64) *intake {
	return &intake{window: window, limit: limit, keep: keep, logged: logged,
		kick: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

// add takes m from paho's goroutine, waiting while the intake is full
// (backpressure: paho reads no more, and the broker's in-flight window
// fills), until stop closes. It reports whether m is a redelivery of a
// message logged or pending. A message another subtask logs (other) is only
// acknowledged, in its turn.
func (in *intake) add(m paho.Message, stop <-chan struct{}, other bool) (redelivered bool) {
	payload := m.Payload()
	payload = payload[:min(len(payload), in.keep)]
	sum := PayloadSum(m.Topic(), payload)
	if other {
		payload = nil // not written: it counts for no commit's bytes
	}
	for {
		in.mu.Lock()
		if len(in.pending) < in.limit {
			break
		}
		in.mu.Unlock()
		select {
		case <-in.room:
		case <-stop:
			return false
		}
	}
	now := time.Now()
	e := inbound{m: m, payload: payload, sum: sum, logged: other || in.redeliveredLocked(m, sum), at: now}
	if !in.last.IsZero() {
		in.gap += (min(now.Sub(in.last), time.Second) - in.gap) / 8
	}
	in.last = now
	in.pending = append(in.pending, e)
	in.bytes += len(payload)
	if !e.logged {
		in.toLog++
	}
	n, bytes := len(in.pending), in.bytes
	in.mu.Unlock()
	if n == 1 || n == in.window || bytes >= maxPendingBytes && bytes-len(payload) < maxPendingBytes {
		select {
		case in.kick <- struct{}{}:
		default:
		}
	}
	return e.logged && !other
}

// redeliveredLocked reports whether m, if the broker marked it as a
// redelivery, is logged already, being committed, or pending. (Acknowledged
// in receipt order, after the group holding the first copy, it is
// acknowledged once that copy is durable.)
func (in *intake) redeliveredLocked(m paho.Message, sum uint64) bool {
	if !m.Duplicate() {
		return false
	}
	if s, ok := in.logged[m.MessageID()]; ok && s == sum {
		return true
	}
	for _, group := range [][]inbound{in.committing, in.pending} {
		for _, p := range group {
			if p.m.MessageID() == m.MessageID() && p.sum == sum {
				return true
			}
		}
	}
	return false
}

// quiet returns how long it has been since a message arrived, and how long
// a quiet spell ends a burst: eight typical gaps between arrivals, at
// least minQuiet. At a steady pace it is longer than the pace's gaps; after
// a burst, the burst's last messages need not wait for the interval.
func (in *intake) quiet(now time.Time) (since, ends time.Duration) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return now.Sub(in.last), max(minQuiet, 8*in.gap)
}

// minQuiet is the shortest quiet spell that ends a burst.
const minQuiet = 20 * time.Millisecond

// size is what is pending: messages and payload bytes.
func (in *intake) size() (int, int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.pending), in.bytes
}

// ackOnly reports whether messages are pending and none of them is to be
// logged: acknowledging them needs no commit, and they need not wait for
// one.
func (in *intake) ackOnly() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.pending) > 0 && in.toLog == 0
}

// waited is how long the oldest message pending has waited, if any is.
func (in *intake) waited(now time.Time) (time.Duration, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.pending) == 0 {
		return 0, false
	}
	return now.Sub(in.pending[0].at), true
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

// committed notes a group as logged, lets go of its messages, and makes
// room for paho's goroutine.
func (in *intake) committed(group []inbound) {
	in.mu.Lock()
	for _, e := range group {
		in.logged[e.m.MessageID()] = e.sum
	}
	in.committing = nil
	clear(group)
	if in.spare == nil {
		in.spare = group[:0]
	}
	in.mu.Unlock()
	select {
	case in.room <- struct{}{}:
	default:
	}
}
