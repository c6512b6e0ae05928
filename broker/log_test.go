package broker

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// TestBrokerLogKeepsPacketsOut: the embedded broker's records never dump a
// packet (its payload or authentication data), a client gone while the
// broker wrote to it is logged at debug, not as a warning, and a publish
// the ingress holds is not logged.
func TestBrokerLogKeepsPacketsOut(t *testing.T) {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish}, Payload: []byte("reading-of-gw-7"),
		Properties: packets.Properties{AuthenticationData: []byte("auth-secret")}}
	gone := fmt.Errorf("write tcp 127.0.0.1:1->127.0.0.1:2: %w", syscall.EPIPE)
	logAll := func(level slog.Level) string {
		var buf bytes.Buffer
		log := slog.New(brokerLog{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level})})
		log.Warn("error processing packet", "error", gone, "client", "c1", "pk", pk)
		log.Warn("", "error", gone)
		log.Warn("packet ids exhausted", "error", errors.New("no ids left"), "client", "c2", "packet", &pk)
		log.Debug(heldMessage, "error", packets.ErrRejectPacket, "hook", ingressID, "packet", pk) // each publish held
		return buf.String()
	}

	info := logAll(slog.LevelInfo)
	if strings.Count(info, "\n") != 1 || !strings.Contains(info, `level=WARN msg="packet ids exhausted"`) || !strings.Contains(info, "packet=Publish") {
		t.Fatalf("at info, want only the warning that is one, its packet by type:\n%s", info)
	}
	debug := logAll(slog.LevelDebug)
	for _, want := range []string{`level=DEBUG msg="error processing packet"`, "pk=Publish", `level=DEBUG msg="client connection ended"`} {
		if !strings.Contains(debug, want) {
			t.Errorf("at debug, the log lacks %q:\n%s", want, debug)
		}
	}
	if strings.Contains(debug, heldMessage) {
		t.Errorf("at debug, a publish held is logged:\n%s", debug)
	}
	for _, secret := range []string{"reading-of-gw-7", "auth-secret"} {
		if strings.Contains(info+debug, secret) {
			t.Fatalf("a packet's content is in the log:\n%s", debug)
		}
	}
	if logAll(slog.LevelError) != "" {
		t.Fatal("at error level, warnings were logged")
	}
}

