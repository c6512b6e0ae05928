package mqttio

import (
	"bufio"
	"errors"
	"io"
)

// publishLimiter reads MQTT packets from a broker and passes them on
// unchanged, but for a PUBLISH whose payload is longer than max bytes: it
// passes that one with its payload cut to max+1 bytes and its remaining
// length set to match, and discards the rest as it arrives. paho reads a
// whole packet into memory before it hands it over: a single 100 MB
// message took the agent from 16 MB to 1.2 GB, and, logged, again at
// every start. Cut, it still reaches the source, whose decoder sees it is
// over its limit and makes it a dead letter, and is acknowledged as any
// other: the broker does not send it again.
//
// It parses the fixed header of every packet (MQTT 3.1.1 §2.2), and the
// variable header (topic, packet identifier) of a PUBLISH whose remaining
// length exceeds max, to find where its payload starts.
type publishLimiter struct {
	r   *bufio.Reader
	max int

	out     []byte // a packet's headers, to hand over first
	pass    int    // then this many bytes read through
	discard int    // then this many bytes dropped
	err     error
}

func newPublishLimiter(r *bufio.Reader, max int) *publishLimiter {
	return &publishLimiter{r: r, max: max}
}

func (l *publishLimiter) Read(p []byte) (int, error) {
	for {
		switch {
		case len(p) == 0:
			return 0, nil
		case len(l.out) > 0:
			n := copy(p, l.out)
			l.out = l.out[n:]
			return n, nil
		case l.pass > 0:
			n, err := l.r.Read(p[:min(len(p), l.pass)])
			l.pass -= n
			return n, err
		case l.discard > 0:
			n, err := l.r.Discard(l.discard)
			l.discard -= n
			if err != nil {
				return 0, err
			}
		case l.err != nil:
			return 0, l.err
		default:
			if err := l.next(); err != nil {
				if len(l.out) == 0 {
					return 0, err
				}
				l.err = err // hand over what was read first
			}
		}
	}
}

const publishPacket = 3

// next reads the headers of the next packet and sets out, pass and
// discard for it.
func (l *publishLimiter) next() error {
	first, err := l.r.ReadByte()
	if err != nil {
		return err
	}
	remaining, lenBytes, err := readRemainingLength(l.r)
	l.out = append(l.out[:0], first)
	l.out = append(l.out, lenBytes...)
	if err != nil {
		return err
	}
	if first>>4 != publishPacket || remaining <= l.max {
		l.pass = remaining // no payload can be over the limit
		return nil
	}
	// A PUBLISH: topic (a length and the name), a packet identifier at
	// QoS 1 and 2, then the payload.
	var topicLen [2]byte
	if _, err := io.ReadFull(l.r, topicLen[:]); err != nil {
		return err
	}
	header := 2 + (int(topicLen[0])<<8 | int(topicLen[1]))
	if (first>>1)&3 != 0 {
		header += 2
	}
	payload := remaining - header
	if payload <= l.max {
		l.out = append(l.out, topicLen[:]...)
		l.pass = remaining - 2
		return nil
	}
	keep := l.max + 1
	l.out = append(l.out[:1], encodeRemainingLength(header+keep)...)
	l.out = append(l.out, topicLen[:]...)
	l.pass, l.discard = header-2+keep, payload-keep
	return nil
}

var errMalformedLength = errors.New("malformed MQTT remaining length")

// readRemainingLength reads a packet's remaining length (a variable-length
// integer of at most four bytes) and returns it and its bytes.
func readRemainingLength(r io.ByteReader) (int, []byte, error) {
	var n, shift int
	var raw []byte
	for {
		b, err := r.ReadByte()
		if err != nil {
			return 0, raw, err
		}
		raw = append(raw, b)
		n |= int(b&0x7f) << shift
		if b&0x80 == 0 {
			return n, raw, nil
		}
		if shift += 7; shift > 21 {
			return 0, raw, errMalformedLength
		}
	}
}

func encodeRemainingLength(n int) []byte {
	var out []byte
	for {
		b := byte(n & 0x7f)
		if n >>= 7; n > 0 {
			b |= 0x80
		}
		out = append(out, b)
		if n == 0 {
			return out
		}
	}
}
