// Package mqttraw speaks MQTT 3.1.1 over a bare TCP connection, packet
// by packet, as no client library would: the tests of the embedded
// broker's limits send with it what an attacker on the network would (a
// filter of 65,535 levels, ten thousand filters in one SUBSCRIBE, a
// session that never reads) and read the broker's answers, or not. It
// encodes and decodes with mochi's packets package.
package mqttraw

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
)

// Conn is a connection to a broker.
type Conn struct {
	net.Conn
	r *bufio.Reader
}

// Dial connects to addr (host:port), within 10 s.
func Dial(addr string) (*Conn, error) { return DialFrom(addr, "") }

// DialFrom connects to addr from local address host (any, if empty),
// within 10 s: on loopback, 127.0.0.2 is a client of an address of its
// own.
func DialFrom(addr, host string) (*Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	if host != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(host)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &Conn{Conn: c, r: bufio.NewReader(c)}, nil
}

// Session is what a CONNECT asks for.
type Session struct {
	ID string
	// User and Password: none if empty. A Password without a User is a
	// CONNECT MQTT 3.1.1 forbids.
	User, Password string
	Clean          bool
	Keepalive      uint16 // seconds; 0: none
	WillTopic      string // a will if not empty
	WillPayload    []byte
	WillRetain     bool
}

// Connect sends a CONNECT for s and returns the CONNACK's return code
// (0: accepted), or an error if the broker closed the connection or sent
// something else.
func (c *Conn) Connect(s Session) (byte, error) {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, ProtocolVersion: 4,
		Connect: packets.ConnectParams{ProtocolName: []byte("MQTT"), ClientIdentifier: s.ID, Clean: s.Clean, Keepalive: s.Keepalive}}
	if s.User != "" {
		pk.Connect.UsernameFlag, pk.Connect.Username = true, []byte(s.User)
	}
	if s.Password != "" {
		pk.Connect.PasswordFlag, pk.Connect.Password = true, []byte(s.Password)
	}
	if s.WillTopic != "" {
		pk.Connect.WillFlag, pk.Connect.WillTopic, pk.Connect.WillPayload, pk.Connect.WillRetain = true, s.WillTopic, s.WillPayload, s.WillRetain
	}
	if err := c.Send(pk); err != nil {
		return 0, err
	}
	ack, err := c.ReadPacket()
	if err != nil {
		return 0, err
	}
	if ack.FixedHeader.Type != packets.Connack {
		return 0, fmt.Errorf("a %s, not a CONNACK", packets.PacketNames[ack.FixedHeader.Type])
	}
	return ack.ReasonCode, nil
}

// Send writes pk, encoded as its type says.
func (c *Conn) Send(pk packets.Packet) error {
	if pk.ProtocolVersion == 0 {
		pk.ProtocolVersion = 4
	}
	var buf bytes.Buffer
	var err error
	switch pk.FixedHeader.Type {
	case packets.Connect:
		err = pk.ConnectEncode(&buf)
	case packets.Publish:
		err = pk.PublishEncode(&buf)
	case packets.Puback:
		err = pk.PubackEncode(&buf)
	case packets.Pubrec:
		err = pk.PubrecEncode(&buf)
	case packets.Pubrel:
		err = pk.PubrelEncode(&buf)
	case packets.Pubcomp:
		err = pk.PubcompEncode(&buf)
	case packets.Subscribe:
		err = pk.SubscribeEncode(&buf)
	case packets.Unsubscribe:
		err = pk.UnsubscribeEncode(&buf)
	case packets.Pingreq:
		err = pk.PingreqEncode(&buf)
	case packets.Disconnect:
		err = pk.DisconnectEncode(&buf)
	default:
		err = fmt.Errorf("mqttraw: no encoding of %s", packets.PacketNames[pk.FixedHeader.Type])
	}
	if err != nil {
		return err
	}
	_, err = c.Write(buf.Bytes())
	return err
}

// ReadPacket reads the next packet.
func (c *Conn) ReadPacket() (packets.Packet, error) {
	var pk packets.Packet
	b, err := c.r.ReadByte()
	if err != nil {
		return pk, err
	}
	if err := pk.FixedHeader.Decode(b); err != nil {
		return pk, err
	}
	if pk.FixedHeader.Remaining, _, err = packets.DecodeLength(c.r); err != nil {
		return pk, err
	}
	body := make([]byte, pk.FixedHeader.Remaining)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return pk, err
	}
	pk.ProtocolVersion = 4
	switch pk.FixedHeader.Type {
	case packets.Connack:
		err = pk.ConnackDecode(body)
	case packets.Publish:
		err = pk.PublishDecode(body)
	case packets.Puback:
		err = pk.PubackDecode(body)
	case packets.Pubrec:
		err = pk.PubrecDecode(body)
	case packets.Pubrel:
		err = pk.PubrelDecode(body)
	case packets.Pubcomp:
		err = pk.PubcompDecode(body)
	case packets.Suback:
		err = pk.SubackDecode(body)
	case packets.Unsuback:
		err = pk.UnsubackDecode(body)
	case packets.Pingresp, packets.Disconnect:
	default:
		err = fmt.Errorf("mqttraw: a packet of type %d", pk.FixedHeader.Type)
	}
	return pk, err
}

// ReadType reads packets until one of type typ, and returns it;
// publishes on the way are acknowledged if ack.
func (c *Conn) ReadType(typ byte, ack bool) (packets.Packet, error) {
	for {
		pk, err := c.ReadPacket()
		if err != nil || pk.FixedHeader.Type == typ {
			return pk, err
		}
		if ack && pk.FixedHeader.Type == packets.Publish && pk.FixedHeader.Qos == 1 {
			if err := c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: pk.PacketID}); err != nil {
				return pk, err
			}
		}
	}
}

// Subscribe sends a SUBSCRIBE of filters at qos under packet id id.
func (c *Conn) Subscribe(id uint16, qos byte, filters ...string) error {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, PacketID: id}
	for _, f := range filters {
		pk.Filters = append(pk.Filters, packets.Subscription{Filter: f, Qos: qos})
	}
	return c.Send(pk)
}

// SubscribeAck subscribes as Subscribe does and returns the SUBACK's
// return codes, acknowledging the messages that come before it.
func (c *Conn) SubscribeAck(id uint16, qos byte, filters ...string) ([]byte, error) {
	if err := c.Subscribe(id, qos, filters...); err != nil {
		return nil, err
	}
	ack, err := c.ReadType(packets.Suback, true)
	if err != nil {
		return nil, err
	}
	if ack.PacketID != id {
		return nil, fmt.Errorf("SUBACK of packet %d, not %d", ack.PacketID, id)
	}
	return ack.ReasonCodes, nil
}

// Publish sends a PUBLISH; a QoS above 0 needs a packet id above 0.
func (c *Conn) Publish(id uint16, topic string, payload []byte, qos byte, retain bool) error {
	return c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: qos, Retain: retain},
		PacketID: id, TopicName: topic, Payload: payload})
}

// ErrNoAnswer is what Ping returns when the broker answered nothing.
var ErrNoAnswer = errors.New("mqttraw: no answer")

// Ping sends a PINGREQ and waits up to d for its PINGRESP, acknowledging
// what comes before: it tells that the broker is serving the connection.
func (c *Conn) Ping(d time.Duration) error {
	if err := c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pingreq}}); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	_, err := c.ReadType(packets.Pingresp, true)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ErrNoAnswer
	}
	return err
}