// TestEmbeddedBrokerRefusesHugePackets: a client that announces a packet
// over MaxPacket loses its connection before the broker reads
// it; one under the limit is delivered.
func TestEmbeddedBrokerRefusesHugePackets(t *testing.T) {
	b, err := Start(Config{Addr: "127.0.0.1:0", AllowAnonymous: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	lost := make(chan error, 1)
	c := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("huge").SetAutoReconnect(false).
		SetConnectionLostHandler(func(_ paho.Client, err error) { lost <- err }))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(0)
	got := make(chan int, 1)
	if tok := c.Subscribe("big/#", 1, func(_ paho.Client, m paho.Message) { got <- len(m.Payload()) }); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	c.Publish("big/ok", 1, false, make([]byte, MaxPacket-100)).WaitTimeout(10 * time.Second)
	if n := <-got; n != MaxPacket-100 {
		t.Fatalf("delivered %d bytes, want %d", n, MaxPacket-100)
	}
	c.Publish("big/huge", 1, false, make([]byte, 4*MaxPacket))
	testwait.Recv(t, lost, 10*time.Second, "the client that sent a packet over the limit to be disconnected")
}

// TestEmbeddedBrokerLetsInWhomItShould: users with their passwords, the
// agent's own credentials on the agent's socket only, anonymous clients
// only when allowed; and no one but the agent under the agent's client
// ids.
func TestEmbeddedBrokerLetsInWhomItShould(t *testing.T) {
	for _, anonymous := range []bool{false, true} {
		b, err := Start(Config{Addr: "127.0.0.1:0", Users: map[string]string{"dev1": "pw1"}, AllowAnonymous: anonymous,
			OwnClientIDs: "cairn-gw-"}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		ownUser, ownPassword := b.Credentials()
		for _, c := range []struct {
			id, user, password string
			agent              bool // through DialAgent
			want               bool
		}{
			{"device", "dev1", "pw1", false, true},
			{"device", "dev1", "wrong", false, false},
			{"device", "nobody", "pw1", false, false},
			{"device", "", "", false, anonymous},
			{"cairn-gw-readings-0", "dev1", "pw1", false, false}, // a user taking over the agent's session
			{"cairn-gw-readings-0", "", "", false, false},
			{"cairn-gw-readings-0", ownUser, ownPassword, true, true},
			{"cairn-gw-readings-0", ownUser, ownPassword, false, false}, // the agent's credentials, from elsewhere
			{"other", ownUser, "guess", true, false},
			{"other", "dev1", "pw1", true, false}, // the agent's socket is the agent's
		} {
			o := paho.NewClientOptions().AddBroker(b.URL()).SetClientID(c.id).SetUsername(c.user).SetPassword(c.password).
				SetConnectRetry(false).SetAutoReconnect(false)
			if c.agent {
				o.SetCustomOpenConnectionFn(func(*url.URL, paho.ClientOptions) (net.Conn, error) { return b.DialAgent() })
			}
			cl := paho.NewClient(o)
			tok := cl.Connect()
			if !tok.WaitTimeout(10 * time.Second) {
				t.Fatalf("%+v: no answer", c)
			}
			if got := tok.Error() == nil; got != c.want {
				t.Errorf("anonymous allowed %v, client %s as %q/%q (agent's socket %v): connected %v (%v), want %v", anonymous, c.id, c.user, c.password, c.agent, got, tok.Error(), c.want)
			}
			cl.Disconnect(0)
			testwait.For(t, 10*time.Second, c.id+"'s session ended", func() bool { _, ok := b.srv.Clients.Get(c.id); return !ok })
		}
		b.Close()
	}
}

// TestRefusalsLog: the first refusal of a kind from an address is a line
// at once; the next ones wait for the interval and come as one line with
// their number, also when no refusal follows; each address and kind has
// lines of its own, up to maxRefusalKeys of them, the rest together;
// close writes what is counted.
func TestRefusalsLog(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	lines := func() string {
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
	r := newRefusals(log, 200*time.Millisecond)
	for i := range 1000 {
		r.note(slog.LevelWarn, "192.0.2.7:4711", "failed login", 1, slog.String("user", fmt.Sprint("u", i)))
	}
	r.note(slog.LevelError, "[2001:db8::1]:1883", "dropped", 3)
	if got := lines(); got != "level=WARN msg=\"failed login\" remote=192.0.2.7 count=1 user=u0\nlevel=ERROR msg=dropped remote=2001:db8::1 count=3\n" {
		t.Fatalf("at once:\n%s", got)
	}
	testwait.For(t, 10*time.Second, "the count of the others", func() bool {
		return strings.Contains(lines(), "level=WARN msg=\"failed login\" remote=192.0.2.7 count=999 user=u999\n")
	})
	if n := strings.Count(lines(), "\n"); n != 3 {
		t.Fatalf("%d lines:\n%s", n, lines())
	}
	for i := range maxRefusalKeys + 10 {
		r.note(slog.LevelWarn, fmt.Sprintf("10.0.%d.%d:1", i/256, i%256), "flood", 1)
	}
	r.note(slog.LevelWarn, "10.9.9.9:1", "flood", 1)
	r.close()
	got := lines()
	if !strings.Contains(got, "msg=flood remote=other count=") || strings.Count(got, "msg=flood") > maxRefusalKeys+2 {
		t.Fatalf("a flood of addresses: %d lines, the last %q", strings.Count(got, "msg=flood"), got[strings.LastIndex(got[:len(got)-1], "\n")+1:])
	}
	r.mu.Lock()
	keys := len(r.counts)
	r.mu.Unlock()
	if keys > maxRefusalKeys+1 {
		t.Fatalf("%d counts kept", keys)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestClientText: what a client says of itself is shown cut at 64 bytes,
// on a character, and valid UTF-8.
func TestClientText(t *testing.T) {
	for in, want := range map[string]string{
		"dev1":                      "dev1",
		strings.Repeat("é", 40):     strings.Repeat("é", 32) + "…",
		"a\xffb":                    "a\uFFFDb",
		strings.Repeat("x", 64):     strings.Repeat("x", 64),
		strings.Repeat("x", 65):     strings.Repeat("x", 64) + "…",
		"line\nbreak\x00and\x1bnul": "line\nbreak\x00and\x1bnul",
	} {
		if got := clientText(in); got != want {
			t.Errorf("clientText(%q) = %q, want %q", in, got, want)
		}
	}
}
