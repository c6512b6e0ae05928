package mqttio

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/cairn-edge/cairn/wire"
)

// batch is one checkpoint's output of one sink subtask: the messages not
// yet acknowledged by the broker, encoded back to back in blocks of about
// blockSize bytes as two length-prefixed fields (package wire): topic, and
// body (the Output JSON after its id). A message never spans two blocks. Only the
// last block of the current batch is written to; every other block is
// sealed: deflated when that makes it smaller (a window that fires for
// 100,000 keys at once stages 12 MB of JSON, held in about a tenth), and
// never written again, so what a snapshot or the publisher reads needs no
// copy. Messages leave from the front as the broker acknowledges them; a
// block goes once all of its messages have.
type batch struct {
	checkpoint uint64
	subtask    int    // the subtask whose ids the messages carry
	seq        uint64 // sequence number, within the batch, of the first message left
	// epoch and base place the batch in its subtask's numbering: message
	// seq is output base+seq of the numbering begun at checkpoint epoch
	// (outputID). Epoch 0 marks a batch of a cairn before numberings,
	// whose ids were "<checkpoint>-<subtask>-<seq>".
	epoch, base uint64
	blocks      []block
	size        int // bytes the blocks hold (deflated, for deflated ones)
	// badTopics says a message may have a topic CheckTopic refuses: one
	// read back from the state of a cairn that did not check topics.
	badTopics bool
}

// block is a run of whole messages.
type block struct {
	data     []byte // the messages, or their deflated form
	deflated bool
	raw      int // bytes of the messages, inflated
	count    int // messages in the block
	skip     int // messages at its start already acknowledged
}

const blockSize = 32 << 10

// sealFrom is the smallest block worth deflating.
const sealFrom = 512

// add appends a message to b: its topic is the parts of the sink's topic
// joined by key. It returns how much the bytes b holds changed by, which
// is less than zero when the block before it was sealed smaller.
func (b *batch) add(topic []string, key string, body []byte) int {
	topicLen := len(key) * (len(topic) - 1)
	for _, p := range topic {
		topicLen += len(p)
	}
	n := 2*10 + topicLen + len(body) // at most: a uvarint takes up to 10 bytes
	before := b.size
	if len(b.blocks) == 0 || cap(b.last().data)-len(b.last().data) < n {
		b.seal()
		b.blocks = append(b.blocks, block{data: make([]byte, 0, max(blockSize, n))})
	}
	last := b.last()
	data := wire.Encoder(last.data)
	data.Uvarint(uint64(topicLen)) // the topic's parts follow
	for i, p := range topic {
		if i > 0 {
			data = append(data, key...)
		}
		data = append(data, p...)
	}
	data.Bytes(body)
	b.size += len(data) - len(last.data)
	last.data, last.raw = data, len(data)
	last.count++
	return b.size - before
}

func (b *batch) last() *block { return &b.blocks[len(b.blocks)-1] }

// seal deflates b's last block if that makes it smaller; no message may be
// added to that block after. The block keeps no room to grow: a block
// sealed at a snapshot may hold a few messages of its 32 KiB.
func (b *batch) seal() {
	if len(b.blocks) == 0 || b.last().deflated {
		return
	}
	last := b.last()
	if len(last.data) >= sealFrom {
		if d := deflate(last.data); len(d) < len(last.data) {
			b.size -= len(last.data) - len(d)
			last.data, last.deflated = d, true
			return
		}
	}
	if cap(last.data) > len(last.data) {
		last.data = bytes.Clone(last.data)
	}
}

// deflater is a flate writer at BestSpeed and the buffer it writes to,
// kept for reuse: the writer holds several hundred kilobytes of tables.
// Deflating costs about 0.4 µs a message here, a third of what staging it
// costs in all (BenchmarkSinkStage); a sink publishes tens of thousands a
// second at most.
type deflater struct {
	w   *flate.Writer
	buf bytes.Buffer
}

var deflaters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.BestSpeed) // the level is valid
	return &deflater{w: w}
}}

// deflate returns raw deflated, in a slice of its own size.
func deflate(raw []byte) []byte {
	d := deflaters.Get().(*deflater)
	defer deflaters.Put(d)
	d.buf.Reset()
	d.w.Reset(&d.buf)
	d.w.Write(raw) // a bytes.Buffer does not fail
	d.w.Close()
	return bytes.Clone(d.buf.Bytes())
}

