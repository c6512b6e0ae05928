package mqttio

import (
	"log/slog"
	"sync"
	"time"
)

// BrokerState gathers what the clients of one broker (a source subtask's,
// a sink's) know of their connections, for the agent to show, and logs
// their failures to connect: the first at once, later ones at the 2nd,
// 4th, 8th, ... failure in a row, so that a broker away for a day costs a
// few lines, not one every reconnect. Safe for concurrent use; the zero
// value is ready.
type BrokerState struct {
	mu        sync.Mutex
	clients   map[string]*clientState
	all       bool      // every client connected, at the last event
	since     time.Time // when all last changed
	lastErr   string
	lastErrAt time.Time
}

type clientState struct {
	open     func() bool // the client's connection is up (paho's IsConnectionOpen)
	failures int         // failed attempts in a row
}

// BrokerStatus is a snapshot of a BrokerState.
type BrokerStatus struct {
	// Clients is the number of clients of the broker; Connected, of them,
	// how many are connected now.
	Clients, Connected int
	// Since is when the broker's clients last went from all connected to
	// not, or back, as far as their events tell.
	Since time.Time
	// LastError is the newest failure to connect or lost connection, and
	// when it was; empty if none.
	LastError   string
	LastErrorAt time.Time
}

// Status returns a snapshot; whether a client is connected is asked of
// it now (paho tells of connections on goroutines of its own, in any
// order).
func (b *BrokerState) Status() BrokerStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := BrokerStatus{Clients: len(b.clients), Since: b.since, LastError: b.lastErr, LastErrorAt: b.lastErrAt}
	for _, c := range b.clients {
		if c.open() {
			st.Connected++
		}
	}
	return st
}

// register adds client id, whose connection open tells of, before its
// first attempt to connect.
func (b *BrokerState) register(id string, open func() bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.clients == nil {
		b.clients = make(map[string]*clientState)
	}
	b.clients[id] = &clientState{open: open}
	b.changedLocked()
}

// changedLocked notes when every client's being connected changed.
func (b *BrokerState) changedLocked() {
	all := true
	for _, c := range b.clients {
		all = all && c.open()
	}
	if all != b.all || b.since.IsZero() {
		b.all, b.since = all, time.Now()
	}
}

// event notes that client id connected (err nil) or failed to connect or
// lost its connection (err), and returns its failures in a row.
func (b *BrokerState) event(id string, err error) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.clients[id]
	if c == nil {
		return 0
	}
	if err == nil {
		c.failures = 0
	} else {
		c.failures++
		b.lastErr, b.lastErrAt = err.Error(), time.Now()
	}
	b.changedLocked()
	return c.failures
}

// failed notes a failed attempt to connect and logs it at WARN when the
// failures in a row are a power of two.
func (b *BrokerState) failed(log *slog.Logger, broker, url, id string, err error) {
	if n := b.event(id, err); n&(n-1) == 0 {
		log.Warn("MQTT connect failed; retrying", "broker", broker, "url", url, "client", id, "failures", n, "err", err)
	}
}
