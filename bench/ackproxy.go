package bench

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"time"
)

// ackProxy sits between the agent and its broker and times, from the
// broker's side of the wire, each QoS 1 message the broker sends until the
// agent's PUBACK for it: how long the agent holds the broker's messages
// unacknowledged. It speaks MQTT 3.1.1 framing only, and passes every byte
// through unchanged.
type ackProxy struct {
	l      net.Listener
	broker string // host:port

	mu       sync.Mutex
	delays   []time.Duration // PUBLISH to PUBACK, since the last take
	conns    []net.Conn
	accepted sync.WaitGroup
}

// newAckProxy listens on a free loopback port for connections to broker
// (host:port).
func newAckProxy(broker string) (*ackProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &ackProxy{l: l, broker: broker}
	p.accepted.Add(1)
	go p.accept()
	return p, nil
}

// URL is where the agent connects to.
func (p *ackProxy) URL() string { return "tcp://" + p.l.Addr().String() }

func (p *ackProxy) accept() {
	defer p.accepted.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", p.broker)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, b)
		p.mu.Unlock()
		sent := &sentTimes{at: make(map[uint16]time.Time)}
		go p.pipe(b, c, func(typ byte, body []byte) { // broker to agent
			if id, ok := publishID(typ, body); ok {
				sent.put(id, time.Now())
			}
		})
		go p.pipe(c, b, func(typ byte, body []byte) { // agent to broker
			if typ>>4 == pubackType && len(body) >= 2 {
				if at, ok := sent.take(binary.BigEndian.Uint16(body)); ok {
					p.mu.Lock()
					p.delays = append(p.delays, time.Since(at))
					p.mu.Unlock()
				}
			}
		})
	}
}

// MQTT control packet types.
const (
	publishType = 3
	pubackType  = 4
)

// publishID is the packet id of a QoS 1 or 2 PUBLISH.
func publishID(typ byte, body []byte) (uint16, bool) {
	if typ>>4 != publishType || typ>>1&3 == 0 || len(body) < 2 {
		return 0, false
	}
	n := int(binary.BigEndian.Uint16(body))
	if len(body) < 2+n+2 {
		return 0, false
	}
	return binary.BigEndian.Uint16(body[2+n:]), true
}

// sentTimes are when the broker sent the messages not yet acknowledged.
type sentTimes struct {
	mu sync.Mutex
	at map[uint16]time.Time
}

func (s *sentTimes) put(id uint16, t time.Time) {
	s.mu.Lock()
	s.at[id] = t
	s.mu.Unlock()
}

func (s *sentTimes) take(id uint16) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.at[id]
	delete(s.at, id)
	return t, ok
}

// pipe copies packets from src to dst, showing each to seen (its first
// byte, type and flags, and its body) before passing it on.
func (p *ackProxy) pipe(src, dst net.Conn, seen func(typ byte, body []byte)) {
	defer src.Close()
	defer dst.Close()
	r := bufio.NewReaderSize(src, 64<<10)
	var buf []byte
	for {
		head, body, err := readPacket(r, buf[:0])
		if err != nil {
			return
		}
		seen(head[0], body)
		buf = append(head, body...)
		if _, err := dst.Write(buf); err != nil {
			return
		}
	}
}

// readPacket reads one MQTT packet: its fixed header and its body.
func readPacket(r *bufio.Reader, buf []byte) (head, body []byte, err error) {
	b, err := r.ReadByte()
	if err != nil {
		return nil, nil, err
	}
	head = append(buf, b)
	size := 0
	for shift := 0; ; shift += 7 {
		if shift > 21 {
			return nil, nil, errors.New("malformed remaining length")
		}
		b, err := r.ReadByte()
		if err != nil {
			return nil, nil, err
		}
		head = append(head, b)
		size |= int(b&0x7f) << shift
		if b&0x80 == 0 {
			break
		}
	}
	body = make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, nil, err
	}
	return head, body, nil
}

// take returns the delays seen since the last take, sorted.
func (p *ackProxy) take() []time.Duration {
	p.mu.Lock()
	d := p.delays
	p.delays = nil
	p.mu.Unlock()
	slices.Sort(d)
	return d
}

// Close stops listening and closes every connection.
func (p *ackProxy) Close() error {
	err := p.l.Close()
	p.accepted.Wait()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	return err
}

// percentile is the p-th percentile (0-100) of sorted delays, 0 if none.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p/100))]
}
