package mqttio

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/internal/sample"
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

// sampleBatches are a sink subtask's staged output: a batch of several
// blocks, deflated and plain, some messages acknowledged already, and an
// empty one.
func sampleBatches() (numbering, []*batch) {
	topic := strings.Split("out/{key}/avg", "{key}")
	b := &batch{checkpoint: 9, subtask: 2, epoch: 4, base: 70}
	for i := range 3000 {
		b.add(topic, fmt.Sprintf("k%d", i), fmt.Appendf(nil, `,"value":%d}`, i))
	}
	for range 5 {
		b.drop()
	}
	empty := &batch{checkpoint: 10, subtask: 2, epoch: 4, base: 3070}
	return numbering{epoch: 4, next: 3070, subtask: 2, parallelism: 3}, []*batch{b, empty}
}

// TestStoredSinkState: a sink's state as a cairn wrote it in format 3
// (testdata/sinkstate-v3.bin) decodes to the batches staged, and encodes
// back to the same bytes.
func TestStoredSinkState(t *testing.T) {
	num, bs := sampleBatches()
	stored := sample.Bytes(t, filepath.Join("testdata", "sinkstate-v3.bin"), func() []byte {
		return bytes.Join(encodeBatches(num, bs), nil)
	})
	gotN, got, err := decodeBatches(stored, 0)
	if err != nil {
		t.Fatal(err)
	}
	if gotN != num || len(got) != len(bs) {
		t.Fatalf("decoded numbering %+v and %d batches, want %+v and %d", gotN, len(got), num, len(bs))
	}
	deflated := 0
	for i, b := range got {
		want := bs[i]
		if b.checkpoint != want.checkpoint || b.subtask != want.subtask || b.seq != want.seq || b.epoch != want.epoch || b.base != want.base || b.badTopics {
			t.Fatalf("batch %d decoded as %+v, want %+v", i, b, want)
		}
		if got, want := messages(t, b), messages(t, want); !slices.Equal(got, want) {
			t.Fatalf("batch %d holds %d messages, want %d", i, len(got), len(want))
		}
		for _, k := range b.blocks {
			if k.deflated {
				deflated++
			}
		}
	}
	if deflated == 0 {
		t.Fatal("the sample has no deflated block")
	}
	if again := bytes.Join(encodeBatches(gotN, got), nil); !bytes.Equal(again, stored) {
		t.Errorf("the decoded state encodes to other bytes:\n%x\nstored\n%x", again, stored)
	}
}
