package mqttio

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/cairn-edge/cairn/internal/testwait"
)

// TestBrokerLogKeepsPacketsOut: the embedded broker's records never dump a
// packet (its payload or authentication data), and a client gone while the
// broker wrote to it is logged at debug, not as a warning.
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
// over EmbeddedMaxPacket loses its connection before the broker reads
// it; one under the limit is delivered.
func TestEmbeddedBrokerRefusesHugePackets(t *testing.T) {
	b, err := StartBroker(BrokerConfig{Addr: "127.0.0.1:0", AllowAnonymous: true}, slog.New(slog.DiscardHandler))
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
	c.Publish("big/ok", 1, false, make([]byte, EmbeddedMaxPacket-100)).WaitTimeout(10 * time.Second)
	if n := <-got; n != EmbeddedMaxPacket-100 {
		t.Fatalf("delivered %d bytes, want %d", n, EmbeddedMaxPacket-100)
	}
	c.Publish("big/huge", 1, false, make([]byte, 4*EmbeddedMaxPacket))
	testwait.Recv(t, lost, 10*time.Second, "the client that sent a packet over the limit to be disconnected")
}

// TestEmbeddedBrokerLetsInWhomItShould: users with their passwords, the
// agent's own credentials, anonymous clients only when allowed; and no
// one but the agent under the agent's client ids.
func TestEmbeddedBrokerLetsInWhomItShould(t *testing.T) {
	for _, anonymous := range []bool{false, true} {
		b, err := StartBroker(BrokerConfig{Addr: "127.0.0.1:0", Users: map[string]string{"dev1": "pw1"}, AllowAnonymous: anonymous,
			OwnClientIDs: "cairn-gw-"}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		ownUser, ownPassword := b.Credentials()
		for _, c := range []struct {
			id, user, password string
			want               bool
		}{
			{"device", "dev1", "pw1", true},
			{"device", "dev1", "wrong", false},
			{"device", "nobody", "pw1", false},
			{"device", "", "", anonymous},
			{"cairn-gw-readings-0", "dev1", "pw1", false}, // a user taking over the agent's session
			{"cairn-gw-readings-0", "", "", false},
			{"cairn-gw-readings-0", ownUser, ownPassword, true},
			{"other", ownUser, "guess", false},
		} {
			o := paho.NewClientOptions().AddBroker(b.URL()).SetClientID(c.id).SetUsername(c.user).SetPassword(c.password).
				SetConnectRetry(false).SetAutoReconnect(false)
			cl := paho.NewClient(o)
			tok := cl.Connect()
			if !tok.WaitTimeout(10 * time.Second) {
				t.Fatalf("%+v: no answer", c)
			}
			if got := tok.Error() == nil; got != c.want {
				t.Errorf("anonymous allowed %v, client %s as %q/%q: connected %v (%v), want %v", anonymous, c.id, c.user, c.password, got, tok.Error(), c.want)
			}
			cl.Disconnect(0)
		}
		b.Close()
	}
}
