package seglog

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
)

// Options configure a Log. Zero values mean the defaults noted.
type Options struct {
	// SegmentBytes is the size past which the next record goes into a new
	// segment; default 4 MiB. The front of the log is dropped a segment at
	// a time, so up to this much more than asked is kept.
	SegmentBytes int64
	// FS holds the log's files; default OS.
	FS FS
	// Meter, if set, counts the pages the log writes and its syncs.
	Meter *Meter
	// Logger is told of torn writes cut at Open; default slog.Default.
	Logger *slog.Logger
	// ReadOnly opens the log to read it only: nothing in its directory is
	// created, cut, removed or written (a listing must not repair what it
	// looks at). A record that does not verify at the end ends the log
	// there, as Open in the other mode would cut it (Damage says so);
	// Append, Sync, Reset, TruncateFront and TrimTo fail.
	ReadOnly bool
	// OnDamage, if set, is told of each range of offsets lost to damage
	// in the middle of the log (see the package doc), once per range
	// while the log is open, when Open or a Read first meets it. The
	// log also logs it, as an error.
	OnDamage func(Damage)
}

// Damage is a range of a log's offsets lost to damage in the middle of the
// log: the bytes that held them do not verify, and records after them do
// (or the next segment begins after them). Read returns it as a Record
// with Damage set.
type Damage struct {
	Segment string // the segment file's path
	At      int64  // where in it the bytes that do not verify begin
	Offset  uint64 // the first offset lost
	Count   int    // the offsets lost
	Reason  string
}

// indexEvery is how far apart, in bytes, the records a segment's index
// remembers are: reading from an offset scans at most this much to it.
const indexEvery = 32 << 10

// segment is one file of a log.
type segment struct {
	first   uint64
	end     uint64 // the offset after its last record
	size    int64  // its bytes, header included
	durable int64  // of them, those synced: readers read no further
	name    string
	// index marks a record about every indexEvery bytes, in order; the
	// first mark is the first record's. Reading fills it in as it goes.
	index []mark
	r     File // open for reading once read
}

// mark is where a record starts.
type mark struct {
	off uint64
	pos int64
}

// Log is an append-only log in a directory; see the package doc. One
// goroutine may append and sync while another reads and truncates.
type Log struct {
	dir  string
	opts Options

	wmu sync.Mutex // Append, Sync, Reset: the writer's side
	rmu sync.Mutex // Read, TruncateFront, Reset: the reader's side

	mu      sync.Mutex // the fields below
	segs    []*segment // oldest first; the last is written
	next    uint64     // the offset of the next record
	synced  uint64     // records below are durable and readable
	created bool       // the last segment was created after the last sync
	broken  error      // a rollback failed: writes fail until one succeeds
	hint    readHint   // where the last Read stopped
	closed  bool
	// damage describes what Open cut, or would have, and the damage met
	// since (Damage); lost holds the first offsets of the ranges lost
	// that were met.
	damage []string
	lost   map[uint64]bool

	// Owned by the writer (wmu).
	w     File
	dirty dirtyPages // of w
	buf   []byte     // the frame being written
	// Owned by the reader (rmu).
	rbuf *bufio.Reader
}

// readHint lets a Read go on where the one before stopped.
type readHint struct {
	seg *segment
	off uint64
	pos int64
}

func (l *Log) path(s *segment) string { return filepath.Join(l.dir, s.name) }

// First is the lowest offset the log holds, or Next if it is empty.
func (l *Log) First() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.segs) == 0 || l.segs[0].first == l.next {
		return l.next
	}
	return l.segs[0].first
}

// Next is the offset the next record appended will get.
func (l *Log) Next() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

// Synced is the offset after the last durable record: what readers see.
func (l *Log) Synced() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.synced
}

// Segments returns the first offsets of the log's segments, oldest first:
// a reader that meets damage in one can go on with the next.
func (l *Log) Segments() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]uint64, len(l.segs))
	for i, s := range l.segs {
		out[i] = s.first
	}
	return out
}

// Close closes the log's files. Records not synced may or may not be
// there when it is opened again.
func (l *Log) Close() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.rmu.Lock()
	defer l.rmu.Unlock()
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	return l.closeFiles()
}

func (l *Log) closeFiles() error {
	var errs []error
	if l.w != nil {
		errs = append(errs, l.w.Close())
		l.w = nil
	}
	for _, s := range l.segs {
		if s.r != nil {
			errs = append(errs, s.r.Close())
			s.r = nil
		}
	}
	return errors.Join(errs...)
}

// errClosed is returned by a closed log.
var errClosed = errors.New("log closed")

var errReadOnly = errors.New("log opened read-only")

// Damage describes, in words, what does not verify that the log met
// since it was opened: a torn write at its end that Open cut (in
// read-only mode: would have cut), and damage in the middle that it reads
// past (Options.OnDamage).
func (l *Log) Damage() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.damage)
}

// noteDamage records that the scan of segment s met r, a Record with
// Damage set that starts at byte at, and tells of it the first time.
func (l *Log) noteDamage(s *segment, at int64, r Record) {
	d := Damage{Segment: l.path(s), At: at, Offset: r.Offset, Count: r.Count, Reason: r.Damage}
	msg := "reading past damage in the log: offsets lost"
	l.mu.Lock()
	if l.lost[d.Offset] {
		l.mu.Unlock()
		return
	}
	if l.lost == nil {
		l.lost = make(map[uint64]bool)
	}
	l.lost[d.Offset] = true
	l.damage = append(l.damage, fmt.Sprintf("%s: offsets %d to %d (%d) lost, at byte %d of %s: %s", msg, d.Offset, d.Offset+uint64(d.Count), d.Count, d.At, d.Segment, d.Reason))
	l.mu.Unlock()
	if !l.opts.ReadOnly {
		l.opts.Logger.Error(msg, "segment", d.Segment, "at_byte", d.At, "offset", d.Offset, "count", d.Count, "reason", d.Reason)
	}
	if l.opts.OnDamage != nil {
		l.opts.OnDamage(d)
	}
}
