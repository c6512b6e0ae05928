package mqttio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// messages returns what b holds, as "topic body" strings, and its first
// sequence number.
func messages(t *testing.T, b *batch) []string {
	t.Helper()
	var out []string
	size := 0
	for _, block := range b.blocks {
		size += len(block)
		for rest := block; len(rest) > 0; {
			topic, body, n, err := nextMessage(rest)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, topic+" "+string(body))
			rest = rest[n:]
		}
	}
	if size != b.size {
		t.Fatalf("batch size %d, blocks hold %d", b.size, size)
	}
	return out
}

// TestBatchAcrossBlocks stages more than a block's worth, drops messages
// from the front as a publisher does, and checks that a snapshot taken
// meanwhile holds exactly the messages left, with their sequence numbers.
func TestBatchAcrossBlocks(t *testing.T) {
	topic := strings.Split("out/{key}/avg", "{key}")
	var b batch
	const n = 2000 // about 3 blocks
	for i := range n {
		b.add(topic, fmt.Sprintf("k%d", i), []byte(fmt.Sprintf(`,"value":%d}`, i)))
	}
	if len(b.blocks) < 2 {
		t.Fatalf("%d blocks: the test must span several", len(b.blocks))
	}
	// A publisher runs ahead of the acknowledgements: its cursor reads on
	// while drop removes messages behind it, and a cursor taken after a
	// rewind starts at the oldest message left.
	ahead := b.cursor()
	for i := range 1500 {
		seq, topic, body, ok := ahead.message()
		if want := fmt.Sprintf("out/k%d/avg", i); !ok || seq != uint64(i) || topic != want || string(body) != fmt.Sprintf(`,"value":%d}`, i) {
			t.Fatalf("message %d: %d %s %s", i, seq, topic, body)
		}
		if i >= 100 {
			b.drop() // acknowledgements 100 messages behind
		}
	}
	for range 100 {
		b.drop()
	}
	if seq, topic, _, _ := ahead.message(); seq != 1500 || topic != "out/k1500/avg" {
		t.Fatalf("the cursor ahead moved to %d %s after the drops", seq, topic)
	}
	if seq, topic, _, _ := (&cursor{}).message(); seq != 0 || topic != "" {
		t.Fatal("an empty cursor gave a message")
	}
	rewound := b.cursor()
	if seq, topic, _, _ := rewound.message(); seq != 1500 || topic != "out/k1500/avg" {
		t.Fatalf("a cursor after the drops starts at %d %s, want 1500", seq, topic)
	}
	b.checkpoint, b.subtask = 9, 2
	state := bytes.Join(encodeBatches([]*batch{&b}), nil)
	got, err := decodeBatches(state, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].checkpoint != 9 || got[0].subtask != 2 || got[0].seq != 1500 {
		t.Fatalf("decoded %+v", got)
	}
	left := messages(t, got[0])
	if len(left) != n-1500 || left[0] != `out/k1500/avg ,"value":1500}` || left[len(left)-1] != `out/k1999/avg ,"value":1999}` {
		t.Fatalf("%d messages left, from %q to %q", len(left), left[0], left[len(left)-1])
	}
}

// TestSinkStateOfEarlierCairn restores the JSON state that cairn wrote
// before the binary encoding: the same messages, the recorded subtask or
// else the restoring one.
func TestSinkStateOfEarlierCairn(t *testing.T) {
	one := 1
	old, err := json.Marshal([]any{
		map[string]any{"c": 4, "m": []map[string]any{{"t": "out/a", "b": []byte(`,"value":1}`)}, {"t": "out/b", "b": []byte(`,"value":2}`)}}},
		map[string]any{"c": 6, "m": []map[string]any{{"t": "out/c", "b": []byte(`,"value":3}`)}}, "s": &one},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeBatches(old, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].checkpoint != 4 || got[0].subtask != 3 || got[1].checkpoint != 6 || got[1].subtask != 1 {
		t.Fatalf("decoded %+v %+v", got[0], got[1])
	}
	if m := messages(t, got[0]); len(m) != 2 || m[1] != `out/b ,"value":2}` {
		t.Fatalf("messages %q", m)
	}
}

// TestSinkStateDamage: every truncation of a state, and stray bytes after
// it, is an error, never a panic or a silently shorter batch.
func TestSinkStateDamage(t *testing.T) {
	var b batch
	for i := range 5 {
		b.add([]string{"t/", ""}, fmt.Sprint(i), []byte(`,"value":1}`))
	}
	state := bytes.Join(encodeBatches([]*batch{&b}), nil)
	for n := len(stateMagic); n < len(state); n++ {
		if _, err := decodeBatches(state[:n], 0); err == nil {
			t.Fatalf("a state cut at %d of %d bytes decoded", n, len(state))
		}
	}
	if _, err := decodeBatches(append(state, 0), 0); err == nil {
		t.Fatal("trailing bytes decoded")
	}
}

// FuzzSinkState: no input makes the sink's state decoder panic, and what it
// accepts survives encoding and decoding again unchanged.
func FuzzSinkState(f *testing.F) {
	var b batch
	b.add([]string{"out/", ""}, "k", []byte(`,"value":1}`))
	f.Add(bytes.Join(encodeBatches([]*batch{&b}), nil))
	f.Add([]byte(`[{"c":1,"m":[{"t":"x","b":"LA=="}]}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeBatches(data, 0)
		if err != nil {
			return
		}
		once := bytes.Join(encodeBatches(got), nil)
		again, err := decodeBatches(once, 0)
		if err != nil {
			t.Fatalf("state %x: its own encoding %x does not decode: %v", data, once, err)
		}
		if twice := bytes.Join(encodeBatches(again), nil); string(twice) != string(once) {
			t.Fatalf("state %x encodes as %x, then as %x", data, once, twice)
		}
	})
}
