package mqttio

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// messages returns what b holds, as "topic body" strings, read as the
// publisher does, and checks that b.size is what its blocks hold.
func messages(t *testing.T, b *batch) []string {
	t.Helper()
	var out []string
	size := 0
	for _, k := range b.blocks {
		size += len(k.data)
	}
	if size != b.size {
		t.Fatalf("batch size %d, blocks hold %d", b.size, size)
	}
	c := b.cursor()
	for {
		_, topic, body, ok, err := c.message()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, topic+" "+string(body))
	}
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
		seq, topic, body, ok, err := ahead.message()
		if err != nil {
			t.Fatal(err)
		}
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
	if seq, topic, _, _, _ := ahead.message(); seq != 1500 || topic != "out/k1500/avg" {
		t.Fatalf("the cursor ahead moved to %d %s after the drops", seq, topic)
	}
	if seq, topic, _, _, _ := (&cursor{}).message(); seq != 0 || topic != "" {
		t.Fatal("an empty cursor gave a message")
	}
	rewound := b.cursor()
	if seq, topic, _, _, _ := rewound.message(); seq != 1500 || topic != "out/k1500/avg" {
		t.Fatalf("a cursor after the drops starts at %d %s, want 1500", seq, topic)
	}
	// A cursor lets go of the blocks it has read: at the end it holds none.
	for {
		if _, _, _, ok, err := ahead.message(); err != nil || !ok {
			break
		}
	}
	if ahead.rest != nil || ahead.more != nil {
		t.Fatalf("a cursor at the end still holds %d bytes and %d blocks", cap(ahead.rest), len(ahead.more))
	}
	if left := messages(t, &b); len(left) != n-1500 {
		t.Fatalf("a cursor read to the end left %d messages in the batch, want %d", len(left), n-1500)
	}
	b.checkpoint, b.subtask, b.epoch, b.base = 9, 2, 4, 70
	num := numbering{epoch: 4, next: 70 + uint64(n), subtask: 2, parallelism: 3}
	state := bytes.Join(encodeBatches(num, []*batch{&b}), nil)
	gotN, got, err := decodeBatches(state, 0)
	if err != nil {
		t.Fatal(err)
	}
	if gotN != num || len(got) != 1 || got[0].checkpoint != 9 || got[0].subtask != 2 || got[0].seq != 1500 || got[0].epoch != 4 || got[0].base != 70 {
		t.Fatalf("decoded %+v, %+v", gotN, got)
	}
	left := messages(t, got[0])
	if len(left) != n-1500 || left[0] != `out/k1500/avg ,"value":1500}` || left[len(left)-1] != `out/k1999/avg ,"value":1999}` {
		t.Fatalf("%d messages left, from %q to %q", len(left), left[0], left[len(left)-1])
	}
}

