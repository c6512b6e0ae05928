package broker

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/cairn-edge/cairn/internal/testing/mqttraw"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// startTimedBroker starts a broker with lim and the listener's times.
func startTimedBroker(t *testing.T, lim Limits, times listenTimes) (*Server, string) {
	t.Helper()
	b, err := Start(Config{Addr: "127.0.0.1:0", AllowAnonymous: true, Limits: lim, times: times}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, strings.TrimPrefix(b.URL(), "tcp://")
}

// closedUnanswered reports whether the broker closes c, which sent
// nothing or a CONNECT, without an answer, within 10 s.
func closedUnanswered(t *testing.T, c net.Conn) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return n == 0
}

func dialRaw(t *testing.T, addr string) *mqttraw.Conn {
	t.Helper()
	c, err := mqttraw.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestEmbeddedBrokerConnectionLimits: over max_clients connections at
// once, a connection is closed as it is accepted, and under again one is
// let in; a client that sends no CONNECT loses its connection after the
// connect timeout; a new session over max_clients or
// max_sessions_per_address ends the session offline longest, or, with
// none offline, is refused, an existing one is not; an address connects max_connection_rate
// times a second in bursts of twice that, then it is refused until its
// bucket fills again.
func TestEmbeddedBrokerConnectionLimits(t *testing.T) {
	t.Run("connections", func(t *testing.T) {
		_, addr := startTimedBroker(t, Limits{MaxClients: 3}, listenTimes{connect: time.Hour, largePacket: time.Hour, writeStall: time.Hour})
		var held []*mqttraw.Conn
		for range 3 {
			held = append(held, dialRaw(t, addr))
		}
		if !closedUnanswered(t, dialRaw(t, addr)) {
			t.Fatal("a fourth connection was kept")
		}
		held[0].Close()
		testwait.For(t, 10*time.Second, "a connection let in once one closed", func() bool {
			code, err := dialRaw(t, addr).Connect(mqttraw.Session{ID: "after", Clean: true})
			return err == nil && code == 0
		})
	})
	t.Run("connect timeout", func(t *testing.T) {
		_, addr := startTimedBroker(t, Limits{}, listenTimes{connect: 100 * time.Millisecond, largePacket: time.Hour, writeStall: time.Hour})
		if !closedUnanswered(t, dialRaw(t, addr)) {
			t.Fatal("a connection without CONNECT was kept for 10 s")
		}
	})
	for _, c := range []struct {
		name string
		lim  Limits
		// refusal is how a sixth session, with none offline, is refused:
		// over max_clients, with every session connected, its connection
		// is closed as it is accepted (so a CONNACK 3 over max_clients
		// comes only when the session offline longest cannot be ended,
		// taken over at that instant); over max_sessions_per_address,
		// with room for connections, its CONNECT gets CONNACK 3.
		refusal string
		code    byte
	}{
		{"max_clients", Limits{MaxClients: 3}, "embedded broker refused a connection: max_clients connected", 255},
		{"max_sessions_per_address", Limits{MaxClients: 10, MaxSessionsPerAddress: 3},
			"embedded broker refused a client's CONNECT: a new session over max_sessions_per_address", packets.Err3ServerUnavailable.Code},
	} {
		t.Run("sessions over "+c.name, func(t *testing.T) {
			b, addr := startTimedBroker(t, c.lim, defaultListenTimes)
			connect := func(id string) (*mqttraw.Conn, byte) {
				c := dialRaw(t, addr)
				code, err := c.Connect(mqttraw.Session{ID: id})
				if err != nil {
					return c, 255 // closed as it was accepted: max_clients connections
				}
				return c, code
			}
			// s1 and s2 go offline, s1 first; s3 stays.
			for _, id := range []string{"s1", "s2", "s3"} {
				conn, code := connect(id)
				if code != 0 {
					t.Fatalf("%s: CONNACK %d", id, code)
				}
				if id != "s3" {
					conn.Close()
					awaitOffline(t, b, id)
				}
			}
			// A fourth session ends the one offline longest, a fifth the
			// other; a sixth, with none offline, is refused.
			var last *mqttraw.Conn
			for _, s := range []struct{ id, ends string }{{"s4", "s1"}, {"s5", "s2"}} {
				var code byte
				if last, code = connect(s.id); code != 0 {
					t.Fatalf("%s: CONNACK %d, want 0, ending %s", s.id, code, s.ends)
				}
				if _, ok := b.srv.Clients.Get(s.ends); ok {
					t.Fatalf("%s is a session still after %s's", s.ends, s.id)
				}
			}
			if _, code := connect("s6"); code != c.code {
				t.Fatalf("a sixth session, none offline: CONNACK %d, want %d (255: closed unanswered)", code, c.code)
			}
			testwait.For(t, 10*time.Second, "the sixth counted as refused: "+c.refusal, func() bool { return b.Refusals()[c.refusal] == 1 })
			if n := b.EndedSessions()["for a new session over "+c.name]; n != 2 {
				t.Errorf("sessions ended for new ones over %s: %d, want 2", c.name, n)
			}
			last.Close() // a connection free, for max_clients
			testwait.For(t, 10*time.Second, "s5 back, once its connection is gone", func() bool {
				_, code := connect("s5")
				return code == 0
			})
		})
	}
	t.Run("rate", func(t *testing.T) {
		b, addr := startTimedBroker(t, Limits{MaxConnectionRate: 2}, defaultListenTimes)
		b.clients.rates.mu.Lock()
		b.clients.rates.buckets["127.0.0.1"] = &bucket{tokens: 4, at: time.Now().Add(time.Hour)} // no refill for an hour
		b.clients.rates.mu.Unlock()
		for i := range 4 {
			if code, err := dialRaw(t, addr).Connect(mqttraw.Session{ID: "r", Clean: true}); err != nil || code != 0 {
				t.Fatalf("connection %d of a burst of 4: CONNACK %d, %v", i, code, err)
			}
		}
		if !closedUnanswered(t, dialRaw(t, addr)) {
			t.Fatal("a fifth connection in the burst was kept")
		}
	})
}

// TestAddrRates: a bucket holds twice the rate, refills at the rate, and
// addresses beyond maxRateAddrs share one.
func TestAddrRates(t *testing.T) {
	r := newAddrRates(5)
	now := time.Now()
	n := 0
	for r.allow("a", now) {
		n++
	}
	if n != 10 {
		t.Fatalf("a burst of %d, want 10", n)
	}
	if r.allow("a", now.Add(100*time.Millisecond)) {
		t.Fatal("a token within 100 ms at 5 a second")
	}
	if !r.allow("a", now.Add(200*time.Millisecond)) || !r.allow("b", now) {
		t.Fatal("no token after 200 ms, or for another address")
	}
	for i := range maxRateAddrs {
		r.allow(string(rune(i+1000)), now)
	}
	if len(r.buckets) > maxRateAddrs+1 {
		t.Fatalf("%d buckets", len(r.buckets))
	}
	for r.allow("new-"+string(rune(n)), now) {
		n++ // every new address draws from the shared bucket
	}
	if len(r.buckets) > maxRateAddrs+1 {
		t.Fatalf("%d buckets", len(r.buckets))
	}
}

// TestEmbeddedBrokerLargePackets: packets over largePacket are received on
// a budget of receivingBudget bytes: a client announcing one beyond loses
// its connection; one that does not send its packet whole within the
// time given loses its own, and frees the budget.
func TestEmbeddedBrokerLargePackets(t *testing.T) {
	_, addr := startTimedBroker(t, Limits{}, listenTimes{connect: time.Hour, largePacket: 500 * time.Millisecond, writeStall: time.Hour})
	const size = 1_000_000
	announce := func() *mqttraw.Conn {
		c := dialRaw(t, addr)
		if code, err := c.Connect(mqttraw.Session{ID: "", Clean: true}); err != nil || code != 0 {
			t.Fatalf("CONNACK %d, %v", code, err)
		}
		// A PUBLISH of QoS 0 whose remaining length is size, and its first
		// bytes.
		head := []byte{0x30, 0xC0, 0x84, 0x3D, 0, 1, 'x'} // 1,000,000 = 0x40 + 0x04<<7 + 0x3D<<14
		if _, err := c.Write(head); err != nil {
			t.Fatal(err)
		}
		return c
	}
	n := receivingBudget / size
	for range n {
		announce()
	}
	if !closedUnanswered(t, announce()) {
		t.Fatalf("a large packet beyond %d of them was taken", n)
	}
	// Those announced are cut off after the time given: the budget is
	// free again.
	testwait.For(t, 10*time.Second, "room for a large packet again", func() bool {
		c := announce()
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout() // kept
	})
	// A client that sends its large packet whole is served.
	c := dialRaw(t, addr)
	if code, err := c.Connect(mqttraw.Session{ID: "whole", Clean: true}); err != nil || code != 0 {
		t.Fatalf("CONNACK %d, %v", code, err)
	}
	testwait.For(t, 10*time.Second, "a whole large packet taken", func() bool {
		if err := c.Publish(1, "big", make([]byte, size), 1, false); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := c.ReadType(packets.Puback, false)
		return err == nil
	})
}

// TestMeteredConnFollowsPackets: the budget is held from a large packet's
// length to its last byte, however the bytes come.
func TestMeteredConnFollowsPackets(t *testing.T) {
	budget := &receiving{left: 3 << 20}
	conn, other := net.Pipe()
	defer other.Close()
	c := &meteredConn{Conn: conn, budget: budget, times: defaultListenTimes}
	packet := func(n int) []byte {
		var b bytes.Buffer
		b.WriteByte(0x30)
		for v := n; ; {
			d := byte(v & 0x7f)
			if v >>= 7; v > 0 {
				b.WriteByte(d | 0x80)
				continue
			}
			b.WriteByte(d)
			break
		}
		b.Write(make([]byte, n))
		return b.Bytes()
	}
	stream := append(append(append(packet(10), packet(2<<20)...), packet(127)...), packet(1<<20)...)
	held := []int64{}
	for len(stream) > 0 {
		k := min(len(stream), 1+len(stream)%4093)
		if err := c.follow(stream[:k]); err != nil {
			t.Fatal(err)
		}
		stream = stream[k:]
		held = append(held, c.held)
	}
	if budget.left != 3<<20 || c.held != 0 {
		t.Fatalf("after the packets, %d left of the budget, %d held", budget.left, c.held)
	}
	if !slices.Contains(held, 2<<20) || !slices.Contains(held, 1<<20) {
		t.Fatalf("the large packets were not held: %v", held[:min(len(held), 20)])
	}
	if err := c.follow(packet(4 << 20)[:5]); !errors.Is(err, errNoRoom) {
		t.Fatalf("a packet over the budget: %v", err)
	}
}

// TestEmbeddedBrokerWriteStall: a subscriber that reads nothing loses its
// connection once a write made no progress for writeStall, and holds up
// the publisher of its topic no longer than that: every message is
// acknowledged, and delivered to a subscriber that reads.
func TestEmbeddedBrokerWriteStall(t *testing.T) {
	b, addr := startTimedBroker(t, Limits{MaxQueuedMessages: 1000, MaxQueuedBytes: 64 << 20}, listenTimes{connect: time.Hour, largePacket: time.Hour, writeStall: 300 * time.Millisecond})
	stuck := dialRaw(t, addr)
	if code, err := stuck.Connect(mqttraw.Session{ID: "stuck"}); err != nil || code != 0 {
		t.Fatalf("CONNACK %d, %v", code, err)
	}
	if codes, err := stuck.SubscribeAck(1, 1, "w/#"); err != nil || len(codes) != 1 || codes[0] != 1 {
		t.Fatalf("SUBACK %v, %v", codes, err)
	}
	got := make(chan struct{}, 100)
	reader := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("reader"))
	if tok := reader.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	defer reader.Disconnect(0)
	if tok := reader.Subscribe("w/#", 1, func(paho.Client, paho.Message) { got <- struct{}{} }); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("pub"))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	defer pub.Disconnect(0)
	const n = 40
	for i := range n {
		if tok := pub.Publish("w/x", 1, false, make([]byte, 500_000)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("message %d not acknowledged within 10 s: %v", i, tok.Error())
		}
	}
	for range n {
		testwait.Recv(t, got, 10*time.Second, "the reader's messages")
	}
	stuck.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, stuck)
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the stuck subscriber's connection was kept")
	}
	if b.refer.counted()["embedded broker closed a client's connection: it read nothing"] != 1 {
		t.Fatalf("refused %v", b.refer.counted())
	}
}

