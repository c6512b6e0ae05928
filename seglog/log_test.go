package seglog_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-edge/cairn/internal/procfs"
	"github.com/cairn-edge/cairn/internal/testing/powercut"
	"github.com/cairn-edge/cairn/seglog"
)

// quiet discards what a log says.
var quiet = slog.New(slog.DiscardHandler)

func open(t testing.TB, dir string, opts seglog.Options) *seglog.Log {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	l, err := seglog.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// record is the data of the record at offset off: its own, so that a
// record read back at the wrong offset is caught.
func record(off uint64, size int) []byte {
	b := []byte(fmt.Sprintf("record %d:", off))
	for len(b) < size {
		b = append(b, byte('a'+off%26))
	}
	return b[:max(size, len(fmt.Sprintf("record %d:", off)))]
}

// appendSync appends records covering counts offsets each and syncs.
func appendSync(t testing.TB, l *seglog.Log, size int, counts ...int) {
	t.Helper()
	for _, c := range counts {
		off := l.Next()
		got, err := l.Append(c, record(off, size))
		if err != nil || got != off {
			t.Fatalf("Append at %d: %d, %v", off, got, err)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
}

// readAll returns the records from offset from, checking each against
// record().
func readAll(t testing.TB, l *seglog.Log, from uint64) []seglog.Record {
	t.Helper()
	var out []seglog.Record
	err := l.Read(from, func(r seglog.Record) bool {
		if !bytes.HasPrefix(r.Data, []byte(fmt.Sprintf("record %d:", r.Offset))) {
			t.Fatalf("offset %d holds %q", r.Offset, r.Data)
		}
		out = append(out, seglog.Record{Offset: r.Offset, Count: r.Count, Data: bytes.Clone(r.Data)})
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAppendReadAcrossSegments appends records of one and of several
// offsets over many small segments; reads from any offset return the
// record holding it and all after, in order, and survive a reopen.
func TestAppendReadAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, seglog.Options{SegmentBytes: 1 << 10})
	for i := range 100 {
		appendSync(t, l, 30+i%50, 1, 3, 1)
	}
	if l.First() != 1 || l.Next() != 501 || l.Synced() != 501 {
		t.Fatalf("first %d next %d synced %d, want 1, 501, 501", l.First(), l.Next(), l.Synced())
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) < 10 {
		t.Fatalf("%d segments of 1 KiB for 300 records", len(segs))
	}
	check := func(l *seglog.Log) {
		for _, from := range []uint64{1, 2, 3, 4, 5, 6, 250, 251, 252, 499, 500} {
			rs := readAll(t, l, from)
			if len(rs) == 0 || rs[0].Offset > from || rs[0].End() <= from || rs[len(rs)-1].End() != 501 {
				t.Fatalf("from %d: records %v..%v", from, rs[0], rs[len(rs)-1])
			}
			for i := 1; i < len(rs); i++ {
				if rs[i].Offset != rs[i-1].End() {
					t.Fatalf("from %d: record at %d after one ending at %d", from, rs[i].Offset, rs[i-1].End())
				}
			}
		}
	}
	check(l)
	l.Close()
	l = open(t, dir, seglog.Options{SegmentBytes: 1 << 10})
	if l.First() != 1 || l.Next() != 501 {
		t.Fatalf("reopened: first %d next %d", l.First(), l.Next())
	}
	check(l)
	appendSync(t, l, 40, 2)
	if rs := readAll(t, l, 500); len(rs) != 2 || rs[1].Offset != 501 || rs[1].Count != 2 {
		t.Fatalf("after reopening, appends go on at 501: %v", rs)
	}
}

// TestReadersSeeSyncedRecordsOnly: a record appended is read once synced.
func TestReadersSeeSyncedRecordsOnly(t *testing.T) {
	l := open(t, t.TempDir(), seglog.Options{})
	appendSync(t, l, 10, 1)
	if _, err := l.Append(1, record(2, 10)); err != nil {
		t.Fatal(err)
	}
	if rs := readAll(t, l, 1); len(rs) != 1 || l.Next() != 3 || l.Synced() != 2 {
		t.Fatalf("before the sync: %d records read, next %d, synced %d", len(rs), l.Next(), l.Synced())
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if rs := readAll(t, l, 1); len(rs) != 2 {
		t.Fatalf("after the sync: %d records read, want 2", len(rs))
	}
}

// TestReadStopsWhereAsked: a Read that stops goes on where it stopped.
func TestReadStopsWhereAsked(t *testing.T) {
	l := open(t, t.TempDir(), seglog.Options{SegmentBytes: 512})
	for range 50 {
		appendSync(t, l, 60, 1)
	}
	from, seen := uint64(1), 0
	for from < l.Synced() {
		n := 0
		err := l.Read(from, func(r seglog.Record) bool {
			if r.Offset != from {
				t.Fatalf("read %d, want %d", r.Offset, from)
			}
			from, n = r.End(), n+1
			return n < 3
		})
		if err != nil {
			t.Fatal(err)
		}
		seen += n
	}
	if seen != 50 {
		t.Fatalf("read %d records in steps of 3, want 50", seen)
	}
}

// TestTruncateFront deletes whole segments below an offset, never the
// newest, and reads below the first offset left fail.
func TestTruncateFront(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, seglog.Options{SegmentBytes: 256})
	for range 40 {
		appendSync(t, l, 50, 1)
	}
	before, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err := l.TruncateFront(20); err != nil {
		t.Fatal(err)
	}
	after, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if first := l.First(); first > 20 || first < 15 || len(after) >= len(before) {
		t.Fatalf("first %d after truncating below 20 (%d → %d segments)", first, len(before), len(after))
	}
	if err := l.Read(1, func(seglog.Record) bool { return true }); !errors.Is(err, seglog.ErrTruncated) {
		t.Fatalf("reading below the first offset: %v, want ErrTruncated", err)
	}
	if rs := readAll(t, l, 20); rs[len(rs)-1].End() != 41 {
		t.Fatalf("records from 20 end at %d", rs[len(rs)-1].End())
	}
	if err := l.TruncateFront(1000); err != nil {
		t.Fatal(err)
	}
	if segs, _ := filepath.Glob(filepath.Join(dir, "*.seg")); len(segs) != 1 || l.Next() != 41 {
		t.Fatalf("truncating everything keeps the newest segment: %d segments, next %d", len(segs), l.Next())
	}
	l.Close()
	l = open(t, dir, seglog.Options{SegmentBytes: 256})
	if l.Next() != 41 {
		t.Fatalf("reopened after truncating: next %d, want 41", l.Next())
	}
}

// TestReset makes an empty log go on at an offset, across a reopen.
func TestReset(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, seglog.Options{})
	appendSync(t, l, 10, 1, 1)
	if err := l.Reset(1000); err != nil {
		t.Fatal(err)
	}
	if l.First() != 1000 || l.Next() != 1000 {
		t.Fatalf("after Reset(1000): first %d next %d", l.First(), l.Next())
	}
	l.Close()
	l = open(t, dir, seglog.Options{})
	if l.First() != 1000 || l.Next() != 1000 {
		t.Fatalf("reopened after Reset(1000): first %d next %d", l.First(), l.Next())
	}
	appendSync(t, l, 10, 1)
	if rs := readAll(t, l, 1000); len(rs) != 1 || rs[0].Offset != 1000 {
		t.Fatalf("read %v", rs)
	}
}

// TestTornTailIsCut: bytes of a record whose write was torn end the newest
// segment at Open, and appends go on from there; a corrupt record in an
// older segment is an error when read, never data.
func TestTornTailIsCut(t *testing.T) {
	for _, tail := range []struct {
		name string
		data func(frame []byte) []byte
	}{
		{"half a record", func(f []byte) []byte { return f[:len(f)/2] }},
		{"a record ending in zeros", func(f []byte) []byte { return append(f[:len(f)-8:len(f)-8], make([]byte, 8)...) }},
		{"zeros", func(f []byte) []byte { return make([]byte, len(f)) }},
		{"a few bytes", func(f []byte) []byte { return f[:5] }},
	} {
		t.Run(tail.name, func(t *testing.T) {
			dir := t.TempDir()
			l := open(t, dir, seglog.Options{})
			appendSync(t, l, 100, 1, 1)
			l.Close()
			// The frame the next append would write, damaged.
			probe := t.TempDir()
			pl := open(t, probe, seglog.Options{})
			appendSync(t, pl, 100, 1, 1, 1)
			whole, _ := os.ReadFile(filepath.Join(probe, "00000000000000000001.seg"))
			mine, _ := os.ReadFile(filepath.Join(dir, "00000000000000000001.seg"))
			frame := whole[len(mine):]
			f, err := os.OpenFile(filepath.Join(dir, "00000000000000000001.seg"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(tail.data(frame))
			f.Close()

			// Read-only, the log reads to the damage, says where it is,
			// takes no write and changes no byte.
			damaged, _ := os.ReadFile(filepath.Join(dir, "00000000000000000001.seg"))
			ro := open(t, dir, seglog.Options{ReadOnly: true})
			if ro.Next() != 3 || len(readAll(t, ro, 1)) != 2 || len(ro.Damage()) != 1 || !strings.Contains(ro.Damage()[0], "does not verify") {
				t.Fatalf("read-only after a torn write: next %d, damage %q", ro.Next(), ro.Damage())
			}
			if _, err := ro.Append(1, []byte("x")); err == nil {
				t.Fatal("a read-only log took an append")
			}
			if err := ro.TruncateFront(3); err == nil {
				t.Fatal("a read-only log took a truncation")
			}
			ro.Close()
			if after, _ := os.ReadFile(filepath.Join(dir, "00000000000000000001.seg")); !bytes.Equal(after, damaged) {
				t.Fatal("opening read-only changed the file")
			}

			var said strings.Builder
			l = open(t, dir, seglog.Options{Logger: slog.New(slog.NewTextHandler(&said, nil))})
			if l.Next() != 3 || len(readAll(t, l, 1)) != 2 {
				t.Fatalf("after a torn write: next %d", l.Next())
			}
			if !strings.Contains(said.String(), "cutting the log at a record that does not verify") {
				t.Fatalf("the cut is not logged:\n%s", said.String())
			}
			appendSync(t, l, 100, 1)
			if rs := readAll(t, l, 1); len(rs) != 3 || rs[2].Offset != 3 {
				t.Fatalf("appends after the cut: %v", rs)
			}
		})
	}
}

// TestFailedWritesRollBack: a write that fails half way (a full disk) or a
// sync that fails leaves the log as it was at its last sync, and appends
// go on once the fault is gone, with nothing twice.
func TestFailedWritesRollBack(t *testing.T) {
	for _, op := range []string{"write", "sync"} {
		t.Run(op, func(t *testing.T) {
			fs := powercut.New()
			var fail bool
			fs.Fault = func(o, path string) (int, error) {
				if fail && o == op {
					return 7, syscall.ENOSPC
				}
				return 0, nil
			}
			l := open(t, "/log", seglog.Options{FS: fs, SegmentBytes: 300})
			appendSync(t, l, 40, 1, 1)
			fail = true
			for range 3 {
				_, err := l.Append(1, record(l.Next(), 40))
				if err == nil {
					err = l.Sync()
				}
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("with the disk full: %v", err)
				}
				if l.Next() != 3 || l.Synced() != 3 {
					t.Fatalf("after a failure: next %d synced %d, want 3", l.Next(), l.Synced())
				}
			}
			fail = false
			for range 10 {
				appendSync(t, l, 40, 1)
			}
			rs := readAll(t, l, 1)
			if len(rs) != 12 || rs[11].Offset != 12 {
				t.Fatalf("after the disk has room again: %d records", len(rs))
			}
			l.Close()
			l = open(t, "/log", seglog.Options{FS: fs, SegmentBytes: 300})
			if rs := readAll(t, l, 1); len(rs) != 12 {
				t.Fatalf("reopened: %d records, want 12", len(rs))
			}
		})
	}
}

// TestTornWriteThatCannotBeCutFailsOpen: a log whose torn last write
// cannot be cut (the truncate or its sync fails) does not open, rather
// than append after bytes that do not verify; once it can, it opens
// without them.
func TestTornWriteThatCannotBeCutFailsOpen(t *testing.T) {
	for _, op := range []string{"truncate", "sync"} {
		t.Run(op, func(t *testing.T) {
			fs := powercut.New()
			l := open(t, "/log", seglog.Options{FS: fs})
			appendSync(t, l, 40, 1, 1, 1)
			l.Close()
			files := fs.Files()
			newest := files[len(files)-1]
			f, err := fs.Open(newest)
			if err != nil {
				t.Fatal(err)
			}
			size, err := f.Size()
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			if err := fs.Corrupt(newest, int(size)-1); err != nil { // the last record's last byte
				t.Fatal(err)
			}
			fs.Fault = func(o, path string) (int, error) {
				if o == op {
					return 0, syscall.EIO
				}
				return 0, nil
			}
			if l, err := seglog.Open("/log", seglog.Options{FS: fs, Logger: quiet}); err == nil || !errors.Is(err, syscall.EIO) {
				if err == nil {
					l.Close()
				}
				t.Fatalf("opened with a torn write it could not cut: %v", err)
			}
			fs.Fault = nil
			l = open(t, "/log", seglog.Options{FS: fs})
			if rs := readAll(t, l, 1); len(rs) != 2 {
				t.Fatalf("after the torn write was cut: %d records, want 2", len(rs))
			}
		})
	}
}

// TestMeterCountsPagesAsTheKernel: appends between syncs dirty the pages
// they touch once; a sync cleans them, so the next append writes the page
// it shares with the one before again.
func TestMeterCountsPagesAsTheKernel(t *testing.T) {
	var m seglog.Meter
	l := open(t, t.TempDir(), seglog.Options{Meter: &m})
	for range 10 { // 10 small records, one sync: the header's page
		if _, err := l.Append(1, make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if m.Written() != seglog.PageSize || m.Syncs() != 2 { // the file and, once, its directory
		t.Fatalf("10 records and one sync: %d bytes, %d syncs; want one page, 2 syncs", m.Written(), m.Syncs())
	}
	appendSync(t, l, 5000, 1) // the first page again, and the next
	if m.Written() != 3*seglog.PageSize || m.Syncs() != 3 {
		t.Fatalf("then 5000 bytes: %d bytes, %d syncs; want 3 pages, 3 syncs", m.Written(), m.Syncs())
	}
	if l.Sync(); m.Syncs() != 3 {
		t.Fatalf("a sync with nothing to sync counted: %d", m.Syncs())
	}
}

// fsPages is what the file system may write for itself along with a log's
// pages, and the kernel counts for the process: a directory's block, now
// and then, as segments come and go.
const fsPages = 4 * seglog.PageSize

// TestMeterAgreesWithTheKernel: the pages the Meter counts over appends of
// many sizes, synced now and then across segments, are the bytes the
// kernel says this process's writes made it write (/proc/self/io), but
// for the file system's own.
func TestMeterAgreesWithTheKernel(t *testing.T) {
	var m seglog.Meter
	l := open(t, t.TempDir(), seglog.Options{Meter: &m, SegmentBytes: 64 << 10})
	before, err := procfs.WriteBytes(procfs.Self)
	if err != nil {
		t.Fatalf("this test needs Linux's /proc/self/io: %v", err)
	}
	for i := range 300 {
		if _, err := l.Append(1, make([]byte, 100+i%1000)); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	after, _ := procfs.WriteBytes(procfs.Self)
	if kernel := after - before; m.Written() == 0 || kernel < m.Written() || kernel > m.Written()+fsPages {
		t.Fatalf("the kernel wrote %d bytes for the log, the meter counted %d", kernel, m.Written())
	}
}
