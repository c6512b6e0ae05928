package mqttio

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/ingest"
	"github.com/cairn-edge/cairn/internal/testing/testlog"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// TestResumeGate: a client's gate shuts at every attempt to connect and
// opens only once paho has listed the packets it resends on the connection
// — what is published before is on that list, and paho sets its DUP flag
// while its writer may be sending it (a data race in paho). Through a real
// mosquitto restarted under the client, paho drives the gate, and the
// client publishes at QoS 1 again once it is open.
func TestResumeGate(t *testing.T) {
	g := newResumeGate()
	connecting := paho.ConnectionNotificationConnecting{}
	g.All() // paho at Connect, before its first attempt
	g.notify(nil, connecting)
	if g.open() {
		t.Fatal("open after an attempt to connect, before paho listed its store")
	}
	g.All()
	if !g.open() {
		t.Fatal("shut after paho listed its store")
	}
	g.notify(nil, connecting)
	if g.open() {
		t.Fatal("open after another attempt")
	}

	b := mosquittoBroker(t)
	cl, gate, err := ClientConfig{Broker: b.url, ClientID: "gate"}.connect("-0", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Disconnect(0)
	publish := func(what string) {
		t.Helper()
		if tok := cl.Publish("gate/t", 1, false, "x"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publishing %s: %v", what, tok.Error())
		}
	}
	// The gate's states, which no event tells, are polled.
	testwait.For(t, 30*time.Second, "the gate to open", func() bool { return cl.IsConnectionOpen() && gate.open() })
	publish("after connecting")
	first := gate.attempt.Load()
	b.restart()
	testwait.For(t, 30*time.Second, "paho's attempt to reconnect to reach the gate", func() bool { return gate.attempt.Load() > first })
	testwait.For(t, 30*time.Second, "the gate to open again", func() bool { return cl.IsConnectionOpen() && gate.open() })
	publish("after reconnecting")
}

// TestDeadLettersWaitForTheGate: a source publishes dead letters to their
// topic only while its client's gate is open; while it is shut (paho about
// to resend), it logs that they stay in the log file instead. Through a
// real mosquitto: the consumer hears only the letter sent with the gate
// open.
func TestDeadLettersWaitForTheGate(t *testing.T) {
	b := mosquittoBroker(t)
	heard := make(chan string, 4)
	consumer := client(t, b.url, "dead-consumer", true)
	defer consumer.Disconnect(0)
	if tok := consumer.Subscribe("dead/gate", 1, func(_ paho.Client, m paho.Message) {
		var dl ingest.DeadLetter
		json.Unmarshal(m.Payload(), &dl)
		heard <- dl.Reason
	}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	logged := new(testlog.Buffer) // paho's goroutines log too
	cfg := ClientConfig{Broker: b.url, ClientID: "dead-source", Logger: slog.New(slog.NewTextHandler(logged, nil))}
	s := &source{cfg: SourceConfig{Name: "src", Client: cfg, DeadLetterTopic: "dead/gate"}}
	var err error
	if s.client, s.gate, err = cfg.connect("-0", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	defer s.client.Disconnect(0)
	testwait.For(t, 30*time.Second, "the source's client to connect", func() bool { // no event tells
		return s.client.IsConnectionOpen() && s.gate.open()
	})
	s.gate.notify(nil, paho.ConnectionNotificationConnecting{}) // as paho does before it resumes
	s.publishDeadLetters([]ingest.StoredDeadLetter{{DeadLetter: ingest.DeadLetter{Reason: "while shut"}}})
	if !strings.Contains(logged.String(), "dead letters not published") {
		t.Fatalf("nothing logged for a dead letter held back: %q", logged.String())
	}
	s.gate.All() // paho lists what it resends
	s.publishDeadLetters([]ingest.StoredDeadLetter{{DeadLetter: ingest.DeadLetter{Reason: "while open"}}})
	if r := testwait.Recv(t, heard, 10*time.Second, "the letter sent while the gate was open"); r != "while open" {
		t.Fatalf("the consumer heard %q first: a letter went out while the gate was shut", r)
	}
}
