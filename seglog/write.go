package seglog

import (
	"errors"
	"fmt"
)

// Append writes a record of count offsets (at least 1) holding the
// concatenation of data, and returns its first offset. It is durable, and readers see it, once Sync
// returns. A failed append rolls the log back to its last sync.
func (l *Log) Append(count int, data ...[]byte) (uint64, error) {
	n := 0
	for _, p := range data {
		n += len(p)
	}
	if count < 1 || n > MaxRecord {
		return 0, fmt.Errorf("seglog: a record of %d offsets and %d bytes", count, n)
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.writable(); err != nil {
		return 0, err
	}
	l.mu.Lock()
	off := l.next
	var s *segment
	if len(l.segs) > 0 {
		s = l.segs[len(l.segs)-1]
	}
	l.mu.Unlock()
	size := frameSize(count, n)
	if s == nil || l.w == nil || s.size > headerSize && s.size+size > l.opts.SegmentBytes {
		var err error
		if s, err = l.roll(off); err != nil {
			return 0, err
		}
	}
	l.buf = appendFrame(l.buf[:0], off, count, data...)
	if _, err := l.w.Write(l.buf); err != nil {
		return 0, errors.Join(err, l.rollback())
	}
	l.dirty.wrote(l.opts.Meter, s.size, size)
	l.mu.Lock()
	if last := s.index[len(s.index)-1]; s.size >= last.pos+indexEvery {
		s.index = append(s.index, mark{off, s.size})
	}
	s.size += size
	l.next += uint64(count)
	s.end = l.next
	l.mu.Unlock()
	if cap(l.buf) > 2<<20 {
		l.buf = nil // do not hold on to a large record's frame
	}
	return off, nil
}

// writable fails if the log is closed, or broken and cannot be mended.
func (l *Log) writable() error {
	if l.opts.ReadOnly {
		return errReadOnly
	}
	l.mu.Lock()
	closed, broken := l.closed, l.broken
	l.mu.Unlock()
	if closed {
		return errClosed
	}
	if broken != nil {
		return l.rollback()
	}
	return nil
}

// roll syncs the newest segment, if any, and starts a segment at off.
func (l *Log) roll(off uint64) (*segment, error) {
	if l.w != nil {
		if err := l.syncLocked(); err != nil {
			return nil, err
		}
		err := l.w.Close()
		l.w = nil // synced: the next append starts a segment
		if err != nil {
			return nil, err
		}
	}
	s := &segment{first: off, end: off, name: segmentName(off), index: []mark{{off, headerSize}}}
	f, err := l.opts.FS.Create(l.path(s))
	if err != nil {
		return nil, errors.Join(err, l.reopenLast())
	}
	if _, err := f.Write(encodeHeader(off)); err != nil {
		f.Close()
		return nil, errors.Join(err, l.opts.FS.Remove(l.path(s)), l.opts.FS.SyncDir(l.dir), l.reopenLast())
	}
	l.w, l.dirty = f, dirtyPages{through: -1}
	l.dirty.wrote(l.opts.Meter, 0, headerSize)
	s.size = headerSize
	l.mu.Lock()
	l.segs = append(l.segs, s)
	l.created = true
	l.mu.Unlock()
	return s, nil
}

// reopenLast opens the newest segment for appending again, after a
// segment could not be created.
func (l *Log) reopenLast() error {
	l.mu.Lock()
	var s *segment
	if len(l.segs) > 0 {
		s = l.segs[len(l.segs)-1]
	}
	l.mu.Unlock()
	if s == nil {
		return nil
	}
	f, err := l.opts.FS.OpenAppend(l.path(s))
	if err != nil {
		l.mu.Lock()
		l.broken = err
		l.mu.Unlock()
		return err
	}
	l.w, l.dirty = f, dirtyPages{through: -1}
	return nil
}

// Sync makes every record appended durable and lets readers see them. A
// failed sync rolls the log back to the sync before.
func (l *Log) Sync() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	return l.syncLocked()
}

func (l *Log) syncLocked() error {
	l.mu.Lock()
	pending, created := l.next != l.synced, l.created
	l.mu.Unlock()
	if !pending && !created || l.w == nil {
		return nil
	}
	err := l.w.Sync()
	l.opts.Meter.addSyncs(1)
	if err == nil && created {
		err = l.opts.FS.SyncDir(l.dir)
		l.opts.Meter.addSyncs(1)
	}
	if err != nil {
		return errors.Join(err, l.rollback())
	}
	l.dirty.synced()
	l.mu.Lock()
	l.synced, l.created = l.next, false
	s := l.segs[len(l.segs)-1]
	s.durable = s.size
	l.mu.Unlock()
	return nil
}

// rollback undoes everything since the last sync: a segment created since
// is removed, the newest cut back to its synced size. If that fails the log
// is broken, and every write tries again first.
func (l *Log) rollback() error {
	err := l.undo()
	l.mu.Lock()
	l.broken = err
	l.mu.Unlock()
	if err != nil {
		return fmt.Errorf("rolling the log back to its last sync: %w", err)
	}
	return nil
}

func (l *Log) undo() error {
	l.mu.Lock()
	created := l.created
	var s *segment
	if len(l.segs) > 0 {
		s = l.segs[len(l.segs)-1]
	}
	l.mu.Unlock()
	if s == nil {
		return nil
	}
	if created {
		if l.w != nil {
			l.w.Close()
			l.w = nil
		}
		// Durably gone before appends go on in the segment before: back
		// after a power cut, it would overlap them.
		if err := l.opts.FS.Remove(l.path(s)); err != nil && !isNotExist(err) {
			return err
		}
		if err := l.opts.FS.SyncDir(l.dir); err != nil {
			return err
		}
		l.mu.Lock()
		l.segs = l.segs[:len(l.segs)-1]
		l.created = false
		l.next = l.synced
		l.mu.Unlock()
		return l.reopenLast()
	}
	if l.w == nil {
		if err := l.reopenLast(); err != nil {
			return err
		}
	}
	if err := l.w.Truncate(s.durable); err != nil {
		return err
	}
	l.mu.Lock()
	s.size, s.end, l.next = s.durable, l.synced, l.synced
	for len(s.index) > 1 && s.index[len(s.index)-1].pos >= s.size {
		s.index = s.index[:len(s.index)-1]
	}
	l.mu.Unlock()
	l.dirty.synced()
	return nil
}

// Reset empties the log and makes it go on at offset off, durably.
func (l *Log) Reset(off uint64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.rmu.Lock()
	defer l.rmu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if l.w != nil {
		l.w.Close()
		l.w = nil
	}
	// Oldest first, so that a failure leaves a log with its front dropped.
	for {
		l.mu.Lock()
		if len(l.segs) == 0 {
			l.mu.Unlock()
			break
		}
		s := l.segs[0]
		l.mu.Unlock()
		if s.r != nil {
			s.r.Close()
			s.r = nil
		}
		if err := l.opts.FS.Remove(l.path(s)); err != nil && !isNotExist(err) {
			return errors.Join(err, l.reopenLast())
		}
		l.mu.Lock()
		l.segs, l.hint = l.segs[1:], readHint{}
		l.mu.Unlock()
	}
	l.mu.Lock()
	l.segs, l.created = nil, false
	l.next, l.synced = off, off
	l.mu.Unlock()
	// The removals are durable with the new segment (roll, then a sync
	// of the directory).
	if _, err := l.roll(off); err != nil {
		return err
	}
	return l.syncLocked()
}
