package mqttio

import (
	"testing"
	"time"
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
// not marked. A group that could not be logged goes back in front.
func TestIntakeKnowsRedeliveries(t *testing.T) {
	in := newIntake(time.Second, 0, 10, map[uint16]uint64{})
	stop := make(chan struct{})
	first := message{topic: "a/t", payload: "1", id: 7}
	again := first
	again.dup = true
	if in.add(first, stop, false) {
		t.Fatal("a first delivery taken for a redelivery")
	}
	if !in.add(again, stop, false) {
		t.Fatal("a redelivery of a pending message not known")
	}
	group := in.take()
	if len(group) != 2 {
		t.Fatalf("took %d messages, want 2", len(group))
	}
	if !in.add(again, stop, false) {
		t.Fatal("a redelivery of a message being committed not known")
	}
	in.putBack(group)
	if got := in.take(); len(got) != 3 || got[0].m != first || !got[1].logged || !got[2].logged {
		t.Fatalf("after a failed commit the intake holds %+v", got)
	} else {
		in.committed(got)
		in.release(got)
	}
	if !in.add(again, stop, false) {
		t.Fatal("a redelivery of a logged message not known")
	}
	if in.add(message{topic: "a/t", payload: "1", id: 7}, stop, false) {
		t.Fatal("a message not marked as a duplicate taken for a redelivery")
	}
	if in.add(message{topic: "a/t", payload: "other", id: 7, dup: true}, stop, false) {
		t.Fatal("another message under the same packet id taken for a redelivery")
	}
	long := message{topic: "a/t", payload: "0123456789abcdef", id: 8}
	in.add(long, stop, false)
	if p := in.take()[3].payload; string(p) != "0123456789" {
		t.Fatalf("kept %q of a payload over the limit, want its first 10 bytes", p)
	}
}

// TestIntakeAcknowledgesOthersInTurn: a message another subtask logs is
// acknowledged only, in its place among the others; it counts for no
// commit's bytes, is no redelivery, and a group of nothing else needs no
// commit.
func TestIntakeAcknowledgesOthersInTurn(t *testing.T) {
	in := newIntake(time.Second, 0, 10, map[uint16]uint64{})
	stop := make(chan struct{})
	if in.add(message{topic: "b/t", payload: "12345", id: 1, dup: true}, stop, true) {
		t.Fatal("another subtask's message taken for a redelivery")
	}
	onlyAcks := func() bool {
		why, _ := in.due(time.Now())
		return why == ackOnly
	}
	if n, bytes := len(in.pending), in.bytes; n != 1 || bytes != 0 || !onlyAcks() {
		t.Fatalf("with another subtask's message pending: %d messages, %d bytes, acknowledge-only %v; want 1, 0, true", n, bytes, onlyAcks())
	}
	in.add(message{topic: "a/t", payload: "1", id: 2}, stop, false)
	in.add(message{topic: "b/t", payload: "2", id: 3}, stop, true)
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
