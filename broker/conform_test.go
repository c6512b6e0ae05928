package broker

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/cairn-edge/cairn/internal/testing/mqttraw"
)

// TestBrokerAcksCarryNoPublishProperties: the embedded broker's PUBACK
// to an MQTT 5 client carries no properties of the PUBLISH it answers
// (mochi copies its user properties by default), which the Paho MQTT 5
// test client takes for a malformed packet (docs/mqtt.md#conformance).
func TestBrokerAcksCarryNoPublishProperties(t *testing.T) {
	b, err := Start(Config{Addr: "127.0.0.1:0", AllowAnonymous: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := mqttraw.Dial(strings.TrimPrefix(b.URL(), "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	err = c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, ProtocolVersion: 5,
		Connect: packets.ConnectParams{ProtocolName: []byte("MQTT"), ClientIdentifier: "v5", Clean: true}})
	if err != nil {
		t.Fatal(err)
	}
	if ack, err := c.ReadType(packets.Connack, false); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("CONNACK %d, %v", ack.ReasonCode, err)
	}
	err = c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, ProtocolVersion: 5,
		PacketID: 1, TopicName: "t", Payload: []byte("p"),
		Properties: packets.Properties{User: []packets.UserProperty{{Key: "a", Val: "2"}, {Key: "c", Val: "3"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := c.ReadType(packets.Puback, false)
	if err != nil {
		t.Fatal(err)
	}
	// Packet id, reason code (0x10: no subscribers), properties' length 0.
	if ack.PacketID != 1 || ack.FixedHeader.Remaining > 4 {
		t.Fatalf("PUBACK for packet %d of %d bytes: it carries properties", ack.PacketID, ack.FixedHeader.Remaining)
	}
}
