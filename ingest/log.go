package ingest

import (
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cairn-edge/cairn/seglog"
)

// Message is one MQTT message as the ingest log keeps it.
type Message struct {
	Topic    string
	Payload  []byte
	Received time.Time // when the agent logged it (not a reliable clock)
	// PacketID and Publisher identify a QoS 1 message for its sender's
	// redelivery after a crash (Log.Logged): Publisher is the client id
	// of the device that published it to the agent's own broker, empty
	// for a message of a remote broker, which sends it on the agent's
	// session.
	PacketID  uint16
	Publisher string
	// Lost is set by Read only, on what is no message: Lost.Count offsets
	// from its own were lost to damage in the log, and Payload holds the
	// bytes that held them, which do not verify.
	Lost *Lost
}

// Lost says how many messages of an ingest log were lost to damage (bytes
// that do not verify, read past: seglog.Damage), and why.
type Lost struct {
	Count  int
	Reason string
}

// PublishID is the id under which a message was sent to the agent: its
// publisher's client id (empty for a remote broker's session) and its
// packet id. A sender that redelivers a message after a crash sends it
// under the same id, marked as a duplicate.
type PublishID struct {
	Publisher string
	PacketID  uint16
}

// PayloadSum is the checksum that recognises a redelivery of a message
// already logged (Log.Logged).
func PayloadSum(topic string, payload []byte) uint64 {
	h := fnv.New64a()
	h.Write([]byte(topic))
	h.Write([]byte{0})
	h.Write(payload)
	return h.Sum64()
}

// LogOptions configure the ingest logs. Zero values mean the defaults
// noted.
type LogOptions struct {
	// SegmentBytes is the size of a log's segment files; default 4 MiB.
	SegmentBytes int64
	// FS holds the files; default the operating system's. Tests pass one
	// that loses what was not synced, as a power cut does.
	FS seglog.FS
	// WriteFault, if set, is called before every group of messages is
	// written. An error fails the append, of which nothing is written, as
	// a full or broken disk would (tests inject ENOSPC); a delay holds it
	// as a slow fsync would.
	WriteFault func() error
	// Logger is told of torn writes cut when a log opens; default
	// slog.Default.
	Logger *slog.Logger
}

// Logs are the ingest logs of an agent's sources: in a directory, a
// segmented log (package seglog) per source subtask, and the stored dead
// letters. Open them once per process: OpenLogs locks the directory.
type Logs struct {
	dir   string
	opts  LogOptions
	meter seglog.Meter
	lock  func() error // releases the directory's lock

	mu      sync.Mutex
	logs    map[string]*Log // by name; a log is shared by the source incarnations of one subtask across job restarts
	byIndex []*Log          // by Log.index-1
	dead    *deadLetterStore

	healthMu sync.Mutex // a log tells of damage while mu is held (Log)
	health   Health     // but Refusing*, which each Log keeps
}

// Health is what went wrong with the ingest logs since they were opened,
// and what goes wrong now.
type Health struct {
	// DamagedRecords counts the ranges of the logs found lost to damage
	// (bit rot, a segment cut short or removed: seglog.Damage) and read
	// past; LostMessages, the messages they held. Each range is a dead
	// letter of its source when the source reads it. LastDamage describes
	// the newest.
	DamagedRecords int64
	LostMessages   int64
	LastDamage     string
	// RefusingSince is set while a log refuses appends (a full or failing
	// disk): the messages waiting are not acknowledged to the broker, which
	// holds them, until an append succeeds. It is when the oldest refusal
	// in a row began; RefusingError, the newest error, which names the
	// file.
	RefusingSince time.Time
	RefusingError string
}

// Health says what went wrong with the logs.
func (d *Logs) Health() Health {
	d.healthMu.Lock()
	h := d.health
	d.healthMu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range d.logs {
		l.refusing.Lock()
		if !l.refusing.since.IsZero() && (h.RefusingSince.IsZero() || l.refusing.since.Before(h.RefusingSince)) {
			h.RefusingSince, h.RefusingError = l.refusing.since, l.refusing.err
		}
		l.refusing.Unlock()
	}
	return h
}

// damaged counts a range of a log lost to damage (seglog.Options.OnDamage).
func (d *Logs) damaged(dm seglog.Damage) {
	d.healthMu.Lock()
	defer d.healthMu.Unlock()
	d.health.DamagedRecords++
	d.health.LostMessages += int64(dm.Count)
	d.health.LastDamage = fmt.Sprintf("%d messages from offset %d lost: %s at byte %d: %s", dm.Count, dm.Offset, dm.Segment, dm.At, dm.Reason)
}

