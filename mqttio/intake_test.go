package mqttio

import (
	"fmt"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/ingest"
)

// message is a received MQTT message, as paho hands one over.
type message struct {
	topic   string
	payload string
	id      uint16
	dup     bool
}

func (m message) Duplicate() bool   { return m.dup }
func (m message) Qos() byte         { return 1 }
func (m message) Retained() bool    { return false }
func (m message) Topic() string     { return m.topic }
func (m message) MessageID() uint16 { return m.id }
func (m message) Payload() []byte   { return []byte(m.payload) }
func (m message) Ack()              {}

// TestIntakeKnowsRedeliveries: a message the broker sends again (marked a
// duplicate, same packet id and payload) is known as a redelivery while
// the first copy waits, while its group is being committed, and once it is
// logged; so is none of a message that only shares the packet id, or is
// not marked, or is another publisher's. A group that could not be logged goes back in front.
func TestIntakeKnowsRedeliveries(t *testing.T) {
	in := newIntake(time.Second, 0, 10, nil)
	stop := make(chan struct{})
	add := func(m message) (redelivered bool) { return second(in.add(m, "", stop, false)) }
	first := message{topic: "a/t", payload: "1", id: 7}
	again := first
	again.dup = true
	if add(first) {
		t.Fatal("a first delivery taken for a redelivery")
	}
	if !add(again) {
		t.Fatal("a redelivery of a pending message not known")
	}
	group := in.take()
	if len(group) != 2 {
		t.Fatalf("took %d messages, want 2", len(group))
	}
	if !add(again) {
		t.Fatal("a redelivery of a message being committed not known")
	}
	in.putBack(group)
	if got := in.take(); len(got) != 3 || got[0].m != first || !got[1].logged || !got[2].logged {
		t.Fatalf("after a failed commit the intake holds %+v", got)
	} else {
		in.committed(got)
		in.release(got)
	}
	if !add(again) {
		t.Fatal("a redelivery of a logged message not known")
	}
	if add(message{topic: "a/t", payload: "1", id: 7}) {
		t.Fatal("a message not marked as a duplicate taken for a redelivery")
	}
	if add(message{topic: "a/t", payload: "other", id: 7, dup: true}) {
		t.Fatal("another message under the same packet id taken for a redelivery")
	}
	if second(in.add(again, "device-2", stop, false)) {
		t.Fatal("another publisher's message under the same packet id taken for a redelivery")
	}
	long := message{topic: "a/t", payload: "0123456789abcdef", id: 8}
	add(long)
	if p := in.take()[4].payload; string(p) != "0123456789" {
		t.Fatalf("kept %q of a payload over the limit, want its first 10 bytes", p)
	}
}

// TestIntakeAcknowledgesOthersInTurn: a message another subtask logs is
// acknowledged only, in its place among the others; it counts for no
// commit's bytes, is no redelivery, and a group of nothing else needs no
// commit.
func TestIntakeAcknowledgesOthersInTurn(t *testing.T) {
	in := newIntake(time.Second, 0, 10, nil)
	stop := make(chan struct{})
	if second(in.add(message{topic: "b/t", payload: "12345", id: 1, dup: true}, "", stop, true)) {
		t.Fatal("another subtask's message taken for a redelivery")
	}
	onlyAcks := func() bool {
		why, _ := in.due(time.Now())
		return why == ackOnly
	}
	if n, bytes := len(in.pending), in.bytes; n != 1 || bytes != 0 || !onlyAcks() {
		t.Fatalf("with another subtask's message pending: %d messages, %d bytes, acknowledge-only %v; want 1, 0, true", n, bytes, onlyAcks())
	}
	in.add(message{topic: "a/t", payload: "1", id: 2}, "", stop, false)
	in.add(message{topic: "b/t", payload: "2", id: 3}, "", stop, true)
	if onlyAcks() {
		t.Fatal("a group holding a message to log taken for acknowledge-only")
	}
	group := in.take()
	if len(group) != 3 || !group[0].logged || group[1].logged || !group[2].logged || group[1].m.MessageID() != 2 {
		t.Fatalf("took %+v, want the three in order, only the second to log", group)
	}
	in.putBack(group)
	if onlyAcks() {
		t.Fatal("a group put back taken for acknowledge-only")
	}
	group = in.take()
	in.committed(group)
	in.release(group)
	if onlyAcks() {
		t.Fatal("an empty intake taken for acknowledge-only")
	}
}

// second is the second of two results: whether intake.add took a message
// for a redelivery.
func second(_, redelivered bool) bool { return redelivered }

// TestRecentIsBounded: the publish ids the intake remembers are the
// newest ingest.RedeliveryWindow logged, however many publishers and
// packet ids send them; an id logged again is remembered with its newest
// payload for as long as its newest copy is among them.
func TestRecentIsBounded(t *testing.T) {
	var r recent
	const publishers = 50
	id := func(i int) ingest.PublishID {
		return ingest.PublishID{Publisher: fmt.Sprint("dev-", i%publishers), PacketID: uint16(i / publishers)}
	}
	for i := range 3 * ingest.RedeliveryWindow {
		r.note(id(i), uint64(i))
		if len(r.sums) > ingest.RedeliveryWindow {
			t.Fatalf("after %d noted, %d remembered", i+1, len(r.sums))
		}
	}
	for i := range 3 * ingest.RedeliveryWindow {
		if want := i >= 2*ingest.RedeliveryWindow; r.has(id(i), uint64(i)) != want {
			t.Fatalf("message %d of %d remembered: %v, want %v", i, 3*ingest.RedeliveryWindow, !want, want)
		}
	}
	// One id again and again, among others: its newest payload stays.
	r.note(ingest.PublishID{Publisher: "again", PacketID: 1}, 1)
	for i := range ingest.RedeliveryWindow - 1 {
		r.note(id(i), 0)
		if i == ingest.RedeliveryWindow/2 {
			r.note(ingest.PublishID{Publisher: "again", PacketID: 1}, 2)
		}
	}
	if !r.has(ingest.PublishID{Publisher: "again", PacketID: 1}, 2) || r.has(ingest.PublishID{Publisher: "again", PacketID: 1}, 1) {
		t.Fatal("an id noted again lost its newest payload when its older copy left the ring")
	}
}
