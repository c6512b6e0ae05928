package ingest

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/cairn-edge/cairn/wire"
)

// A group is the messages of one group commit, one record of the log,
// whose fields are wire's: a format byte, the receipt time (varint, Unix
// milliseconds), then the messages, plain or deflated. Per message: its
// packet id (uvarint); in the formats with publishers, its publisher's
// client id as the length of the prefix it shares with the publisher
// before (uvarint) and the rest (length-prefixed); its topic, the same
// way; and its payload (length-prefixed). The record's count is the
// number of messages. A group none of whose messages has a publisher
// (all from a remote broker) is written in the formats without.
//
// Readings of a device fleet are much alike: deflating a group of 20 takes
// it to about a quarter, at about a microsecond a message, and the log's
// syncs write that much less. A group that does not shrink by a tenth is
// stored plain.
const (
	groupPlain              = 0
	groupDeflated           = 1
	groupPlainPublishers    = 2
	groupDeflatedPublishers = 3
)

// minDeflate is the smallest group worth deflating.
const minDeflate = 256

// minMessageBytes is the fewest bytes a message of a group takes: packet
// id, shared prefix, rest of the topic, payload.
const minMessageBytes = 4

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
	plain := wire.Encoder(c.plain[:0])
	publishers := slices.ContainsFunc(msgs, func(m Message) bool { return m.Publisher != "" })
	prev, prevPublisher := "", ""
	n := 0
	for _, m := range msgs {
		if n > 0 && len(plain)+len(m.Publisher)+len(m.Topic)+len(m.Payload)+30 > maxGroupBytes {
			break
		}
		plain.Uvarint(uint64(m.PacketID))
		if publishers {
			prefixed(&plain, prevPublisher, m.Publisher)
			prevPublisher = m.Publisher
		}
		prefixed(&plain, prev, m.Topic)
		plain.Bytes(m.Payload)
		prev = m.Topic
		n++
	}
	c.plain = plain
	e := wire.Encoder(dst)
	// A group over maxGroupBytes (one large message) is stored plain: a
	// deflated one is never inflated past that size (inflate).
	format := byte(groupPlain)
	if publishers {
		format = groupPlainPublishers
	}
	if len(c.plain) >= minDeflate && len(c.plain) <= maxGroupBytes && c.deflate() {
		e.Byte(format + 1) // the deflated format of each pair
		e.Varint(msgs[0].Received.UnixMilli())
		e.Raw(c.packed.Bytes())
	} else {
		e.Byte(format)
		e.Varint(msgs[0].Received.UnixMilli())
		e.Raw(c.plain)
	}
	if cap(c.plain) > maxGroupBytes {
		c.plain = nil // do not hold on to a large group
	}
	return e, n
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

// prefixed appends s to e as the length of the prefix it shares with
// prev and the rest.
func prefixed(e *wire.Encoder, prev, s string) {
	shared := sharedPrefix(prev, s)
	e.Uvarint(uint64(shared))
	e.String(s[shared:])
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
	d := wire.NewDecoder(data)
	format := d.Byte()
	ms := d.Varint()
	switch {
	case d.Err() != nil:
		return nil, fmt.Errorf("not a message group: %w", d.Err())
	case format > groupDeflatedPublishers || count < 1 || count > maxGroupBytes:
		return nil, fmt.Errorf("not a message group: format %d, %d messages", format, count)
	}
	publishers := format >= groupPlainPublishers
	p := d.Rest()
	if format == groupDeflated || format == groupDeflatedPublishers {
		var err error
		if p, err = c.inflate(p); err != nil {
			return nil, fmt.Errorf("a deflated group: %w", err)
		}
	}
	if count > len(p)/minMessageBytes {
		return nil, fmt.Errorf("%d bytes for %d messages", len(p), count)
	}
	received := time.UnixMilli(ms)
	d = wire.NewDecoder(p)
	dst = slices.Grow(dst[:0], count)
	prev, prevPublisher := "", ""
	for i := range count {
		id := d.Uvarint()
		if d.Err() == nil && id > 0xffff {
			d.Fail(fmt.Errorf("packet id %d", id))
		}
		publisher := prevPublisher
		if publishers {
			publisher = unprefixed(&d, prevPublisher)
		}
		topic := unprefixed(&d, prev)
		payload := d.Bytes()
		if err := d.Err(); err != nil {
			return nil, fmt.Errorf("message %d of %d: %w", i, count, err)
		}
		dst = append(dst, Message{Topic: topic, Payload: payload, Received: received, PacketID: uint16(id), Publisher: publisher})
		prev, prevPublisher = topic, publisher
	}
	if err := d.End(); err != nil {
		return nil, fmt.Errorf("after the group's %d messages: %w", count, err)
	}
	return dst, nil
}

// unprefixed reads from d a string prefixed wrote after prev; d fails if
// it says it shares more than prev has.
func unprefixed(d *wire.Decoder, prev string) string {
	shared, suffix := d.Uvarint(), d.Bytes()
	if d.Err() != nil {
		return ""
	}
	if shared > uint64(len(prev)) {
		d.Fail(fmt.Errorf("a string sharing %d bytes of a %d-byte one", shared, len(prev)))
		return ""
	}
	return prev[:shared] + string(suffix)
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