// Dir is the ingest logs' directory under a data directory.
func Dir(dataDir string) string { return filepath.Join(dataDir, "ingest") }

// Open opens, or creates, the ingest logs and dead letters of the data
// directory dataDir, in Dir(dataDir): the agent's one way in. It first
// moves those an earlier cairn kept in one bbolt file, ingest.db, into
// them (MigrateBoltLogs), and tells opts.Logger when it did.
func Open(dataDir string, opts LogOptions) (*Logs, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	old := filepath.Join(dataDir, "ingest.db")
	migrated, err := MigrateBoltLogs(old, Dir(dataDir), opts)
	if err != nil {
		return nil, err
	}
	if migrated {
		opts.Logger.Info("ingest log moved to segment files; every message keeps its offset", "from", old, "to", Dir(dataDir))
	}
	return OpenLogs(Dir(dataDir), opts)
}

// OpenLogs opens or creates the ingest logs in dir: the one place the
// directory is opened, and (Logs.Log) its logs.
func OpenLogs(dir string, opts LogOptions) (*Logs, error) {
	if opts.FS == nil {
		opts.FS = seglog.OS
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := seglog.MkdirDurable(opts.FS, dir); err != nil {
		return nil, fmt.Errorf("ingest log: %w", err)
	}
	d := &Logs{dir: dir, opts: opts, logs: make(map[string]*Log)}
	var err error
	if opts.FS == seglog.OS {
		if d.lock, err = seglog.LockDir(dir); err != nil {
			return nil, err
		}
	}
	if d.dead, err = openDeadLetters(dir, d.segOptions(0)); err != nil {
		d.unlock()
		return nil, err
	}
	return d, nil
}

func (d *Logs) segOptions(segmentBytes int64) seglog.Options {
	return seglog.Options{SegmentBytes: segmentBytes, FS: d.opts.FS, Meter: &d.meter, Logger: d.opts.Logger}
}

func (d *Logs) unlock() {
	if d.lock != nil {
		d.lock()
		d.lock = nil
	}
}

// Wear is what the ingest logs made the kernel write back, in whole pages,
// and the syncs that did it, since they were opened.
func (d *Logs) Wear() (written, syncs int64) { return d.meter.Written(), d.meter.Syncs() }

// Close closes every log.
func (d *Logs) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, l := range d.logs {
		errs = append(errs, l.seg.Close())
	}
	errs = append(errs, d.dead.close())
	d.unlock()
	return errors.Join(errs...)
}

// Fronts returns the first offset of every log in the directory that
// holds a segment, by its name ("source/0"), as seglog.Front reads it: 1
// for a log that was never truncated at its front. The logs need not be
// open.
func (d *Logs) Fronts() (map[string]uint64, error) {
	names, err := d.opts.FS.List(d.dir)
	if err != nil {
		return nil, err
	}
	fronts := make(map[string]uint64)
	for _, n := range names {
		escaped, ok := strings.CutPrefix(n, "log-")
		name, err := url.PathUnescape(escaped)
		if !ok || err != nil {
			continue
		}
		first, ok, err := seglog.Front(d.opts.FS, filepath.Join(d.dir, n))
		if err != nil {
			return nil, fmt.Errorf("ingest log %s: %w", name, err)
		}
		if ok {
			fronts[name] = first
		}
	}
	return fronts, nil
}

// logDir is the directory of the log called name ("source/0").
func logDir(name string) string { return "log-" + url.PathEscape(name) }

// Log returns the log called name, creating it if needed.
func (d *Logs) Log(name string) (*Log, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if l := d.logs[name]; l != nil {
		return l, nil
	}
	opts := d.segOptions(d.opts.SegmentBytes)
	opts.OnDamage = d.damaged
	seg, err := seglog.Open(filepath.Join(d.dir, logDir(name)), opts)
	if err != nil {
		return nil, fmt.Errorf("ingest log %s: %w", name, err)
	}
	l := &Log{name: name, seg: seg, fault: d.opts.WriteFault, grew: make(chan struct{}, 1)}
	d.logs[name] = l
	if len(d.byIndex) < maxOriginLogs {
		d.byIndex = append(d.byIndex, l)
		l.index = uint64(len(d.byIndex))
	}
	return l, nil
}

