package broker

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/cairn-edge/cairn/mqttio"
)

// connectTimeout is how long a client of an embedded broker has, once
// its connection is accepted, to send its CONNECT; then mochi's keepalive
// (one and a half times the client's) takes over.
const connectTimeout = 10 * time.Second

// listenTimes are the times a clientListener gives its clients:
// connectTimeout, largePacketTime and writeStall but in tests.
type listenTimes struct {
	connect, largePacket, writeStall time.Duration
}

var defaultListenTimes = listenTimes{connect: connectTimeout, largePacket: largePacketTime, writeStall: writeStall}

// The ids of an embedded broker's listeners, which mochi shows a client's
// (mqtt.Client.Net.Listener): clientsListener takes the clients of
// Config.Addr, agentListener the agent's own (Server.DialAgent).
const (
	clientsListener = "clients"
	agentListener   = "agent"
)

// clientListener is an embedded broker's TCP listener for clients other
// than the agent's, which refuses a connection as it accepts it, before
// mochi spends anything on it, when MaxClients are connected already or
// the address connected more than MaxConnectionRate times a second; and
// gives each connection connectTimeout to send its CONNECT. Its
// connections' failures are logged through refusals, a few lines a
// minute at most.
type clientListener struct {
	addr  string
	lim   Limits
	refer *refusals
	ln    net.Listener
	rates *addrRates
	open  atomic.Int64 // connections accepted and not closed
	conns connSet      // the same
	large receiving    // the budget of large packets
	times listenTimes
	// endClients ends the connections of the listener's clients
	// (Server.endClients).
	endClients listeners.CloseFn
	end        sync.Once
}

func (l *clientListener) ID() string       { return clientsListener }
func (l *clientListener) Protocol() string { return "tcp" }

func (l *clientListener) Address() string {
	if l.ln != nil {
		return l.ln.Addr().String()
	}
	return l.addr
}

func (l *clientListener) Init(*slog.Logger) (err error) {
	l.large.left = receivingBudget
	l.ln, err = net.Listen("tcp", l.addr)
	return err
}

func (l *clientListener) Serve(establish listeners.EstablishFn) {
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			return
		}
		remote := conn.RemoteAddr().String()
		switch {
		case l.lim.MaxClients > 0 && l.open.Load() >= int64(l.lim.MaxClients):
			conn.Close()
			l.refer.note(slog.LevelWarn, remote, "embedded broker refused a connection: max_clients connected", 1, slog.Int("max_clients", l.lim.MaxClients))
			continue
		case l.lim.MaxConnectionRate > 0 && !l.rates.allow(hostOf(remote), time.Now()):
			conn.Close()
			l.refer.note(slog.LevelWarn, remote, "embedded broker refused a connection: over max_connection_rate", 1, slog.Int("max_connection_rate", l.lim.MaxConnectionRate))
			continue
		}
		l.open.Add(1)
		conn.SetDeadline(time.Now().Add(l.times.connect))
		conn = &meteredConn{Conn: mqttio.Quiet(conn), budget: &l.large, times: l.times, stalled: func() {
			l.refer.note(slog.LevelWarn, remote, "embedded broker closed a client's connection: it read nothing", 1, slog.Duration("for", l.times.writeStall))
		}}
		if !l.conns.add(conn) {
			conn.Close()
			l.open.Add(-1)
			return // closed meanwhile
		}
		go func() {
			err := establish(clientsListener, conn)
			conn.Close()
			l.open.Add(-1)
			l.ended(remote, err)
			l.conns.remove(conn) // last: Close waits for it
		}()
	}
}

// ended logs how a client's connection ended, unless that is no news: it
// went away, or the broker refused it and said so (refusals).
func (l *clientListener) ended(remote string, err error) {
	var code packets.Code
	switch {
	case err == nil, clientGone(err), errors.Is(err, errRefused), errors.Is(err, packets.ErrBadUsernameOrPassword):
	case errors.Is(err, errNoRoom):
		l.refer.note(slog.LevelWarn, remote, "embedded broker closed a client's connection: no room for its large packet", 1, slog.Int("budget_bytes", receivingBudget))
	case errors.As(err, &code) && code == packets.CodeDisconnect:
	default:
		l.refer.note(slog.LevelWarn, remote, "embedded broker closed a client's connection on an error", 1, slog.String("err", err.Error()))
	}
}

