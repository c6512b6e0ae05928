package mqttio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Message is one MQTT message as the ingest log keeps it.
type Message struct {
	Topic    string
	Payload  []byte
	Received time.Time // when the agent received it (not a reliable clock)
	// PacketID and Sum identify a QoS 1 message for the broker's
	// redelivery after a crash; see Log.Logged.
	PacketID uint16
	Sum      uint64
}

// PayloadSum is the checksum stored with each message to recognise a
// redelivery.
func PayloadSum(topic string, payload []byte) uint64 {
	h := fnv.New64a()
	h.Write([]byte(topic))
	h.Write([]byte{0})
	h.Write(payload)
	return h.Sum64()
}

// bucketLogMeta holds, per log, the offset it was last truncated to.
var bucketLogMeta = []byte("log-meta")

// LogDB is the file of the ingest logs of all sources of an agent: one bbolt
// file, one bucket per source subtask, keys are 8-byte big-endian offsets.
// Open it once per process.
type LogDB struct {
	db   *bolt.DB
	opts LogOptions
	mu   sync.Mutex
	// logs are the open logs by name; a log is shared by the source
	// incarnations of one subtask across job restarts.
	logs map[string]*Log
}

// LogOptions are the ingest log file's fault hooks, for tests.
type LogOptions struct {
	// WriteFault, if set, is called at the end of every write transaction,
	// after its writes and before bbolt commits and fsyncs them. An error
	// fails the transaction, of which nothing is written, as a full or
	// broken disk would (tests inject ENOSPC); a delay holds the commit as
	// a slow fsync would.
	WriteFault func() error
}

// OpenLogDB opens or creates the ingest log file at path.
func OpenLogDB(path string) (*LogDB, error) { return OpenLogDBWith(path, LogOptions{}) }

// OpenLogDBWith is OpenLogDB with fault hooks.
func OpenLogDBWith(path string, opts LogOptions) (*LogDB, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("opening ingest log %s: %w", path, err)
	}
	return &LogDB{db: db, opts: opts, logs: make(map[string]*Log)}, nil
}

// update runs a write transaction, asking WriteFault before the commit.
func (d *LogDB) update(f func(tx *bolt.Tx) error) error {
	return d.db.Update(func(tx *bolt.Tx) error {
		if err := f(tx); err != nil {
			return err
		}
		if d.opts.WriteFault != nil {
			return d.opts.WriteFault()
		}
		return nil
	})
}

// Close closes the file.
func (d *LogDB) Close() error { return d.db.Close() }

// Log returns the log called name, creating it if needed.
func (d *LogDB) Log(name string) (*Log, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if l := d.logs[name]; l != nil {
		return l, nil
	}
	l := &Log{db: d.db, update: d.update, bucket: []byte(name), grew: make(chan struct{}, 1), first: 1, next: 1}
	err := d.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(l.bucket)
		if err != nil {
			return err
		}
		meta, err := tx.CreateBucketIfNotExists(bucketLogMeta)
		if err != nil {
			return err
		}
		// Offsets start at 1 (0 means "from the start"). A log truncated
		// to nothing remembers where it was in the meta bucket.
		if v := meta.Get(l.bucket); len(v) == 8 {
			l.first = max(l.first, binary.BigEndian.Uint64(v))
		}
		c := b.Cursor()
		if k, _ := c.First(); k != nil {
			l.first = max(l.first, binary.BigEndian.Uint64(k))
		}
		l.next = l.first
		if k, _ := c.Last(); k != nil {
			l.next = max(l.next, binary.BigEndian.Uint64(k)+1)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ingest log %s: %w", name, err)
	}
	d.logs[name] = l
	return l, nil
}

// Log is one source subtask's ingest log: an append-only sequence of
// messages numbered by offset, durable once Append returns.
type Log struct {
	db     *bolt.DB
	update func(func(tx *bolt.Tx) error) error // the LogDB's write transactions
	bucket []byte

	appendMu    sync.Mutex // one Append at a time: offsets are reserved for the whole transaction
	mu          sync.Mutex
	first, next uint64 // retained offsets are [first, next)
	grew        chan struct{}
}

// Append stores msgs durably, in one fsynced transaction, and returns the
// offset of the first.
func (l *Log) Append(msgs []Message) (uint64, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	first := l.next
	l.mu.Unlock()
	// bbolt keeps keys and values by reference until the commit: encode
	// them all into one buffer that outlives the transaction.
	size := 0
	for _, m := range msgs {
		size += 8 + 20 + len(m.Topic) + len(m.Payload)
	}
	buf := make([]byte, 0, size)
	err := l.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(l.bucket)
		b.FillPercent = 1 // offsets only grow: pack pages full
		for i, m := range msgs {
			start := len(buf)
			buf = binary.BigEndian.AppendUint64(buf, first+uint64(i))
			buf = encodeMessage(buf, m)
			if err := b.Put(buf[start:start+8], buf[start+8:]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("appending to ingest log %s: %w", l.bucket, err)
	}
	l.mu.Lock()
	l.next = first + uint64(len(msgs))
	l.mu.Unlock()
	select {
	case l.grew <- struct{}{}:
	default:
	}
	return first, nil
}

// First is the lowest retained offset.
func (l *Log) First() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first
}

// Next is the offset the next appended message will get.
func (l *Log) Next() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

// Grew receives after appends: a reader waiting for data waits on it.
func (l *Log) Grew() <-chan struct{} { return l.grew }

