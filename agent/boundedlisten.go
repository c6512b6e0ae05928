package agent

import (
	"context"
	"net"
	"net/http"
	"sync"
)

// boundedListener is a listener that holds at most max connections and
// never makes a new one wait behind them: when it holds max, the new
// connection displaces one that is waiting for a request (still sending
// its header, or idle between requests), the longest held of the remote
// host that holds the most such. A connection whose request is being
// served is never displaced; when every one is, the new connection is
// closed as it is accepted.
//
// So a flood of connections that send nothing, or a header a byte at a
// time, displaces its own connections first, and an authorised caller
// that sends its request at once is served: from another host whatever
// the flood, from the flood's own host (loopback) as long as the flood
// opens fewer than max connections in the time the caller takes to send
// its header. Its server must mark what it serves (served) and hand the
// connection to the handler's context (withConn).
type boundedListener struct {
	net.Listener
	max int

	mu   sync.Mutex
	held []*boundedConn // in the order accepted
}

// boundedConn is a connection a boundedListener holds.
type boundedConn struct {
	net.Conn
	l    *boundedListener
	host string // the remote address without its port; "" on a unix socket
	// serving says a request of the connection's is in the handler;
	// guarded by l.mu.
	serving bool
}

// Accept returns the next connection the listener holds, closing those
// it cannot.
func (l *boundedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		bc := &boundedConn{Conn: c, l: l, host: remoteHost(c)}
		displaced, ok := l.admit(bc)
		if displaced != nil {
			displaced.Conn.Close() // its server sees the read fail and lets it go
		}
		if ok {
			return bc, nil
		}
		c.Close() // every connection held is being served
	}
}

// admit holds c, and returns the connection it displaced if the listener
// was full, or false if it was full of connections being served.
func (l *boundedListener) admit(c *boundedConn) (displaced *boundedConn, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.held) >= l.max {
		if displaced = l.displaceable(); displaced == nil {
			return nil, false
		}
		l.release(displaced)
	}
	l.held = append(l.held, c)
	return displaced, true
}

// displaceable returns the connection a new one displaces: of the host
// that holds the most connections not being served, the one it holds
// longest; nil if every connection is being served. l.mu is held.
func (l *boundedListener) displaceable() *boundedConn {
	waiting := make(map[string]int, 1)
	for _, c := range l.held {
		if !c.serving {
			waiting[c.host]++
		}
	}
	var d *boundedConn
	for _, c := range l.held { // the longest held first
		if !c.serving && (d == nil || waiting[c.host] > waiting[d.host]) {
			d = c
		}
	}
	return d
}

// release stops holding c, if the listener holds it. l.mu is held.
func (l *boundedListener) release(c *boundedConn) {
	for i, h := range l.held {
		if h == c {
			l.held = append(l.held[:i], l.held[i+1:]...)
			return
		}
	}
}

// Close closes the connection and stops holding it.
func (c *boundedConn) Close() error {
	c.l.mu.Lock()
	c.l.release(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// remoteHost is c's remote address without its port: the host it comes
// from. A unix socket's callers are all "".
func remoteHost(c net.Conn) string {
	a := c.RemoteAddr()
	if a == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// connKey is the key of the boundedConn in a request's context.
type connKey struct{}

// withConn is an http.Server's ConnContext for a boundedListener's
// connections: it hands the connection to its requests' handler, which
// served marks.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// served returns h marking a request's connection as served while h
// serves it, so that no new connection displaces it.
func served(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*boundedConn); ok {
			c.setServing(true)
			defer c.setServing(false)
		}
		h.ServeHTTP(w, r)
	})
}

func (c *boundedConn) setServing(serving bool) {
	c.l.mu.Lock()
	c.serving = serving
	c.l.mu.Unlock()
}