var inflaters = sync.Pool{New: func() any { return flate.NewReader(bytes.NewReader(nil)) }}

// messages returns the messages of k, inflated into a new slice if need be.
func (k *block) messages() ([]byte, error) {
	if !k.deflated {
		return k.data, nil
	}
	r := inflaters.Get().(io.ReadCloser)
	defer inflaters.Put(r)
	if err := r.(flate.Resetter).Reset(bytes.NewReader(k.data), nil); err != nil {
		return nil, err
	}
	out := make([]byte, k.raw)
	if _, err := io.ReadFull(r, out); err != nil {
		return nil, fmt.Errorf("deflated block of %d bytes: %w", k.raw, err)
	}
	if n, _ := r.Read(make([]byte, 1)); n > 0 {
		return nil, fmt.Errorf("deflated block longer than %d bytes", k.raw)
	}
	return out, nil
}

// cursor is a place in a batch: the next message to read. It holds its
// own copies of the batch's blocks, which are never written again, so drop
// does not move it.
type cursor struct {
	b    *batch
	seq  uint64  // the sequence number of the next message
	rest []byte  // the rest of the block the next message is in, inflated
	skip int     // messages at the start of rest to pass over
	more []block // the blocks after it
}

// cursor returns a cursor at b's first message left.
func (b *batch) cursor() cursor {
	return cursor{b: b, seq: b.seq, more: slices.Clone(b.blocks)} // drop changes b's
}

// message returns the message at c and moves c past it; false at the end
// of the batch. The body aliases the batch's block or the cursor's copy of
// it. An error says a block does not inflate, which cannot happen to the
// blocks of batch.add, or of decodeBatches, which checks them.
func (c *cursor) message() (seq uint64, topic string, body []byte, ok bool, err error) {
	for {
		for len(c.rest) == 0 {
			if len(c.more) == 0 {
				c.rest, c.more = nil, nil // hold nothing read
				return 0, "", nil, false, nil
			}
			if c.rest, err = c.more[0].messages(); err != nil {
				return 0, "", nil, false, err
			}
			c.skip = c.more[0].skip
			c.more[0] = block{} // the cursor's own copy: let the block go
			c.more = c.more[1:]
		}
		topic, body, n, err := nextMessage(c.rest)
		if err != nil {
			return 0, "", nil, false, err
		}
		c.rest = c.rest[n:]
		if c.skip > 0 {
			c.skip--
			continue
		}
		c.seq++
		return c.seq - 1, topic, body, true, nil
	}
}

// drop removes b's first message and returns how much the bytes b holds
// changed by: minus its block's when that was its last message, else 0.
func (b *batch) drop() int {
	first := &b.blocks[0]
	first.skip++
	b.seq++
	if first.skip < first.count {
		return 0
	}
	n := len(first.data)
	b.size -= n
	b.blocks[0] = block{}
	b.blocks = b.blocks[1:]
	return -n
}

// nextMessage decodes the message at the start of buf and says how many
// bytes it took.
func nextMessage(buf []byte) (topic string, body []byte, n int, err error) {
	d := wire.NewDecoder(buf)
	t := d.Bytes()
	body = d.Bytes()
	if err := d.Err(); err != nil {
		return "", nil, 0, fmt.Errorf("message: %w", err)
	}
	return string(t), body, len(buf) - d.Len(), nil
}

// The sink's state: the header of magic stateMagic and version
// stateVersion (package wire); the subtask's numbering (epoch, next,
// subtask, parallelism); the number of batches and, for each, its
// checkpoint, subtask, sequence number of the first message left, epoch,
// base and number of blocks; for each block, 1 if deflated else 0, its
// length inflated, its messages, how many of them are acknowledged
// already, its length and its bytes. Every number is a uvarint.
//
// Version 2 was cairn's before numberings: no numbering, and batches
// without epoch and base. Version 1 was before deflated blocks: after the
// checkpoint, subtask and first sequence number, the length of the
// messages left and the messages. Before version 1 the state was JSON
// (decodeJSONBatches).
const (
	stateMagic   = "CRSK"
	stateVersion = 3
)

