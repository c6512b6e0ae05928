package ingest

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// FuzzLogRecord feeds arbitrary bytes to the ingest log's group decoder
// (the first byte a message count), plain and deflated: it must never
// panic, and whatever decodes must encode to bytes that decode to the same
// messages. Messages encode and decode back to themselves. Seeds:
// testdata/fuzz/FuzzLogRecord.
func FuzzLogRecord(f *testing.F) {
	received := time.UnixMilli(1_700_000_000_123)
	var group []Message
	for i := range 30 {
		group = append(group, Message{Topic: fmt.Sprintf("sensors/d%d/telemetry", i%7), Payload: fmt.Appendf(nil, `{"temp":%d.5}`, i),
			Received: received, PacketID: uint16(i * 2000)})
	}
	group = append(group, Message{Topic: "", Payload: nil, Received: received})
	published := sampleGroup(30, true)
	var c groupCodec
	for _, g := range [][]Message{group, group[:2], published, published[:3]} { // deflated and plain, without publishers and with
		enc, n := c.encode(nil, g)
		f.Add(append([]byte{byte(n)}, enc...))
	}
	f.Add([]byte{1, 0, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		var dec, enc groupCodec
		count, data := int(data[0]), data[1:]
		msgs, err := dec.decode(data, count, nil)
		if err != nil {
			return
		}
		again, n := enc.encode(nil, msgs)
		if n != len(msgs) && len(data) < maxGroupBytes/2 {
			t.Fatalf("%d messages decoded, %d encoded", len(msgs), n)
		}
		var dec2 groupCodec
		back, err := dec2.decode(again, n, nil)
		if err != nil || len(back) != n {
			t.Fatalf("re-encoded group: %v", err)
		}
		for i := range back {
			if back[i].Topic != msgs[i].Topic || !bytes.Equal(back[i].Payload, msgs[i].Payload) ||
				!back[i].Received.Equal(msgs[i].Received) || back[i].PacketID != msgs[i].PacketID ||
				back[i].Publisher != msgs[i].Publisher {
				t.Fatalf("message %d: %+v decodes as %+v", i, msgs[i], back[i])
			}
		}
	})
}