// TestEmbeddedBrokerCloses: Close ends every connection, those that have
// not sent their CONNECT too (mochi waits for all of them: one left would
// hold the agent's stop), and takes no more.
func TestEmbeddedBrokerCloses(t *testing.T) {
	b, addr := startTimedBroker(t, Limits{}, listenTimes{connect: time.Hour, largePacket: time.Hour, writeStall: time.Hour})
	for range 5 {
		dialRaw(t, addr) // no CONNECT
	}
	c := dialRaw(t, addr)
	if code, err := c.Connect(mqttraw.Session{ID: "connected"}); err != nil || code != 0 {
		t.Fatalf("CONNACK %d, %v", code, err)
	}
	agent, err := b.DialAgent()
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	testwait.Recv(t, closed, 10*time.Second, "the broker to close")
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Fatal("a connection taken after Close")
	}
}

// TestEmbeddedBrokerClosesWhileClientsConnect: Close returns, and no
// data race is left behind (go test -race), while clients and the
// agent's own connections keep arriving as it closes: a connection the
// listener took just before Close is still being established in the
// broker (mochi's EstablishConnection), and Close waits for it to leave
// before the broker stops its hooks. Each of a few brokers closes once
// its dialers have been let in at least 20 times.
func TestEmbeddedBrokerClosesWhileClientsConnect(t *testing.T) {
	for round := range 5 {
		b, addr := startTimedBroker(t, Limits{}, listenTimes{connect: time.Hour, largePacket: time.Hour, writeStall: time.Hour})
		var admitted atomic.Int64
		stop := make(chan struct{})
		var dialers sync.WaitGroup
		for i := range 4 {
			dialers.Add(1)
			go func() {
				defer dialers.Done()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					if i == 0 { // the agent's side of the broker
						if c, err := b.DialAgent(); err == nil {
							admitted.Add(1)
							c.Close()
						}
						continue
					}
					c, err := mqttraw.Dial(addr)
					if err != nil {
						continue // closed: the broker is gone
					}
					if code, err := c.Connect(mqttraw.Session{ID: fmt.Sprintf("r%d-d%d-%d", round, i, n)}); err == nil && code == 0 {
						admitted.Add(1)
					}
					c.Close()
				}
			}()
		}
		testwait.For(t, 10*time.Second, "clients to be let in", func() bool { return admitted.Load() >= 20 })
		closed := make(chan error, 1)
		go func() { closed <- b.Close() }()
		testwait.Recv(t, closed, 10*time.Second, "the broker to close while clients connect")
		close(stop)
		dialers.Wait()
		if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			t.Fatalf("round %d: a connection taken after Close", round)
		}
	}
}