// Close stops taking connections, then ends those taken: the clients'
// (endClients, not mochi's closeClients), and those that have not sent
// their CONNECT yet. (mochi waits for all of them to end; one taken after
// endClients, a client reconnecting at once, would hold its Close for
// good.)
func (l *clientListener) Close(listeners.CloseFn) {
	l.end.Do(func() {
		if l.ln != nil {
			l.ln.Close()
		}
		l.endClients(clientsListener)
		l.conns.closeAll()
	})
}

// errRefused is what the broker's hooks end a connection with when they
// refused it and logged why.
var errRefused = errors.New("refused by the embedded broker")

// agentClientListener is an embedded broker's listener for the agent's
// own clients: a unix socket (abstract, on Linux) that only this process
// may connect to (ownPeer), so that no client of the network or of the
// device shares the limits, the rate or the room of the agent's.
type agentClientListener struct {
	name       string // the socket's
	ln         net.Listener
	log        *slog.Logger
	conns      connSet
	endClients listeners.CloseFn // as clientListener's
	end        sync.Once
}

func (l *agentClientListener) ID() string       { return agentListener }
func (l *agentClientListener) Protocol() string { return "unix" }
func (l *agentClientListener) Address() string  { return l.name }

func (l *agentClientListener) Init(*slog.Logger) (err error) {
	l.ln, err = net.Listen("unix", l.name)
	return err
}

func (l *agentClientListener) Serve(establish listeners.EstablishFn) {
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			return
		}
		if err := ownPeer(conn); err != nil {
			conn.Close()
			l.log.Warn("embedded broker refused a connection to the agent's socket", "err", err)
			continue
		}
		conn = mqttio.Quiet(conn)
		if !l.conns.add(conn) {
			conn.Close()
			return
		}
		go func() {
			err := establish(agentListener, conn)
			conn.Close()
			if err != nil && !clientGone(err) {
				l.log.Debug("the agent's connection to its embedded broker ended", "err", err)
			}
			l.conns.remove(conn) // last: Close waits for it
		}()
	}
}

// Close stops taking connections, then ends those taken, as
// clientListener.Close does.
func (l *agentClientListener) Close(listeners.CloseFn) {
	l.end.Do(func() {
		if l.ln != nil {
			l.ln.Close()
		}
		l.endClients(agentListener)
		l.conns.closeAll()
	})
}

// connSet is the connections a listener took and that have not ended.
type connSet struct {
	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
	live   sync.WaitGroup // the connections added and not yet removed
}

// add adds c, unless the set was closed; whoever serves c removes it when
// it is done with it.
func (s *connSet) add(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.conns == nil {
		s.conns = make(map[net.Conn]bool)
	}
	s.conns[c] = true
	s.live.Add(1)
	return true
}

func (s *connSet) remove(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns[c] {
		delete(s.conns, c)
		s.live.Done()
	}
}

// closeAll closes the connections, takes no more, and returns once every
// one is removed: their goroutines are out of the broker (mochi's
// EstablishConnection), which goes on to stop its hooks when the
// listeners have closed, and must not be read by a connection still
// being taken then (a data race the race detector found).
func (s *connSet) closeAll() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.live.Wait()
}

// maxRateAddrs bounds the addresses addrRates keeps a bucket for: when
// they are all in use, the others share one.
const maxRateAddrs = 4096

