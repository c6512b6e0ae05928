package mqttio

import (
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
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
	// await polls a state that no event tells.
	await := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waited 30s for %s", what)
			}
		}
	}
	publish := func(what string) {
		t.Helper()
		if tok := cl.Publish("gate/t", 1, false, "x"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publishing %s: %v", what, tok.Error())
		}
	}
	await("the gate to open", func() bool { return cl.IsConnectionOpen() && gate.open() })
	publish("after connecting")
	first := gate.attempt.Load()
	b.restart()
	await("paho's attempt to reconnect to reach the gate", func() bool { return gate.attempt.Load() > first })
	await("the gate to open again", func() bool { return cl.IsConnectionOpen() && gate.open() })
	publish("after reconnecting")
}
