package mqttio

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// A group is the messages of one group commit, one record of the log: a
// format byte, the receipt time (varint, Unix milliseconds), then the
// messages, plain (format groupPlain) or deflated (groupDeflated). Per
// message: its packet id (uvarint), its topic as the length of the prefix
// it shares with the topic before (uvarint) and the rest (uvarint length,
// bytes), and its payload (uvarint length, bytes). The record's count is
// the number of messages.
//
// Readings of a device fleet are much alike: deflating a group of 20 takes
// it to about a quarter, at about a microsecond a message, and the log's
// syncs write that much less. A group that does not shrink by a tenth is
// stored plain.
const (
	groupPlain    = 0
	groupDeflated = 1
)

// minDeflate is the smallest group worth deflating.
const minDeflate = 256

// groupCodec encodes and decodes groups, keeping its buffers and the
// compressor between them. It is not safe for concurrent use.
type groupCodec struct {
	plain    []byte
	packed   bytes.Buffer
	w        *flate.Writer
	r        io.ReadCloser
	src      bytes.Reader
	inflated []byte
}

// encode appends to dst the group of as many of msgs as fit maxGroupBytes
// (at least one) and returns how many.
func (c *groupCodec) encode(dst []byte, msgs []Message) ([]byte, int) {
	c.plain = c.plain[:0]
	prev := ""
	n := 0
	for _, m := range msgs {
		if n > 0 && len(c.plain)+len(m.Topic)+len(m.Payload)+20 > maxGroupBytes {
			break
		}
		shared := sharedPrefix(prev, m.Topic)
		c.plain = binary.AppendUvarint(c.plain, uint64(m.PacketID))
		c.plain = binary.AppendUvarint(c.plain, uint64(shared))
		c.plain = binary.AppendUvarint(c.plain, uint64(len(m.Topic)-shared))
		c.plain = append(c.plain, m.Topic[shared:]...)
		c.plain = binary.AppendUvarint(c.plain, uint64(len(m.Payload)))
		c.plain = append(c.plain, m.Payload...)
		prev = m.Topic
		n++
	}
	received := msgs[0].Received.UnixMilli()
	// A group over maxGroupBytes (one large message) is stored plain: a
	// deflated one is never inflated past that size (inflate).
	if len(c.plain) >= minDeflate && len(c.plain) <= maxGroupBytes && c.deflate() {
		dst = binary.AppendVarint(append(dst, groupDeflated), received)
		dst = append(dst, c.packed.Bytes()...)
	} else {
		dst = binary.AppendVarint(append(dst, groupPlain), received)
		dst = append(dst, c.plain...)
	}
	if cap(c.plain) > maxGroupBytes {
		c.plain = nil // do not hold on to a large group
	}
	return dst, n
}

// deflate compresses c.plain into c.packed and reports whether that saved
// a tenth.
func (c *groupCodec) deflate() bool {
	c.packed.Reset()
	if c.w == nil {
		c.w, _ = flate.NewWriter(&c.packed, flate.BestSpeed)
	} else {
		c.w.Reset(&c.packed)
	}
	if _, err := c.w.Write(c.plain); err != nil {
		return false
	}
	if err := c.w.Close(); err != nil {
		return false
	}
	return c.packed.Len() < len(c.plain)-len(c.plain)/10
}

func sharedPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// decode decodes a group of count messages into dst. Payloads point into
// data, or into the codec's buffer if the group is deflated: they are
// valid until the next decode. Topics are strings of their own.
func (c *groupCodec) decode(data []byte, count int, dst []Message) ([]Message, error) {
	if len(data) < 2 || data[0] > groupDeflated || count < 1 || count > maxGroupBytes {
		return nil, errors.New("not a message group")
	}
	ms, k := binary.Varint(data[1:])
	if k <= 0 {
		return nil, errors.New("bad receipt time")
	}
	p := data[1+k:]
	if data[0] == groupDeflated {
		var err error
		if p, err = c.inflate(p); err != nil {
			return nil, fmt.Errorf("a deflated group: %w", err)
		}
	}
	if count > len(p) {
		return nil, errors.New("fewer bytes than messages")
	}
	received := time.UnixMilli(ms)
	uvarint := func() (uint64, bool) {
		v, k := binary.Uvarint(p)
		if k <= 0 {
			return 0, false
		}
		p = p[k:]
		return v, true
	}
	take := func(n uint64) ([]byte, bool) {
		if n > uint64(len(p)) {
			return nil, false
		}
		b := p[:n:n]
		p = p[n:]
		return b, true
	}
	dst = slices.Grow(dst[:0], count)
	prev := ""
	for range count {
		id, ok1 := uvarint()
		shared, ok2 := uvarint()
		rest, ok3 := uvarint()
		suffix, ok4 := take(rest)
		if !ok1 || !ok2 || !ok3 || !ok4 || id > 0xffff || shared > uint64(len(prev)) {
			return nil, errors.New("truncated or malformed message")
		}
		topic := prev[:shared] + string(suffix)
		size, ok1 := uvarint()
		payload, ok2 := take(size)
		if !ok1 || !ok2 {
			return nil, errors.New("truncated or malformed message")
		}
		dst = append(dst, Message{Topic: topic, Payload: payload, Received: received, PacketID: uint16(id)})
		prev = topic
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%d bytes after the group's %d messages", len(p), count)
	}
	return dst, nil
}

// inflate decompresses packed into the codec's buffer, at most
// maxGroupBytes and a little more.
func (c *groupCodec) inflate(packed []byte) ([]byte, error) {
	c.src.Reset(packed)
	if c.r == nil {
		c.r = flate.NewReader(&c.src)
	} else if err := c.r.(flate.Resetter).Reset(&c.src, nil); err != nil {
		return nil, err
	}
	out := c.inflated[:0]
	for {
		if len(out) == cap(out) {
			if len(out) > maxGroupBytes+1024 {
				return nil, errors.New("larger than a group can be")
			}
			out = slices.Grow(out, max(4096, len(out)))
		}
		n, err := c.r.Read(out[len(out):cap(out)])
		out = out[:len(out)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if cap(out) <= maxGroupBytes {
		c.inflated = out
	} else {
		c.inflated = nil // do not hold on to a large group
	}
	return out, nil
}