// addrRates are token buckets, one an address, of rate tokens a second and
// room for twice as many: the connections an address may open.
type addrRates struct {
	rate    float64
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newAddrRates(rate int) *addrRates {
	return &addrRates{rate: float64(rate), buckets: make(map[string]*bucket)}
}

// allow takes a token from addr's bucket, reporting whether there was one.
func (r *addrRates) allow(addr string, now time.Time) bool {
	burst := 2 * r.rate
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buckets[addr]
	if b == nil {
		if len(r.buckets) >= maxRateAddrs {
			r.dropFullLocked(now, burst)
		}
		if len(r.buckets) >= maxRateAddrs {
			addr = otherAddresses
			b = r.buckets[addr]
		}
		if b == nil {
			b = &bucket{tokens: burst, at: now}
			r.buckets[addr] = b
		}
	}
	if now.After(b.at) {
		b.tokens = min(burst, b.tokens+now.Sub(b.at).Seconds()*r.rate)
		b.at = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// dropFullLocked forgets the buckets that have filled up again: their
// addresses are as new.
func (r *addrRates) dropFullLocked(now time.Time, burst float64) {
	for addr, b := range r.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*r.rate >= burst {
			delete(r.buckets, addr)
		}
	}
}

// isAgent reports whether cl is one of the agent's own clients.
func isAgent(cl *mqtt.Client) bool { return cl.Net.Listener == agentListener }

// Large packets, those over largePacket, are received on a budget
// (receiving) of receivingBudget bytes, all clients' together: a client
// that announces one when the budget is spent loses its connection, and
// has largePacketTime to send it whole. mochi takes room for a packet as
// soon as it reads its length, so that without a budget a hundred
// clients each sending a megabyte slowly would hold a hundred megabytes.
const (
	largePacket     = 64 << 10
	receivingBudget = 8 << 20
	largePacketTime = 30 * time.Second
)

// receiving is the budget of large packets being received.
type receiving struct {
	mu   sync.Mutex
	left int64
}

func (r *receiving) take(n int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n > r.left {
		return false
	}
	r.left -= n
	return true
}

func (r *receiving) give(n int64) {
	r.mu.Lock()
	r.left += n
	r.mu.Unlock()
}

// errNoRoom ends a client's connection that announced a large packet when
// the budget of large packets was spent.
var errNoRoom = errors.New("no room for a large packet: other clients are sending theirs")

// writeStall is how long a client of an embedded broker may take nothing
// of what the broker writes to it: then it loses its connection (as a
// slow consumer of nats-server does). mochi holds a client's lock while it
// writes to it, and takes it for every QoS 1 delivery to it: a client
// that never reads would stop every publisher to its topics, the agent's
// deliveries behind them, for good.
const writeStall = 5 * time.Second

// errWriteStall ends the connection of a client that read nothing for
// writeStall.
var errWriteStall = errors.New("the client read nothing of what the broker wrote")

// meteredConn is a client's connection to an embedded broker, which
// follows the MQTT packets as mochi reads them (their fixed headers) and
// takes room in a receiving budget for each large one until it is read;
// and which closes when a write makes no progress for writeStall.
type meteredConn struct {
	net.Conn
	budget  *receiving
	times   listenTimes
	stalled func() // called when a write stalled, before the connection closes

	// Read's alone:
	head   bool  // in a fixed header, after its first byte
	length int64 // the remaining length, as far as read
	shift  uint  // of the next byte of the remaining length
	left   int64 // bytes of the packet's body not yet read

	mu     sync.Mutex
	held   int64 // budget held for the packet
	closed bool
}

func (c *meteredConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if ferr := c.follow(p[:n]); ferr != nil {
		return 0, ferr
	}
	return n, err
}

// follow follows the packets through b, the next bytes read.
func (c *meteredConn) follow(b []byte) error {
	for len(b) > 0 {
		switch {
		case c.left > 0:
			k := min(int64(len(b)), c.left)
			c.left -= k
			b = b[k:]
			if c.left == 0 {
				c.release()
			}
		case !c.head: // a packet's first byte
			c.head, c.length, c.shift = true, 0, 0
			b = b[1:]
		default: // its remaining length, 7 bits a byte
			v := b[0]
			b = b[1:]
			c.length |= int64(v&0x7f) << c.shift
			c.shift += 7
			if v&0x80 != 0 && c.shift < 28 {
				continue
			}
			c.head, c.left = false, c.length // mochi refuses a malformed length
			if c.left > largePacket {
				if err := c.hold(c.left); err != nil {
					return err
				}
				c.Conn.SetReadDeadline(time.Now().Add(c.times.largePacket))
			}
		}
	}
	return nil
}

// Write writes b, closing the connection if it makes no progress for
// writeStall.
func (c *meteredConn) Write(b []byte) (int, error) {
	written := 0
	for {
		c.Conn.SetWriteDeadline(time.Now().Add(c.times.writeStall))
		n, err := c.Conn.Write(b[written:])
		written += n
		var ne net.Error
		switch {
		case err == nil:
			return written, nil
		case errors.As(err, &ne) && ne.Timeout() && n > 0:
			continue // slow, not stalled
		case errors.As(err, &ne) && ne.Timeout():
			c.stalled()
			c.Close()
			return written, errWriteStall
		}
		return written, err
	}
}

// hold takes n bytes of the budget for the packet being read.
func (c *meteredConn) hold(n int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return net.ErrClosed
	case !c.budget.take(n):
		return errNoRoom
	}
	c.held = n
	return nil
}

func (c *meteredConn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.budget.give(c.held)
	c.held = 0
}

func (c *meteredConn) Close() error {
	err := c.Conn.Close()
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.release()
	return err
}
