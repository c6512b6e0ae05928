package mqttio

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"golang.org/x/net/proxy"
)

// dial opens a client's connection to the broker at uri as paho would
// (openConnection in its netconn.go: TCP, TLS with the options' TLS
// configuration, WebSocket, a Unix socket; through a proxy the
// environment names), buffered both ways (bufferedConn).
//
// With maxPayload above 0, a PUBLISH from the broker whose payload is
// longer is cut to maxPayload+1 bytes on the way in (publishLimiter).
func dial(uri *url.URL, o paho.ClientOptions, maxPayload int) (net.Conn, error) {
	d := o.Dialer
	if d == nil {
		d = &net.Dialer{Timeout: o.ConnectTimeout}
	}
	var conn net.Conn
	var err error
	switch uri.Scheme {
	case "tcp", "mqtt":
		conn, err = proxy.FromEnvironmentUsing(d).Dial("tcp", uri.Host)
	case "ssl", "tls", "mqtts", "mqtt+ssl", "tcps":
		if conn, err = proxy.FromEnvironmentUsing(d).Dial("tcp", uri.Host); err != nil {
			break
		}
		cfg := &tls.Config{}
		if o.TLSConfig != nil {
			cfg = o.TLSConfig.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = uri.Hostname()
		}
		tc := tls.Client(Quiet(conn), cfg)
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if o.ConnectTimeout > 0 {
			ctx, cancel = context.WithTimeout(ctx, o.ConnectTimeout)
		}
		err = tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			conn.Close()
		}
		conn = tc
	case "ws", "wss":
		u := *uri
		u.User = nil // the WebSocket library refuses URLs with credentials
		var tc *tls.Config
		if uri.Scheme == "wss" {
			tc = o.TLSConfig
		}
		conn, err = paho.NewWebsocket(u.String(), tc, o.ConnectTimeout, o.HTTPHeaders, o.WebsocketOptions)
	case "unix":
		path := uri.Host
		if path == "" {
			path = uri.Path
		}
		conn, err = d.Dial("unix", path)
	default:
		return nil, fmt.Errorf("broker URL %s: unknown scheme %q", uri.Redacted(), uri.Scheme)
	}
	if err != nil {
		return nil, err
	}
	return newBufferedConn(conn, maxPayload), nil
}

// The broker URL schemes dial speaks, as paho's openConnection does; those
// of tlsSchemes use the client's TLS settings (CA, certificate).
var (
	brokerSchemes = []string{"tcp", "mqtt", "ssl", "tls", "mqtts", "mqtt+ssl", "tcps", "ws", "wss", "unix"}
	tlsSchemes    = []string{"ssl", "tls", "mqtts", "mqtt+ssl", "tcps", "wss"}
)

// CheckBrokerURL finds what would keep dial from reaching the broker at
// raw: no scheme (paho would guess tcp://, also for a broker that speaks
// only TLS), a scheme dial does not speak, no host, or no port where TCP
// needs one (paho adds none: tcp://host fails with "missing port in
// address"; WebSocket URLs default to 80 and 443). It reports whether the
// URL speaks TLS. Its errors show the URL without a password.
func CheckBrokerURL(raw string) (usesTLS bool, err error) {
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok || scheme == "" {
		if !strings.ContainsAny(raw, "/@") && raw != "" {
			hostPort := raw
			if _, _, err := net.SplitHostPort(raw); err != nil {
				hostPort = net.JoinHostPort(raw, "1883")
			}
			return false, fmt.Errorf("URL %q has no scheme: write tcp://%s (or ssl:// for TLS)", raw, hostPort)
		}
		return false, fmt.Errorf("URL %q has no scheme: write one such as tcp://broker.example:1883", redactURL(raw))
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a password
		}
		return false, fmt.Errorf("URL %q: %v", redactURL(raw), err)
	}
	shown := u.Redacted()
	if !slices.Contains(brokerSchemes, u.Scheme) {
		return false, fmt.Errorf("URL %q: scheme %q is none of %s", shown, u.Scheme, strings.Join(brokerSchemes, ", "))
	}
	usesTLS = slices.Contains(tlsSchemes, u.Scheme)
	port := "1883"
	if usesTLS {
		port = "8883"
	}
	switch {
	case u.Scheme == "unix":
		if u.Host == "" && u.Path == "" {
			return false, fmt.Errorf("URL %q names no socket: write unix:///path/to/socket", shown)
		}
		return false, nil
	case u.Hostname() == "":
		return usesTLS, fmt.Errorf("URL %q names no host: write %s://HOST:%s", shown, u.Scheme, cmp.Or(u.Port(), port))
	case u.Port() == "" && u.Scheme != "ws" && u.Scheme != "wss":
		return usesTLS, fmt.Errorf("URL %q has no port: write %s://%s", shown, u.Scheme, net.JoinHostPort(u.Hostname(), port))
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return usesTLS, fmt.Errorf("URL %q: port %s is outside 1..65535", shown, p)
		}
	}
	return usesTLS, nil
}