// A record's origin (graph.Record.Origin) packs its log's index among
// those this process opened, from 1, above originOffsetBits bits of its
// offset: one word per record, no pointer for the collector to follow.
const (
	originOffsetBits = 48 // 2.8e14 messages: 8,900 years at 1,000 a second
	maxOriginLogs    = 1<<(64-originOffsetBits) - 1
)

// Origin is what a record read at off from l carries (graph.Record.Origin,
// which Logs.Origin unpacks); 0 when l has no index or off does not fit.
func (l *Log) Origin(off uint64) uint64 {
	if l.index == 0 || off >= 1<<originOffsetBits {
		return 0
	}
	return l.index<<originOffsetBits | off
}

// Origin unpacks a record's origin: the log it came from, the offset, and
// the message's topic (empty when the log no longer holds it).
func (d *Logs) Origin(o uint64) (log string, offset uint64, topic string, ok bool) {
	i, off := o>>originOffsetBits, o&(1<<originOffsetBits-1)
	d.mu.Lock()
	if i == 0 || i > uint64(len(d.byIndex)) {
		d.mu.Unlock()
		return "", 0, "", false
	}
	l := d.byIndex[i-1]
	d.mu.Unlock()
	l.Read(off, 1, func(_ uint64, m Message) error { // a miss leaves topic empty
		topic = m.Topic
		return nil
	})
	return l.name, off, topic, true
}

// Log is one source subtask's ingest log: an append-only sequence of
// messages numbered by offset (from 1), durable once Append returns.
// Messages are stored in groups (group.go), one per Append (maxGroupBytes
// at most).
type Log struct {
	name  string
	index uint64 // in Logs.byIndex, from 1; 0: none (Log.origin)
	seg   *seglog.Log
	fault func() error
	grew  chan struct{}

	appendMu sync.Mutex // one Append at a time
	enc      []byte     // the group being encoded
	encoder  groupCodec
	refusing struct { // while appends fail (Health)
		sync.Mutex
		since time.Time
		err   string
	}

	readMu  sync.Mutex // one Read at a time
	held    heldGroup  // the group a Read stopped in
	scratch []Message  // the group being read
	decoder groupCodec
}

// heldGroup is a group a Read stopped in the middle of, decoded from its
// own copy of the record, so that the next Read goes on without reading
// it again.
type heldGroup struct {
	first uint64
	data  []byte
	msgs  []Message
	codec groupCodec // the payloads of a deflated group point into its buffer
}

// maxGroupBytes bounds a group: an Append of more writes several, synced
// together.
const maxGroupBytes = 1 << 20

// Append stores msgs durably (one sync) and returns the offset of the
// first. On failure nothing of them is stored.
func (l *Log) Append(msgs []Message) (uint64, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	first := l.seg.Next()
	if len(msgs) == 0 {
		return first, nil
	}
	fail := func(err error) (uint64, error) {
		err = fmt.Errorf("appending to ingest log %s: %w", l.name, err)
		l.refusing.Lock()
		if l.refusing.since.IsZero() {
			l.refusing.since = time.Now()
		}
		l.refusing.err = err.Error()
		l.refusing.Unlock()
		return 0, err
	}
	if l.fault != nil {
		if err := l.fault(); err != nil {
			return fail(err)
		}
	}
	if err := l.write(msgs); err != nil {
		return fail(err)
	}
	if err := l.seg.Sync(); err != nil {
		return fail(err)
	}
	l.refusing.Lock()
	l.refusing.since, l.refusing.err = time.Time{}, ""
	l.refusing.Unlock()
	select {
	case l.grew <- struct{}{}:
	default:
	}
	return first, nil
}

// write appends msgs in groups of at most maxGroupBytes, not synced.
func (l *Log) write(msgs []Message) error {
	for len(msgs) > 0 {
		n := 0
		l.enc, n = l.encoder.encode(l.enc[:0], msgs)
		if _, err := l.seg.Append(n, l.enc); err != nil {
			return err
		}
		msgs = msgs[n:]
	}
	if cap(l.enc) > maxGroupBytes {
		l.enc = nil
	}
	return nil
}

// Name is the log's name, as Logs.Log was given it ("source/0").
func (l *Log) Name() string { return l.name }

// First is the lowest retained offset.
func (l *Log) First() uint64 { return l.seg.First() }

// Next is the offset the next appended message will get: every message
// below it is durable.
func (l *Log) Next() uint64 { return l.seg.Synced() }