// ErrTruncated is returned when reading below the log's first offset.
var ErrTruncated = errors.New("offset is below the ingest log's first retained offset")

// Read calls f for the messages from offset on, at most max of them, and
// returns the offset after the last one read. Message payloads are valid
// only during f.
func (l *Log) Read(offset uint64, max int, f func(off uint64, m Message) error) (uint64, error) {
	l.mu.Lock()
	first := l.first
	l.mu.Unlock()
	if offset < first {
		return offset, fmt.Errorf("%w: %d < %d", ErrTruncated, offset, first)
	}
	next := offset
	err := l.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(l.bucket).Cursor()
		k, v := c.Seek(binary.BigEndian.AppendUint64(nil, offset))
		for n := 0; k != nil && n < max; n++ {
			off := binary.BigEndian.Uint64(k)
			if off != next {
				return fmt.Errorf("ingest log %s: offset %d missing", l.bucket, next)
			}
			m, err := decodeMessage(v)
			if err != nil {
				return fmt.Errorf("ingest log %s at %d: %w", l.bucket, off, err)
			}
			if err := f(off, m); err != nil {
				return err
			}
			next++
			k, v = c.Next()
		}
		return nil
	})
	return next, err
}

// RedeliveryWindow is how many of the newest messages Truncate always keeps:
// after a restart, Logged reads them to recognise the broker's redeliveries
// of messages whose PUBACK was lost. It must exceed the broker's in-flight
// window per client (20 in a default mosquitto).
const RedeliveryWindow = 10_000

// Truncate deletes the messages below offset, but keeps the newest
// RedeliveryWindow.
func (l *Log) Truncate(offset uint64) error {
	l.mu.Lock()
	first := l.first
	if l.next > RedeliveryWindow {
		offset = min(offset, l.next-RedeliveryWindow)
	} else {
		offset = min(offset, 1)
	}
	l.mu.Unlock()
	// In transactions of at most truncateBatch deletions: a long backlog
	// must not be held in one transaction's memory on a small device.
	for from := first; from < offset; {
		to := min(offset, from+truncateBatch)
		err := l.update(func(tx *bolt.Tx) error {
			c := tx.Bucket(l.bucket).Cursor()
			end := binary.BigEndian.AppendUint64(nil, to)
			for k, _ := c.First(); k != nil && bytes.Compare(k, end) < 0; k, _ = c.First() {
				if err := c.Delete(); err != nil {
					return err
				}
			}
			return tx.Bucket(bucketLogMeta).Put(l.bucket, end)
		})
		if err != nil {
			return fmt.Errorf("truncating ingest log %s below %d: %w", l.bucket, offset, err)
		}
		l.mu.Lock()
		l.first = max(l.first, to)
		l.mu.Unlock()
		from = to
	}
	return nil
}

const truncateBatch = 10_000

// SkipTo makes an empty log continue at offset: a checkpoint taken
// elsewhere (a replaced device) resumes a log numbered from there. It fails
// if the log holds messages.
func (l *Log) SkipTo(offset uint64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	empty, next := l.first == l.next, l.next
	l.mu.Unlock()
	if offset <= next {
		return nil
	}
	if !empty {
		return fmt.Errorf("ingest log %s ends at offset %d, before the checkpoint's %d: acknowledged messages are missing", l.bucket, next, offset)
	}
	err := l.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLogMeta).Put(l.bucket, binary.BigEndian.AppendUint64(nil, offset))
	})
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.first, l.next = offset, offset
	l.mu.Unlock()
	return nil
}

// Logged returns the packet ids and sums of the newest n messages: after a
// restart, the broker redelivers (with the DUP flag) messages whose PUBACK
// was lost, and a redelivery found here is acknowledged without being
// logged twice.
func (l *Log) Logged(n int) (map[uint16]uint64, error) {
	out := make(map[uint16]uint64)
	err := l.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(l.bucket).Cursor()
		var seen []Message
		for k, v := c.Last(); k != nil && len(seen) < n; k, v = c.Prev() {
			m, err := decodeMessage(v)
			if err != nil {
				return err
			}
			seen = append(seen, m)
		}
		for i := len(seen) - 1; i >= 0; i-- { // newest wins
			out[seen[i].PacketID] = seen[i].Sum
		}
		return nil
	})
	return out, err
}

// encodeMessage: packet id (2), sum (8), received unix nanos (8), topic
// length (2), topic, payload.
func encodeMessage(dst []byte, m Message) []byte {
	dst = binary.BigEndian.AppendUint16(dst, m.PacketID)
	dst = binary.BigEndian.AppendUint64(dst, m.Sum)
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.Received.UnixNano()))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(m.Topic)))
	dst = append(dst, m.Topic...)
	return append(dst, m.Payload...)
}

func decodeMessage(v []byte) (Message, error) {
	if len(v) < 20 {
		return Message{}, errors.New("short message record")
	}
	tl := int(binary.BigEndian.Uint16(v[18:]))
	if len(v) < 20+tl {
		return Message{}, errors.New("short message record")
	}
	return Message{
		PacketID: binary.BigEndian.Uint16(v),
		Sum:      binary.BigEndian.Uint64(v[2:]),
		Received: time.Unix(0, int64(binary.BigEndian.Uint64(v[10:]))),
		Topic:    string(v[20 : 20+tl]),
		Payload:  v[20+tl:],
	}, nil
}
