package mqttio

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// batch is one checkpoint's output of one sink subtask: the messages not
// yet acknowledged by the broker, encoded back to back in blocks of
// blockSize bytes as uvarint length, topic, uvarint length, body (the
// Output JSON after its id). A message never spans two blocks, and a block
// is never written again once a later one exists, so what the publisher
// reads needs no copy. Messages leave from the front as the broker
// acknowledges them.
type batch struct {
	checkpoint uint64
	subtask    int    // the subtask whose ids the messages carry
	seq        uint64 // sequence number, within the batch, of the first message left
	blocks     [][]byte
	size       int // bytes left in blocks
}

const blockSize = 32 << 10

// add appends a message to b: its topic is the parts of the sink's topic
// joined by key. It returns the bytes b grew by.
func (b *batch) add(topic []string, key string, body []byte) int {
	topicLen := len(key) * (len(topic) - 1)
	for _, p := range topic {
		topicLen += len(p)
	}
	n := 2*binary.MaxVarintLen64 + topicLen + len(body) // at most
	if len(b.blocks) == 0 || cap(b.blocks[len(b.blocks)-1])-len(b.blocks[len(b.blocks)-1]) < n {
		b.blocks = append(b.blocks, make([]byte, 0, max(blockSize, n)))
	}
	last := &b.blocks[len(b.blocks)-1]
	before := len(*last)
	*last = binary.AppendUvarint(*last, uint64(topicLen))
	for i, p := range topic {
		if i > 0 {
			*last = append(*last, key...)
		}
		*last = append(*last, p...)
	}
	*last = binary.AppendUvarint(*last, uint64(len(body)))
	*last = append(*last, body...)
	b.size += len(*last) - before
	return len(*last) - before
}

// cursor is a place in a batch: the next message to read. It holds its
// own slices of the batch's blocks, which are never written again, so drop
// does not move it.
type cursor struct {
	b    *batch
	seq  uint64   // the sequence number of the next message
	rest []byte   // the rest of the block the next message is in
	more [][]byte // the blocks after it
}

// cursor returns a cursor at b's first message left.
func (b *batch) cursor() cursor {
	c := cursor{b: b, seq: b.seq}
	if len(b.blocks) > 0 {
		c.rest, c.more = b.blocks[0], slices.Clip(b.blocks[1:])
	}
	return c
}

// message returns the message at c and moves c past it; false at the end
// of the batch. The body aliases the batch's block.
func (c *cursor) message() (seq uint64, topic string, body []byte, ok bool) {
	for len(c.rest) == 0 {
		if len(c.more) == 0 {
			return 0, "", nil, false
		}
		c.rest, c.more = c.more[0], c.more[1:]
	}
	topic, body, n, _ := nextMessage(c.rest)
	c.rest = c.rest[n:]
	c.seq++
	return c.seq - 1, topic, body, true
}

// drop removes b's first message and returns its bytes.
func (b *batch) drop() int {
	_, _, n, _ := nextMessage(b.blocks[0])
	b.blocks[0] = b.blocks[0][n:]
	b.size -= n
	b.seq++
	if len(b.blocks[0]) == 0 {
		b.blocks[0] = nil
		b.blocks = b.blocks[1:]
	}
	return n
}

// nextMessage decodes the message at the start of buf and says how many
// bytes it took.
func nextMessage(buf []byte) (topic string, body []byte, n int, err error) {
	field := func() ([]byte, error) {
		l, k := binary.Uvarint(buf[n:])
		if k <= 0 || l > uint64(len(buf)-n-k) {
			return nil, errors.New("truncated message")
		}
		n += k + int(l)
		return buf[n-int(l) : n], nil
	}
	t, err := field()
	if err != nil {
		return "", nil, 0, err
	}
	body, err = field()
	if err != nil {
		return "", nil, 0, err
	}
	return string(t), body, n, nil
}

// The sink's state: stateMagic, then the number of batches and, for each,
// its checkpoint, subtask, first sequence number, the length of its
// messages and the messages.
var stateMagic = []byte("CRSK\x01")

// encodeBatches returns the state holding bs, in parts: the blocks of bs
// as they are, between the headers. The blocks must not change after.
func encodeBatches(bs []*batch) [][]byte {
	head := append(slices.Clip(stateMagic), binary.AppendUvarint(nil, uint64(len(bs)))...)
	parts := make([][]byte, 0, 1+len(bs)*4)
	for _, b := range bs {
		head = binary.AppendUvarint(head, b.checkpoint)
		head = binary.AppendUvarint(head, uint64(b.subtask))
		head = binary.AppendUvarint(head, b.seq)
		head = binary.AppendUvarint(head, uint64(b.size))
		parts = append(parts, head)
		parts = append(parts, b.blocks...)
		head = nil
	}
	return parts
}

// decodeBatches reads a state written by encodeBatches, or by cairn
// before it (JSON); own is the restoring subtask, whose ids the batches of
// such old states carry unless they name their own.
func decodeBatches(data []byte, own int) ([]*batch, error) {
	if len(data) == 0 {
		return nil, nil
	}
	if !bytes.HasPrefix(data, stateMagic) {
		return decodeJSONBatches(data, own)
	}
	buf := data[len(stateMagic):]
	uvarint := func() (uint64, error) {
		v, k := binary.Uvarint(buf)
		if k <= 0 {
			return 0, errors.New("truncated state")
		}
		buf = buf[k:]
		return v, nil
	}
	count, err := uvarint()
	if err != nil {
		return nil, err
	}
	var out []*batch
	for range count {
		var head [4]uint64
		for i := range head {
			if head[i], err = uvarint(); err != nil {
				return nil, err
			}
		}
		if head[1] > 1<<20 || head[3] > uint64(len(buf)) {
			return nil, fmt.Errorf("batch of checkpoint %d: bad subtask %d or length %d", head[0], head[1], head[3])
		}
		msgs := bytes.Clone(buf[:head[3]])
		buf = buf[head[3]:]
		for rest := msgs; len(rest) > 0; {
			_, _, n, err := nextMessage(rest)
			if err != nil {
				return nil, fmt.Errorf("batch of checkpoint %d: %w", head[0], err)
			}
			rest = rest[n:]
		}
		b := &batch{checkpoint: head[0], subtask: int(head[1]), seq: head[2], size: len(msgs)}
		if len(msgs) > 0 {
			b.blocks = [][]byte{msgs}
		}
		out = append(out, b)
	}
	if len(buf) > 0 {
		return nil, errors.New("trailing bytes")
	}
	return out, nil
}

// decodeJSONBatches reads the sink state of cairn before the encoding
// above: a JSON array of batches, whose message bodies were base64.
func decodeJSONBatches(data []byte, own int) ([]*batch, error) {
	var old []struct {
		Checkpoint uint64 `json:"c"`
		Messages   []struct {
			Topic string `json:"t"`
			Body  []byte `json:"b"`
		} `json:"m"`
		Subtask *int `json:"s,omitempty"`
	}
	if err := json.Unmarshal(data, &old); err != nil {
		return nil, err
	}
	out := make([]*batch, 0, len(old))
	for _, o := range old {
		b := &batch{checkpoint: o.Checkpoint, subtask: own}
		if o.Subtask != nil {
			b.subtask = *o.Subtask
		}
		for _, m := range o.Messages {
			b.add([]string{m.Topic}, "", m.Body)
		}
		out = append(out, b)
	}
	return out, nil
}