// Grew receives after appends: a reader waiting for data waits on it.
func (l *Log) Grew() <-chan struct{} { return l.grew }

// ErrTruncated is returned when reading below the log's first offset.
var ErrTruncated = seglog.ErrTruncated

// Read calls f for the messages from offset on, at most max of them, and
// returns the offset after the last one read. Message payloads are valid
// only during f. Messages lost to damage in the log come as one Message
// with Lost set, at the first offset lost.
func (l *Log) Read(offset uint64, max int, f func(off uint64, m Message) error) (uint64, error) {
	l.readMu.Lock()
	defer l.readMu.Unlock()
	next, n := offset, 0
	// deliver passes f the messages of a group from first on, from next.
	deliver := func(first uint64, msgs []Message) error {
		for i := int(next - first); i < len(msgs) && n < max; i++ {
			if err := f(next, msgs[i]); err != nil {
				return err
			}
			next, n = next+1, n+1
		}
		return nil
	}
	if h := &l.held; h.data != nil && next >= h.first && next < h.first+uint64(len(h.msgs)) {
		if err := deliver(h.first, h.msgs); err != nil || n == max {
			return next, err
		}
	}
	var ferr error
	err := l.seg.Read(next, func(r seglog.Record) bool {
		if r.Damage != "" {
			lost := Message{Payload: r.Data, Lost: &Lost{Count: int(r.End() - next), Reason: r.Damage}}
			if ferr = f(next, lost); ferr != nil {
				return false
			}
			next, n = r.End(), n+1
			return n < max
		}
		msgs, err := l.decoder.decode(r.Data, r.Count, l.scratch)
		l.scratch = msgs
		if err != nil {
			ferr = fmt.Errorf("ingest log %s at %d: %w", l.name, r.Offset, err)
			return false
		}
		if ferr = deliver(r.Offset, msgs); ferr != nil {
			return false
		}
		if n < max {
			return true
		}
		if next < r.End() { // stopped inside: keep the group for the next Read
			l.held.first, l.held.data = r.Offset, append(l.held.data[:0], r.Data...)
			l.held.msgs, _ = l.held.codec.decode(l.held.data, r.Count, l.held.msgs[:0])
		}
		return false
	})
	if err == nil {
		err = ferr
	}
	if err != nil {
		return next, fmt.Errorf("ingest log %s: %w", l.name, err)
	}
	return next, nil
}

// RedeliveryWindow is how many of the newest messages Truncate always keeps:
// after a restart, Logged reads them to recognise the broker's redeliveries
// of messages whose PUBACK was lost. It must exceed the broker's in-flight
// window per client (20 in a default mosquitto).
const RedeliveryWindow = 10_000

// Truncate deletes the messages below offset, in whole segments, but
// keeps the newest RedeliveryWindow.
func (l *Log) Truncate(offset uint64) error {
	next := l.seg.Synced()
	offset = min(offset, next-min(next, RedeliveryWindow))
	if err := l.seg.TruncateFront(offset); err != nil {
		return fmt.Errorf("truncating ingest log %s below %d: %w", l.name, offset, err)
	}
	return nil
}

// SkipTo makes an empty log continue at offset: a checkpoint taken
// elsewhere (a replaced device) resumes a log numbered from there. It fails
// if the log holds messages.
func (l *Log) SkipTo(offset uint64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	next := l.seg.Synced()
	if offset <= next {
		return nil
	}
	if l.seg.First() != next {
		return fmt.Errorf("ingest log %s ends at offset %d, before the checkpoint's %d: the log lost its end, and with it every message acknowledged after that checkpoint; "+
			"to start anyway, remove the log's directory and start with --accept-state-loss", l.name, next, offset)
	}
	return l.seg.Reset(offset)
}

// Logged returns the publish ids and payload sums of the newest n
// messages: after a restart, the sender (a broker, or a device publishing
// to the agent's own) redelivers with the DUP flag the messages whose
// PUBACK was lost, and a redelivery found here is acknowledged without
// being logged twice.
func (l *Log) Logged(n int) (map[PublishID]uint64, error) {
	out := make(map[PublishID]uint64)
	next := l.Next()
	from := max(l.First(), next-min(next, uint64(n)))
	_, err := l.Read(from, n, func(_ uint64, m Message) error {
		if m.Lost == nil {
			out[PublishID{m.Publisher, m.PacketID}] = PayloadSum(m.Topic, m.Payload) // newest wins
		}
		return nil
	})
	return out, err
}