// The fewest bytes a batch and a block of a state take, which bound how
// many a damaged count can make the decoder allocate.
const (
	minBatchBytes = 4 // checkpoint, subtask, sequence number, blocks (or length)
	minBlockBytes = 5 // deflated, inflated length, messages, acknowledged, length
)

// numbering is how a sink subtask numbers what it stages: from epoch, the
// id of the checkpoint it began at, on; next is the position of the next
// message. Subtask and parallelism are the subtask's when it was stored.
type numbering struct {
	epoch, next          uint64
	subtask, parallelism int
}

// outputID is the id of message seq of b, whose body is body (Output.ID):
// unique per pipeline (sink names the sink) and, where the sink's input
// is ordered (graph.TaskInfo.OrderedInput), the same for the same output
// of a replay. The body's FNV-1a hash ends it, so that a replay that
// computes other output at a position (a record late in one run and not
// in the other, an expression calling now()) gives it another id, never
// the id of output a consumer has seen.
func outputID(dst []byte, sink string, b *batch, seq uint64, body []byte) []byte {
	if b.epoch == 0 {
		return fmt.Appendf(dst, "%d-%d-%d", b.checkpoint, b.subtask, seq)
	}
	h := uint64(14695981039346656037)
	for _, c := range body {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return fmt.Appendf(dst, "%s-%d-%d-%d-%016x", sink, b.epoch, b.subtask, b.base+seq, h)
}

// maxBlock bounds a block's inflated length in a state read back: a block
// holds one message at most when that is larger than blockSize, and MQTT
// messages are smaller than 256 MiB.
const maxBlock = 256 << 20

// encodeBatches returns the state holding n and bs, in parts: the blocks
// of bs as they are, between the headers. The blocks must not change
// after.
func encodeBatches(n numbering, bs []*batch) [][]byte {
	var head wire.Encoder
	head.Header(stateMagic, stateVersion)
	for _, v := range []uint64{n.epoch, n.next, uint64(n.subtask), uint64(n.parallelism), uint64(len(bs))} {
		head.Uvarint(v)
	}
	parts := make([][]byte, 0, 1+len(bs)*4)
	for _, b := range bs {
		for _, v := range []uint64{b.checkpoint, uint64(b.subtask), b.seq, b.epoch, b.base, uint64(len(b.blocks))} {
			head.Uvarint(v)
		}
		for _, k := range b.blocks {
			flag := uint64(0)
			if k.deflated {
				flag = 1
			}
			for _, v := range []uint64{flag, uint64(k.raw), uint64(k.count), uint64(k.skip), uint64(len(k.data))} {
				head.Uvarint(v)
			}
			parts = append(parts, head, k.data)
			head = nil
		}
	}
	if head != nil {
		parts = append(parts, head)
	}
	return parts
}

// decodeBatches reads a state written by encodeBatches, or by cairn
// before it (versions 2 and 1, or JSON before that: no numbering, which
// is then zero); own is the restoring subtask, whose ids the batches of
// JSON states carry unless they name their own. Every block is checked
// whole: its messages, once inflated, are as many as it says. The batches
// hold copies of data's bytes.
func decodeBatches(data []byte, own int) (numbering, []*batch, error) {
	var n numbering
	switch {
	case len(data) == 0:
		return n, nil, nil
	case !bytes.HasPrefix(data, []byte(stateMagic)):
		bs, err := decodeJSONBatches(data, own)
		return n, bs, err
	}
	d := wire.NewDecoder(data)
	version := d.Header(stateMagic)
	switch version {
	case 1, 2:
	case stateVersion:
		n = numbering{epoch: d.Uvarint(), next: d.Uvarint()}
		subtask, parallelism := d.Uvarint(), d.Uvarint()
		if subtask > 1<<20 || parallelism > 1<<20 {
			d.Fail(fmt.Errorf("numbering: bad subtask %d or parallelism %d", subtask, parallelism))
		}
		n.subtask, n.parallelism = int(subtask), int(parallelism)
	default:
		d.Fail(fmt.Errorf("unknown version %d", version))
	}
	count := d.Count(minBatchBytes)
	var out []*batch
	for range count {
		// checkpoint, subtask, seq, [epoch, base,] blocks (v1: length of
		// the messages)
		b := &batch{checkpoint: d.Uvarint()}
		subtask := d.Uvarint()
		b.subtask, b.seq = int(subtask), d.Uvarint()
		if version == stateVersion {
			b.epoch, b.base = d.Uvarint(), d.Uvarint()
		}
		if d.Err() == nil && subtask > 1<<20 {
			d.Fail(fmt.Errorf("batch of checkpoint %d: bad subtask %d", b.checkpoint, subtask))
		}
		var err error
		if version == 1 {
			err = b.readV1(&d)
		} else {
			err = b.readBlocks(&d)
		}
		if err != nil {
			return n, nil, fmt.Errorf("batch of checkpoint %d: %w", b.checkpoint, err)
		}
		out = append(out, b)
	}
	if err := d.End(); err != nil {
		return n, nil, fmt.Errorf("sink state: %w", err)
	}
	return n, out, nil
}

// readBlocks reads a count of blocks into b.
func (b *batch) readBlocks(d *wire.Decoder) error {
	n := d.Count(minBlockBytes)
	for i := range n {
		var f [5]uint64 // deflated, raw, count, skip, length
		for j := range f {
			f[j] = d.Uvarint()
		}
		// Deflate shrinks by at most 1032 to 1: a larger claim is damage,
		// and would make messages allocate for nothing.
		// Only the first block can have acknowledged messages.
		if d.Err() == nil && (f[0] > 1 || f[1] > maxBlock || f[0] == 1 && f[1] > 1032*f[4] || f[3] >= f[2] || f[3] > 0 && i > 0 || f[0] == 0 && f[1] != f[4]) {
			d.Fail(fmt.Errorf("block %d: bad header %v", i, f))
		}
		if f[4] > uint64(d.Len()) {
			d.Fail(fmt.Errorf("block %d: truncated: %d bytes, %d left", i, f[4], d.Len()))
		}
		data := bytes.Clone(d.Take(int(f[4])))
		if err := d.Err(); err != nil {
			return err
		}
		k := block{data: data, deflated: f[0] == 1, raw: int(f[1]), count: int(f[2]), skip: int(f[3])}
		bad, err := checkBlock(k)
		if err != nil {
			return fmt.Errorf("block %d: %w", i, err)
		}
		b.badTopics = b.badTopics || bad
		b.blocks = append(b.blocks, k)
		b.size += len(k.data)
	}
	return d.Err()
}

// checkBlock reports whether k's messages decode and are k.count, and
// whether one has a topic CheckTopic refuses.
func checkBlock(k block) (badTopics bool, err error) {
	msgs, err := k.messages()
	if err != nil {
		return false, err
	}
	n, bad, err := countMessages(msgs)
	if err == nil && n != k.count {
		err = fmt.Errorf("%d messages, not %d", n, k.count)
	}
	return bad, err
}

// countMessages returns how many whole messages msgs holds, and an error if
// it holds anything else; badTopics says one has a topic CheckTopic
// refuses.
func countMessages(msgs []byte) (n int, badTopics bool, err error) {
	for ; len(msgs) > 0; n++ {
		topic, _, used, err := nextMessage(msgs)
		if err != nil {
			return 0, false, err
		}
		badTopics = badTopics || CheckTopic(topic) != nil
		msgs = msgs[used:]
	}
	return n, badTopics, nil
}

// readV1 reads into b the length and messages of a version 1 batch, as
// one block, not deflated.
func (b *batch) readV1(d *wire.Decoder) error {
	n := d.Uvarint()
	if n > uint64(d.Len()) {
		d.Fail(fmt.Errorf("truncated: messages of %d bytes, %d left", n, d.Len()))
	}
	data := bytes.Clone(d.Take(int(n)))
	if err := d.Err(); err != nil || n == 0 {
		return err
	}
	count, bad, err := countMessages(data)
	if err != nil {
		return err
	}
	k := block{data: data, raw: int(n), count: count}
	b.blocks, b.size, b.badTopics = []block{k}, int(n), bad
	return nil
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
			b.badTopics = b.badTopics || CheckTopic(m.Topic) != nil
		}
		b.seal()
		out = append(out, b)
	}
	return out, nil
}
