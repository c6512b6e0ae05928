package seglog

import (
	"bufio"
	"errors"
	"fmt"
	"sort"
)

// ErrTruncated is returned when reading below the log's first offset.
var ErrTruncated = errors.New("offset is below the log's first retained offset")

// Read calls f with the records from the one holding offset from on, in
// order, until f returns false or the durable records end. The first may
// start before from.
func (l *Log) Read(from uint64, f func(Record) bool) error {
	l.rmu.Lock()
	defer l.rmu.Unlock()
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return errClosed
		}
		if from >= l.synced {
			l.mu.Unlock()
			return nil
		}
		i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].end > from })
		if len(l.segs) == 0 || from < l.segs[0].first || i == len(l.segs) {
			first := l.next
			if len(l.segs) > 0 {
				first = l.segs[0].first
			}
			l.mu.Unlock()
			return fmt.Errorf("%w: %d < %d", ErrTruncated, from, first)
		}
		s := l.segs[i]
		limit, sealed, end := s.durable, i < len(l.segs)-1, s.end
		start := s.index[sort.Search(len(s.index), func(k int) bool { return s.index[k].off > from })-1]
		if h := l.hint; h.seg == s && h.off <= from && h.off > start.off {
			start = mark{h.off, h.pos}
		}
		l.mu.Unlock()
		sealedEnd := uint64(0)
		if sealed {
			sealedEnd = end
		}
		next, more, err := l.readSegment(s, start, from, limit, sealedEnd, f)
		if err != nil || !more || !sealed {
			return err
		}
		if next != end {
			return fmt.Errorf("%w: %s ends at offset %d, the next segment begins at %d", ErrCorrupt, l.path(s), next, end)
		}
		from = end
	}
}

// readSegment reads s from the record at start until limit, passing f the
// records from offset from on, and the ranges of offsets lost to damage;
// sealedEnd is the offset s ends at if it is sealed, else 0. It returns
// the offset after the last record read, and whether f wants more.
func (l *Log) readSegment(s *segment, start mark, from uint64, limit int64, sealedEnd uint64, f func(Record) bool) (next uint64, more bool, err error) {
	if s.r == nil {
		if s.r, err = l.opts.FS.Open(l.path(s)); err != nil {
			return 0, false, err
		}
	}
	if l.rbuf == nil {
		l.rbuf = bufio.NewReaderSize(nil, 64<<10)
	}
	sc := newScanner(s.r, start.pos, limit, start.off, l.rbuf)
	sc.end = sealedEnd
	for {
		pos := sc.pos
		r, ok := sc.scan()
		if !ok {
			break
		}
		if r.Damage != "" {
			l.noteDamage(s, pos, r)
		} else {
			l.mu.Lock()
			if last := s.index[len(s.index)-1]; pos >= last.pos+indexEvery {
				s.index = append(s.index, mark{r.Offset, pos})
			}
			l.mu.Unlock()
		}
		if r.End() <= from {
			continue
		}
		if !f(r) {
			l.mu.Lock()
			l.hint = readHint{seg: s, off: r.End(), pos: sc.pos}
			l.mu.Unlock()
			return sc.next, false, nil
		}
	}
	if sc.err != nil {
		return 0, false, fmt.Errorf("%w: %s: %v", ErrCorrupt, l.path(s), sc.err)
	}
	return sc.next, true, nil
}

// TruncateFront deletes the segments that hold only offsets below before
// and synced; it never deletes the newest, nor the one before a newest
// not synced yet (a failed sync of that one goes back to it).
func (l *Log) TruncateFront(before uint64) error {
	if l.opts.ReadOnly {
		return errReadOnly
	}
	l.rmu.Lock()
	defer l.rmu.Unlock()
	l.mu.Lock()
	var victims []*segment
	for i, s := range l.segs {
		// Never the newest, nor the one before a newest not yet synced:
		// a failed sync of that one goes back to it.
		if i == len(l.segs)-1 || l.created && i == len(l.segs)-2 || s.end > before || s.end > l.synced {
			break
		}
		victims = append(victims, s)
	}
	l.mu.Unlock()
	for i, s := range victims {
		if s.r != nil {
			s.r.Close()
			s.r = nil
		}
		if err := l.opts.FS.Remove(l.path(s)); err != nil && !isNotExist(err) {
			victims = victims[:i]
			l.dropFront(len(victims))
			return err
		}
	}
	l.dropFront(len(victims))
	return nil
}

// TrimTo deletes the oldest segments, never the newest, while the log's
// segments take more than max bytes.
func (l *Log) TrimTo(max int64) error {
	if l.opts.ReadOnly {
		return errReadOnly
	}
	l.mu.Lock()
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	before := uint64(0)
	for i, s := range l.segs {
		if total <= max || i == len(l.segs)-1 {
			break
		}
		total -= s.size
		before = s.end
	}
	l.mu.Unlock()
	if before == 0 {
		return nil
	}
	return l.TruncateFront(before)
}

func (l *Log) dropFront(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hint.seg != nil {
		for _, s := range l.segs[:n] {
			if l.hint.seg == s {
				l.hint = readHint{}
			}
		}
	}
	l.segs = l.segs[n:]
}