// TestBatchDeflatesSealedBlocks stages a burst of outputs like a window's
// and checks that every block but the one being filled is deflated, that
// the sizes add reports sum to what the batch holds as it fills and as
// acknowledgements empty it, and that a snapshot keeps the blocks as they
// are and reads back the messages left.
func TestBatchDeflatesSealedBlocks(t *testing.T) {
	topic := strings.Split("avg/{key}", "{key}")
	var b batch
	held, raw := 0, 0
	const n = 3000
	for i := range n {
		body := fmt.Sprintf(`,"key":"d%06d","time":1700000039999,"value":%d.5,"payload":{"Start":1699999980000,"End":1700000040000,"Count":%d}}`, i, i%40, 1+i%3)
		held += b.add(topic, fmt.Sprintf("d%06d", i), []byte(body))
		raw += len(body) + len("avg/d000000") + 2
		if held != b.size {
			t.Fatalf("after %d messages add reported %d bytes in all, the batch holds %d", i+1, held, b.size)
		}
	}
	if len(b.blocks) < 3 {
		t.Fatalf("%d blocks: the test must span several", len(b.blocks))
	}
	for i, k := range b.blocks[:len(b.blocks)-1] {
		if !k.deflated {
			t.Fatalf("block %d of %d is not deflated", i, len(b.blocks))
		}
	}
	b.seal() // as a snapshot does
	if !b.last().deflated {
		t.Fatal("the last block is not deflated once sealed")
	}
	room := 0
	for _, k := range b.blocks {
		room += cap(k.data)
	}
	if room > b.size+b.size/4 {
		t.Fatalf("the blocks hold %d bytes in %d of memory", b.size, room)
	}
	if b.size*4 > raw {
		t.Fatalf("%d bytes of messages held in %d: deflate should take them to under a quarter", raw, b.size)
	}
	for range 1000 {
		if d := b.drop(); d > 0 {
			t.Fatalf("drop grew the batch by %d", d)
		}
	}
	b.checkpoint = 3
	_, got, err := decodeBatches(bytes.Join(encodeBatches(numbering{}, []*batch{&b}), nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].size != b.size || got[0].seq != 1000 {
		t.Fatalf("decoded a batch of %d bytes from %d, want %d bytes from 1000", got[0].size, got[0].seq, b.size)
	}
	left := messages(t, got[0])
	if len(left) != n-1000 || !strings.HasPrefix(left[0], `avg/d001000 ,"key":"d001000"`) {
		t.Fatalf("%d messages left, the first %q", len(left), left[0])
	}
	for range n - 1000 {
		b.drop()
	}
	if b.size != 0 || len(b.blocks) != 0 || b.seq != n {
		t.Fatalf("all acknowledged, the batch still holds %d bytes in %d blocks, at %d", b.size, len(b.blocks), b.seq)
	}
}

// encodedMessage is a message as a batch's block holds it: the length of
// its topic, the topic, the length of its body, the body.
func encodedMessage(topic, body string) []byte {
	m := binary.AppendUvarint(nil, uint64(len(topic)))
	m = append(m, topic...)
	m = binary.AppendUvarint(m, uint64(len(body)))
	return append(m, body...)
}

// TestSinkStateOfCairnV2 restores the state of cairn before numberings:
// no numbering, and its batches keep the ids they had,
// "<checkpoint>-<subtask>-<sequence>".
func TestSinkStateOfCairnV2(t *testing.T) {
	msgs := append(encodedMessage("out/a", `,"value":1}`), encodedMessage("out/b", `,"value":2}`)...)
	// One batch: checkpoint 8, subtask 1, first message left 5, one block
	// not deflated of two messages, none acknowledged.
	state := append([]byte(stateMagic+"\x02"), 1, 8, 1, 5, 1, 0, byte(len(msgs)), 2, 0, byte(len(msgs)))
	state = append(state, msgs...)
	n, got, err := decodeBatches(state, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n != (numbering{}) || len(got) != 1 || got[0].checkpoint != 8 || got[0].subtask != 1 || got[0].seq != 5 || got[0].epoch != 0 {
		t.Fatalf("decoded %+v %+v", n, got)
	}
	if id := string(outputID(nil, "out", got[0], 6, nil)); id != "8-1-6" {
		t.Fatalf("id %q, want the one it had, 8-1-6", id)
	}
	if m := messages(t, got[0]); len(m) != 2 || m[1] != `out/b ,"value":2}` {
		t.Fatalf("messages %q", m)
	}
}

// TestSinkStateOfCairnV1 restores the state of cairn before deflated
// blocks: each batch's messages left, in one run.
func TestSinkStateOfCairnV1(t *testing.T) {
	msgs := append(encodedMessage("out/a", `,"value":1}`), encodedMessage("out/b", `,"value":2}`)...)
	state := append([]byte(stateMagic+"\x01"), 1, 8, 1, 5, byte(len(msgs)))
	state = append(state, msgs...)
	_, got, err := decodeBatches(state, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].checkpoint != 8 || got[0].subtask != 1 || got[0].seq != 5 {
		t.Fatalf("decoded %+v", got)
	}
	if m := messages(t, got[0]); !slices.Equal(m, []string{`out/a ,"value":1}`, `out/b ,"value":2}`}) {
		t.Fatalf("messages %q", m)
	}
	c := got[0].cursor()
	if seq, _, _, _, _ := c.message(); seq != 5 {
		t.Fatalf("the first message left is %d, want 5", seq)
	}
	if _, _, err := decodeBatches(state[:len(state)-1], 0); err == nil {
		t.Fatal("a truncated old state decoded")
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
	_, got, err := decodeBatches(old, 3)
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
	var small, large batch // one block as it is, and one deflated
	for i := range 5 {
		small.add([]string{"t/", ""}, fmt.Sprint(i), []byte(`,"value":1}`))
	}
	for i := range 100 {
		large.add([]string{"t/", ""}, fmt.Sprint(i), []byte(`,"value":1}`))
	}
	large.seal()
	large.drop()
	small.seal()
	if !large.blocks[0].deflated || small.blocks[0].deflated {
		t.Fatal("the test needs one block deflated and one not")
	}
	if k := small.blocks[0]; cap(k.data) > 2*len(k.data) {
		t.Fatalf("a small block sealed as it is keeps %d bytes of room for %d", cap(k.data), len(k.data))
	}
	state := bytes.Join(encodeBatches(numbering{}, []*batch{&small, &large}), nil)
	for n := len(stateMagic); n < len(state); n++ {
		if _, _, err := decodeBatches(state[:n], 0); err == nil {
			t.Fatalf("a state cut at %d of %d bytes decoded", n, len(state))
		}
	}
	if _, _, err := decodeBatches(append(state, 0), 0); err == nil {
		t.Fatal("trailing bytes decoded")
	}
	// Acknowledged messages can only be at the start of a batch.
	var two batch
	for i := range 2000 {
		two.add([]string{"t/", ""}, fmt.Sprint(i), []byte(`,"value":1}`))
	}
	two.seal()
	two.blocks[1].skip = 1
	if _, _, err := decodeBatches(bytes.Join(encodeBatches(numbering{}, []*batch{&two}), nil), 0); err == nil {
		t.Fatal("a state with acknowledged messages in its second block decoded")
	}
}

// FuzzSinkState: no input makes the sink's state decoder panic, and what it
// accepts survives encoding and decoding again unchanged.
func FuzzSinkState(f *testing.F) {
	var b batch
	b.add([]string{"out/", ""}, "k", []byte(`,"value":1}`))
	f.Add(bytes.Join(encodeBatches(numbering{}, []*batch{&b}), nil))
	for i := range 100 {
		b.add([]string{"out/", ""}, fmt.Sprint(i), []byte(`,"value":1}`))
	}
	b.seal()
	f.Add(bytes.Join(encodeBatches(numbering{}, []*batch{&b}), nil))
	f.Add([]byte(`[{"c":1,"m":[{"t":"x","b":"LA=="}]}]`))
	f.Add([]byte(`[{"c":1,"m":[{"t":"x","b":"LA=="},{"t":"a#","b":"LA=="},{"t":"y","b":"LA=="}]}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		gotN, got, err := decodeBatches(data, 0)
		if err != nil {
			return
		}
		once := bytes.Join(encodeBatches(gotN, got), nil)
		againN, again, err := decodeBatches(once, 0)
		if err != nil {
			t.Fatalf("state %x: its own encoding %x does not decode: %v", data, once, err)
		}
		if twice := bytes.Join(encodeBatches(againN, again), nil); string(twice) != string(once) {
			t.Fatalf("state %x encodes as %x, then as %x", data, once, twice)
		}
		// What a restoring sink keeps of batches with topics no broker
		// takes has none, and each message its own sequence number.
		s := &sink{name: "sink", ctx: sinkContext(new(rejects))}
		for _, b := range got {
			kept, err := s.dropBadTopics(b)
			if err != nil {
				t.Fatalf("state %x: %v", data, err)
			}
			last := int64(b.seq) - 1
			for _, k := range kept {
				c := k.cursor()
				for {
					seq, topic, _, ok, err := c.message()
					if err != nil || !ok {
						break
					}
					if CheckTopic(topic) != nil || int64(seq) <= last {
						t.Fatalf("state %x: kept %q at %d after %d", data, topic, seq, last)
					}
					last = int64(seq)
				}
			}
		}
	})
}
