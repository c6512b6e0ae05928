package seglog

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/cairn-edge/cairn/datadir"
)

// Open opens the log in dir, creating the directory if needed. The newest
// segment is cut at its first record that does not verify (a torn write,
// logged; see the package doc); segments that overlap or whose headers
// name other offsets are an error wrapping ErrCorrupt. A new log's first
// offset is 1.
func Open(dir string, opts Options) (*Log, error) {
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = 4 << 20
	}
	if opts.FS == nil {
		opts.FS = OS
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	l := &Log{dir: dir, opts: opts, next: 1, synced: 1, dirty: dirtyPages{through: -1}}
	fs := opts.FS
	if fs == OS {
		check := datadir.CheckOwnEntry // what this process writes must be its user's alone
		if opts.ReadOnly {
			check = datadir.CheckEntry
		}
		if err := check(dir, datadir.Dir); err != nil {
			return nil, err
		}
	}
	if !opts.ReadOnly {
		if err := MkdirDurable(fs, dir); err != nil {
			return nil, err
		}
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if first, ok := parseSegmentName(name); ok {
			l.segs = append(l.segs, &segment{first: first, name: name, index: []mark{{first, headerSize}}})
		}
	}
	sort.Slice(l.segs, func(i, j int) bool { return l.segs[i].first < l.segs[j].first })
	for i, s := range l.segs {
		if i+1 < len(l.segs) {
			s.end = l.segs[i+1].first
			if s.end <= s.first {
				return nil, fmt.Errorf("%w: %s: segments %s and %s overlap", ErrCorrupt, dir, s.name, l.segs[i+1].name)
			}
			if err := l.checkSealed(s); err != nil {
				return nil, err
			}
		}
	}
	if err := l.openLast(); err != nil {
		l.closeFiles()
		return nil, err
	}
	return l, nil
}

// MkdirDurable creates dir and any parents it lacks, each durably (the
// directory above synced), so that a power cut cannot lose a log's
// directory with the synced segments in it.
func MkdirDurable(fs FS, dir string) error {
	if _, err := fs.List(dir); err == nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirDurable(fs, parent); err != nil {
			return err
		}
	}
	if err := fs.MkdirAll(dir); err != nil {
		return err
	}
	return fs.SyncDir(parent)
}

// checkSealed reads a segment's header and size; its records are
// verified as they are read. A header that does not verify is damage,
// past which the records are read by their own checksums, from the first
// offset the segment's name gives; one of another format, or that names
// another offset, is no segment of this log.
func (l *Log) checkSealed(s *segment) error {
	f, err := l.opts.FS.Open(l.path(s))
	if err != nil {
		return err
	}
	defer f.Close()
	h := make([]byte, headerSize)
	if _, err := f.ReadAt(h, 0); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	first, err := decodeHeader(h)
	switch {
	case err == nil && first != s.first:
		return fmt.Errorf("%w: %s: header names offset %d", ErrCorrupt, l.path(s), first)
	case errors.Is(err, errFormat):
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, l.path(s), err)
	case err != nil:
		l.damagedHeader(s, err)
	}
	if s.size, err = f.Size(); err != nil {
		return err
	}
	s.durable = s.size
	return nil
}

// damagedHeader logs that segment s's header does not verify (why):
// damage, since records after it do, which are read all the same.
func (l *Log) damagedHeader(s *segment, why error) {
	msg := "a log segment's header does not verify; reading its records by their own checksums"
	l.mu.Lock()
	l.damage = append(l.damage, fmt.Sprintf("%s: %s: %v", msg, l.path(s), why))
	l.mu.Unlock()
	if !l.opts.ReadOnly {
		l.opts.Logger.Error(msg, "segment", l.path(s), "reason", why.Error())
	}
}

// openLast opens the newest segment for appending after scanning it to its
// end: a segment whose header does not verify, with no record after it
// that does, is taken away (dropNewest); a record that does not verify
// ends the segment there.
func (l *Log) openLast() error {
	if len(l.segs) == 0 {
		return nil
	}
	fs := l.opts.FS
	s := l.segs[len(l.segs)-1]
	open := fs.OpenAppend
	if l.opts.ReadOnly {
		open = fs.Open
	}
	f, err := open(l.path(s))
	if err != nil {
		return err
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return err
	}
	h := make([]byte, min(size, headerSize))
	if _, err := f.ReadAt(h, 0); err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return err
	}
	first, herr := decodeHeader(h)
	switch {
	case herr == nil && first != s.first:
		f.Close()
		return fmt.Errorf("%w: %s: header names offset %d", ErrCorrupt, l.path(s), first)
	case errors.Is(herr, errFormat):
		f.Close()
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, l.path(s), herr)
	case herr != nil:
		rest := make([]byte, max(0, size-headerSize))
		if _, err := f.ReadAt(rest, headerSize); err != nil && !errors.Is(err, io.EOF) {
			f.Close()
			return err
		}
		if _, _, found := resync(rest, s.first); found {
			l.damagedHeader(s, herr) // records after it verify: damage
			break
		}
		f.Close()
		if err := l.dropNewest(s, herr, h, rest); err != nil {
			return err
		}
		l.segs = l.segs[:len(l.segs)-1]
		l.next, l.synced = s.first, s.first
		if len(l.segs) == 0 {
			return nil
		}
		return l.openLast()
	}
	sc := newScanner(f, headerSize, size, s.first, nil)
	last := mark{s.first, headerSize}
	for {
		pos := sc.pos
		r, ok := sc.scan()
		if !ok {
			break
		}
		if r.Damage != "" {
			l.noteDamage(s, pos, r)
			continue
		}
		if pos >= last.pos+indexEvery {
			last = mark{r.Offset, pos}
			s.index = append(s.index, last)
		}
	}
	var bad *badFrame
	switch {
	case errors.As(sc.err, &bad):
		l.cutLog("cutting the log at a record that does not verify: a write torn by a power cut",
			"segment", l.path(s), "at_byte", bad.pos, "reason", bad.reason, "bytes_cut", size-bad.pos, "next_offset", sc.next)
		if !l.opts.ReadOnly {
			err := f.Truncate(bad.pos)
			if err == nil {
				err = f.Sync()
			}
			if err != nil {
				f.Close()
				return fmt.Errorf("cutting a torn write from %s: %w", l.path(s), err)
			}
		}
		size = bad.pos
	case sc.err != nil:
		f.Close()
		return sc.err
	}
	s.end, s.size, s.durable = sc.next, size, size
	l.next, l.synced = sc.next, sc.next
	l.w = f
	return nil
}