// redactURL is raw without the password of its user info, if any, also
// when it does not parse.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Redacted()
	}
	return userInfo.ReplaceAllString(raw, "$1:xxxxx@")
}

var userInfo = regexp.MustCompile(`^((?:[^:/?#@]*://)?[^:/?#@]*):[^/?#@]*@`)

// maxUnsent bounds the bytes a bufferedConn holds before a Write waits.
const maxUnsent = 256 << 10

// bufferedConn is a connection read through a buffer and written through
// a goroutine that sends whatever was written since its last send. paho
// reads every packet a few bytes at a time (its fixed header a byte at a
// time) and writes every packet on its own (a PUBACK of 4 bytes, a
// publish in two writes), each a system call on a bare connection; a
// group commit acknowledges its messages in one burst, now sent in a
// write or a few. A failed send closes the connection and fails the
// reads and writes after it, with its error: paho takes that for a lost
// connection.
type bufferedConn struct {
	net.Conn
	r io.Reader // buffered, and through a publishLimiter if one is set

	mu      sync.Mutex
	cond    *sync.Cond // the buffer or the state changed
	buf     []byte     // written, not sent
	spare   []byte
	err     error
	closed  bool
	flushed chan struct{} // closed when the sender has ended
}

func newBufferedConn(conn net.Conn, maxPayload int) *bufferedConn {
	conn = Quiet(conn)
	br := bufio.NewReaderSize(conn, 16<<10)
	c := &bufferedConn{Conn: conn, r: br, flushed: make(chan struct{})}
	if maxPayload > 0 {
		c.r = newPublishLimiter(br, maxPayload)
	}
	c.cond = sync.NewCond(&c.mu)
	go c.send()
	return c
}

// Read reads through the buffer; once a send has failed, it fails too,
// with the send's error, so that paho, whose reader takes a closed
// connection for its own doing and says nothing, learns of the loss at
// once and not at its next write.
func (c *bufferedConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil {
		c.mu.Lock()
		if c.err != nil {
			err = c.err
		}
		c.mu.Unlock()
	}
	return n, err
}

// Write buffers p for the sender, waiting while maxUnsent bytes wait.
func (c *bufferedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.buf) >= maxUnsent && c.err == nil && !c.closed {
		c.cond.Wait()
	}
	switch {
	case c.err != nil:
		return 0, c.err
	case c.closed:
		return 0, net.ErrClosed
	}
	c.buf = append(c.buf, p...)
	c.cond.Broadcast()
	return len(p), nil
}

// send sends what was written, until the connection is closed and all is
// sent, or a send fails.
func (c *bufferedConn) send() {
	defer close(c.flushed)
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for len(c.buf) == 0 && !c.closed && c.err == nil {
			c.cond.Wait()
		}
		if len(c.buf) == 0 || c.err != nil {
			return
		}
		out := c.buf
		c.buf, c.spare = c.spare[:0], nil
		c.mu.Unlock()
		_, err := c.Conn.Write(out)
		c.mu.Lock()
		c.spare = out[:0]
		if err != nil {
			c.err = err
			c.Conn.Close()
		}
		c.cond.Broadcast()
	}
}

// Close sends what was written (waiting a second at most), then closes.
func (c *bufferedConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.cond.Broadcast()
	c.mu.Unlock()
	select {
	case <-c.flushed:
	case <-time.After(time.Second):
	}
	return c.Conn.Close()
}
