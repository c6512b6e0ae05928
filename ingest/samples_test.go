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
// empty, payloads of every size class, packet ids up to the largest.
func sampleGroup(n int) []Message {
	received := time.UnixMilli(1_700_000_000_123)
	msgs := []Message{{Topic: "", Payload: nil, Received: received, PacketID: 0xffff}}
	for i := range n {
		msgs = append(msgs, Message{Topic: fmt.Sprintf("sensors/site-%d/d%d/telemetry", i%2, i%7),
			Payload: fmt.Appendf(nil, `{"temp":%d.5,"pad":%q}`, i, strings.Repeat("x", i*3)), Received: received, PacketID: uint16(i * 997)})
	}
	return msgs
}

// TestStoredGroups: ingest log groups as a cairn wrote them, plain and
// deflated (testdata/group-*.bin), decode to their messages, and the plain
// one encodes to the same bytes today (deflate's bytes are the compress
// package's, which may change between Go releases).
func TestStoredGroups(t *testing.T) {
	for _, c := range []struct {
		name string
		msgs []Message
	}{
		{"group-plain.bin", sampleGroup(2)},
		{"group-deflated.bin", sampleGroup(60)},
	} {
		var codec groupCodec
		current, n := codec.encode(nil, c.msgs)
		if n != len(c.msgs) {
			t.Fatalf("%s: %d of %d messages fit a group", c.name, n, len(c.msgs))
		}
		stored := sample.Bytes(t, filepath.Join("testdata", c.name), func() []byte { return current })
		if want := byte(groupDeflated); (c.name == "group-deflated.bin") != (stored[0] == want) {
			t.Fatalf("%s is of format %d", c.name, stored[0])
		}
		got, err := codec.decode(stored, len(c.msgs), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for i, m := range c.msgs {
			if got[i].Topic != m.Topic || !bytes.Equal(got[i].Payload, m.Payload) || !got[i].Received.Equal(m.Received) || got[i].PacketID != m.PacketID {
				t.Fatalf("%s: message %d decodes as %+v, want %+v", c.name, i, got[i], m)
			}
		}
		if stored[0] == groupPlain && !bytes.Equal(current, stored) {
			t.Errorf("%s: the same messages encode to other bytes today:\n%x\nstored\n%x", c.name, current, stored)
		}
	}
}
