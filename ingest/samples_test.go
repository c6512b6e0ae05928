package ingest

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/internal/testing/sample"
)

// sampleGroup is a group commit's messages: topics sharing prefixes, one
// empty, payloads of every size class, packet ids up to the largest; with
// publishers, client ids sharing prefixes, one empty.
func sampleGroup(n int, publishers bool) []Message {
	received := time.UnixMilli(1_700_000_000_123)
	msgs := []Message{{Topic: "", Payload: nil, Received: received, PacketID: 0xffff}}
	for i := range n {
		m := Message{Topic: fmt.Sprintf("sensors/site-%d/d%d/telemetry", i%2, i%7),
			Payload: fmt.Appendf(nil, `{"temp":%d.5,"pad":%q}`, i, strings.Repeat("x", i*3)), Received: received, PacketID: uint16(i * 997)}
		if publishers {
			m.Publisher = fmt.Sprintf("gw-%d-dev-%d", i%2, i%5)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// TestStoredGroups: ingest log groups as a cairn wrote them, plain and
// deflated, without publishers and with (testdata/group-*.bin), decode to their messages, and the plain
// one encodes to the same bytes today (deflate's bytes are the compress
// package's, which may change between Go releases).
func TestStoredGroups(t *testing.T) {
	for _, c := range []struct {
		name   string
		msgs   []Message
		format byte
	}{
		{"group-plain.bin", sampleGroup(2, false), groupPlain},
		{"group-deflated.bin", sampleGroup(60, false), groupDeflated},
		{"group-plain-publishers.bin", sampleGroup(2, true), groupPlainPublishers},
		{"group-deflated-publishers.bin", sampleGroup(60, true), groupDeflatedPublishers},
	} {
		var codec groupCodec
		current, n := codec.encode(nil, c.msgs)
		if n != len(c.msgs) {
			t.Fatalf("%s: %d of %d messages fit a group", c.name, n, len(c.msgs))
		}
		stored := sample.Bytes(t, filepath.Join("testdata", c.name), func() []byte { return current })
		if stored[0] != c.format {
			t.Fatalf("%s is of format %d, want %d", c.name, stored[0], c.format)
		}
		got, err := codec.decode(stored, len(c.msgs), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for i, m := range c.msgs {
			if got[i].Topic != m.Topic || !bytes.Equal(got[i].Payload, m.Payload) || !got[i].Received.Equal(m.Received) || got[i].PacketID != m.PacketID ||
				got[i].Publisher != m.Publisher {
				t.Fatalf("%s: message %d decodes as %+v, want %+v", c.name, i, got[i], m)
			}
		}
		if (stored[0] == groupPlain || stored[0] == groupPlainPublishers) && !bytes.Equal(current, stored) {
			t.Errorf("%s: the same messages encode to other bytes today:\n%x\nstored\n%x", c.name, current, stored)
		}
	}
}
