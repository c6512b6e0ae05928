package mqttio

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

// TestPublishLimiter passes a stream of packets as a broker sends them
// through a publishLimiter of 100 bytes: every packet comes out as paho
// reads it, the same but for the payloads over the limit, cut to 101
// bytes, with the packet identifiers that acknowledge them; the stream is
// read a few bytes at a time, as paho reads it.
func TestPublishLimiter(t *testing.T) {
	publish := func(qos byte, id uint16, topic string, n int) *packets.PublishPacket {
		p := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
		p.Qos, p.MessageID, p.TopicName, p.Payload = qos, id, topic, bytes.Repeat([]byte{'x'}, n)
		return p
	}
	in := []packets.ControlPacket{
		publish(1, 1, "a/b", 10),
		publish(1, 2, "big/one", 5<<20), // a 4-byte remaining length
		packets.NewControlPacket(packets.Pingresp),
		publish(0, 0, "big/qos0", 300),
		publish(1, 3, strings.Repeat("t", 150), 50), // over the limit by its topic only
		publish(1, 4, "exact", 100),
		packets.NewControlPacket(packets.Suback),
	}
	var stream bytes.Buffer
	for _, p := range in {
		if err := p.Write(&stream); err != nil {
			t.Fatal(err)
		}
	}
	r := bufio.NewReader(oneByOne{newPublishLimiter(bufio.NewReaderSize(&stream, 16), 100)})
	for i, want := range in {
		got, err := packets.ReadPacket(r)
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		if w, ok := want.(*packets.PublishPacket); ok {
			g := got.(*packets.PublishPacket)
			wantPayload := w.Payload[:min(len(w.Payload), 101)]
			if g.TopicName != w.TopicName || g.MessageID != w.MessageID || g.Qos != w.Qos || !bytes.Equal(g.Payload, wantPayload) {
				t.Fatalf("packet %d: %s %d qos %d, %d bytes; want %s %d qos %d, %d bytes", i,
					g.TopicName, g.MessageID, g.Qos, len(g.Payload), w.TopicName, w.MessageID, w.Qos, len(wantPayload))
			}
		} else if got.String() != want.String() {
			t.Fatalf("packet %d: %v, want %v", i, got, want)
		}
	}
	if _, err := packets.ReadPacket(r); err != io.EOF {
		t.Fatalf("after the last packet: %v, want EOF", err)
	}
}

// oneByOne reads at most 3 bytes at a time.
type oneByOne struct{ r io.Reader }

func (o oneByOne) Read(p []byte) (int, error) { return o.r.Read(p[:min(len(p), 3)]) }

// FuzzPublishLimiter passes any bytes through a publishLimiter: it never
// panics or hands over more than it read, and whatever packets paho reads
// from the original it reads from the output too, the same but for
// payloads cut to the limit and a byte.
func FuzzPublishLimiter(f *testing.F) {
	var seed bytes.Buffer
	p := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
	p.Qos, p.MessageID, p.TopicName, p.Payload = 1, 7, "a/b", bytes.Repeat([]byte{'x'}, 40)
	p.Write(&seed)
	packets.NewControlPacket(packets.Pingresp).Write(&seed)
	f.Add(seed.Bytes(), uint8(10))
	f.Add([]byte{0x30, 0xff, 0xff, 0xff, 0x7f}, uint8(1))
	f.Fuzz(func(t *testing.T, in []byte, limit uint8) {
		max := int(limit) + 1
		out, err := io.ReadAll(newPublishLimiter(bufio.NewReader(bytes.NewReader(in)), max))
		if len(out) > len(in) { // a cut packet is shorter, its length rewritten in as many bytes or fewer
			t.Fatalf("%d bytes out of %d in", len(out), len(in))
		}
		want, got := bufio.NewReader(bytes.NewReader(in)), bufio.NewReader(bytes.NewReader(out))
		for {
			w, werr := packets.ReadPacket(want)
			if werr != nil {
				return // the rest is no packet: what the limiter made of it does not matter
			}
			g, gerr := packets.ReadPacket(got)
			if gerr != nil {
				t.Fatalf("the original holds %v, the output fails: %v (limiter: %v)", w, gerr, err)
			}
			wp, ok := w.(*packets.PublishPacket)
			if !ok {
				if g.String() != w.String() {
					t.Fatalf("%v became %v", w, g)
				}
				continue
			}
			gp := g.(*packets.PublishPacket)
			if gp.TopicName != wp.TopicName || gp.MessageID != wp.MessageID || !bytes.Equal(gp.Payload, wp.Payload[:min(len(wp.Payload), max+1)]) {
				t.Fatalf("%v (%d bytes) became %v (%d bytes), limit %d", wp, len(wp.Payload), gp, len(gp.Payload), max)
			}
		}
	})
}