// dropNewest takes away the newest segment s, whose header does not
// verify (why) and after which no record does (its bytes: head, the
// header's, and rest). Segments are synced whole, header and first
// records with them, before the next is made: so s was created, and cut
// off before its first sync completed, and nothing in it was
// acknowledged. If it holds only what a power cut leaves of such a file
// (tornCreation) it is removed, so that repeated cuts cannot fill the
// disk; other bytes are none this log wrote (a file put there, bit rot),
// and are set aside untouched as NAME.damaged-N. Read-only, it only says
// which it would do.
func (l *Log) dropNewest(s *segment, why error, head, rest []byte) error {
	path, size := l.path(s), int64(len(head)+len(rest))
	if tornCreation(s.first, head, rest) {
		l.cutLog("removing a log segment whose header does not verify: a write torn by a power cut",
			"segment", path, "reason", why.Error(), "bytes", size)
		if l.opts.ReadOnly {
			return nil
		}
		if err := l.opts.FS.Remove(path); err != nil {
			return err
		}
		return l.opts.FS.SyncDir(l.dir)
	}
	const msg = "a log segment whose header does not verify, with no record after it that does, holds bytes a power cut does not leave: it is set aside untouched"
	if l.opts.ReadOnly {
		l.cutLog(msg, "segment", path, "reason", why.Error(), "bytes", size)
		return nil
	}
	aside, err := l.setAside(s.name)
	if err != nil {
		return fmt.Errorf("setting aside %s, whose header does not verify: %w", path, err)
	}
	l.cutLog(msg, "segment", path, "reason", why.Error(), "bytes", size, "aside", aside)
	return nil
}

// tornCreation reports whether head and rest, the bytes of a segment
// starting at first, are what a power cut can leave of it when it was
// created and never synced: nothing, or the start of its header followed
// by zeros only (the blocks allocated, their data never written).
func tornCreation(first uint64, head, rest []byte) bool {
	want := encodeHeader(first)
	n := 0
	for n < len(head) && head[n] == want[n] {
		n++
	}
	return allZero(head[n:]) && allZero(rest)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// setAside renames the file name in the log's directory to
// name.damaged-N, N the first free, durably, and returns its path. The
// name ends in no segment's suffix: Open and Front pass it by.
func (l *Log) setAside(name string) (string, error) {
	names, err := l.opts.FS.List(l.dir)
	if err != nil {
		return "", err
	}
	for n := 1; ; n++ {
		aside := fmt.Sprintf("%s.damaged-%d", name, n)
		if _, taken := slices.BinarySearch(names, aside); taken {
			continue
		}
		if err := l.opts.FS.Rename(filepath.Join(l.dir, name), filepath.Join(l.dir, aside)); err != nil {
			return "", err
		}
		return filepath.Join(l.dir, aside), l.opts.FS.SyncDir(l.dir)
	}
}

// cutLog records a cut of a torn write at Open (Damage) and logs it, as
// a warning: nothing cut was synced, so nothing in it was acknowledged.
func (l *Log) cutLog(msg string, args ...any) {
	var b strings.Builder
	b.WriteString(msg)
	for i := 0; i+1 < len(args); i += 2 {
		fmt.Fprintf(&b, ", %v %v", args[i], args[i+1])
	}
	l.mu.Lock()
	l.damage = append(l.damage, b.String())
	l.mu.Unlock()
	if l.opts.ReadOnly {
		return // Damage says it; the mode that cuts logs it
	}
	l.opts.Logger.Warn(msg, args...)
}

// Front returns the first offset of the log in dir by the names of its
// segments, without opening it: ok is false where it has none (no log, or
// an empty one). A log that was never truncated at its front (TruncateFront)
// nor reset (Reset) starts at 1.
func Front(fs FS, dir string) (first uint64, ok bool, err error) {
	names, err := fs.List(dir)
	if err != nil {
		return 0, false, err
	}
	for _, name := range names {
		if f, isSeg := parseSegmentName(name); isSeg && (!ok || f < first) {
			first, ok = f, true
		}
	}
	return first, ok, nil
}
