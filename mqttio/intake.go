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
	kick   chan struct{}
	room   chan struct{}

	mu      sync.Mutex
	pending []inbound
	spare   []inbound // the last group's slice, for the next
	bytes   int       // payload bytes pending
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
	m      paho.Message
	sum    uint64
	logged bool // a redelivery of a message already logged: acknowledge only
}

func newIntake(window, limit int, logged map[uint16]uint64) *intake {
	return &intake{window: window, limit: limit, logged: logged,
		kick: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

// add takes m from paho's goroutine, waiting while the intake is full
// (backpressure: paho reads no more, and the broker's in-flight window
// fills), until stop closes. It reports whether m is a redelivery of a
// message logged or pending.
func (in *intake) add(m paho.Message, stop <-chan struct{}) (redelivered bool) {
	sum := PayloadSum(m.Topic(), m.Payload())
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
	e := inbound{m: m, sum: sum, logged: in.redeliveredLocked(m, sum)}
	now := time.Now()
	if !in.last.IsZero() {
		in.gap += (min(now.Sub(in.last), time.Second) - in.gap) / 8
	}
	in.last = now
	in.pending = append(in.pending, e)
	in.bytes += len(m.Payload())
	n, bytes := len(in.pending), in.bytes
	in.mu.Unlock()
	if n == 1 || n == in.window || bytes >= maxPendingBytes && bytes-len(m.Payload()) < maxPendingBytes {
		select {
		case in.kick <- struct{}{}:
		default:
		}
	}
	return e.logged
}

// redeliveredLocked reports whether m, if the broker marked it as a
// redelivery, is logged already or pending.
func (in *intake) redeliveredLocked(m paho.Message, sum uint64) bool {
	if !m.Duplicate() {
		return false
	}
	if s, ok := in.logged[m.MessageID()]; ok && s == sum {
		return true
	}
	for _, p := range in.pending {
		if p.m.MessageID() == m.MessageID() && p.sum == sum {
			return true
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

// take returns every message pending, to commit as a group.
func (in *intake) take() []inbound {
	in.mu.Lock()
	defer in.mu.Unlock()
	group := in.pending
	in.pending, in.spare, in.bytes = in.spare[:0], nil, 0
	return group
}

// putBack returns a group that could not be logged, in front of what
// arrived meanwhile.
func (in *intake) putBack(group []inbound) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, e := range group {
		in.bytes += len(e.m.Payload())
	}
	in.pending = append(group, in.pending...)
}

// committed notes a group as logged, lets go of its messages, and makes
// room for paho's goroutine.
func (in *intake) committed(group []inbound) {
	in.mu.Lock()
	for _, e := range group {
		in.logged[e.m.MessageID()] = e.sum
	}
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
