package seglog_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-edge/cairn/internal/testing/powercut"
	"github.com/cairn-edge/cairn/seglog"
)

// FuzzOpen opens a log whose newest segment holds arbitrary bytes after
// two good records (or arbitrary bytes only, header included). Open must
// not panic; it either refuses the file as corrupt or cuts it to records
// that verify. What it keeps must read in order, and the log must take
// appends after it that read back after a reopen.
func FuzzOpen(f *testing.F) {
	good := goodSegment(f)
	f.Add(true, []byte{})
	f.Add(true, good[20:60])
	f.Add(false, good)
	f.Add(false, good[:30])
	f.Add(true, bytes.Repeat([]byte{0}, 64))
	f.Fuzz(func(t *testing.T, afterGood bool, tail []byte) {
		fs := powercut.New()
		fs.MkdirAll("/log")
		w, err := fs.Create("/log/00000000000000000001.seg")
		if err != nil {
			t.Fatal(err)
		}
		if afterGood {
			w.Write(good)
		}
		w.Write(tail)
		w.Sync()
		fs.SyncDir("/log")
		l, err := seglog.Open("/log", seglog.Options{FS: fs, Logger: quiet})
		if err != nil {
			if !errors.Is(err, seglog.ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt or success", err)
			}
			return
		}
		next := l.Next()
		if afterGood && next < 4 {
			t.Fatalf("the good records before the bytes were cut: next %d", next)
		}
		at := l.First()
		err = l.Read(at, func(r seglog.Record) bool {
			if r.Offset != at {
				t.Fatalf("record at %d, want %d", r.Offset, at)
			}
			at = r.End()
			return true
		})
		if err != nil || at != next {
			t.Fatalf("reading what Open kept: %v, stopped at %d of %d", err, at, next)
		}
		if _, err := l.Append(1, []byte("after")); err != nil {
			t.Fatal(err)
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		l.Close()
		l, err = seglog.Open("/log", seglog.Options{FS: fs, Logger: quiet})
		if err != nil {
			t.Fatalf("reopening after an append: %v", err)
		}
		var last []byte
		if err := l.Read(next, func(r seglog.Record) bool { last = bytes.Clone(r.Data); return true }); err != nil || string(last) != "after" {
			t.Fatalf("the append after the cut reads %q, %v", last, err)
		}
	})
}

// goodSegment is a segment holding records of 1 and 2 offsets from 1.
func goodSegment(f *testing.F) []byte {
	fs := powercut.New()
	l, err := seglog.Open("/g", seglog.Options{FS: fs, Logger: quiet})
	if err != nil {
		f.Fatal(err)
	}
	for i, c := range []int{1, 2} {
		if _, err := l.Append(c, []byte(fmt.Sprintf("good %d", i))); err != nil {
			f.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		f.Fatal(err)
	}
	r, err := fs.Open("/g/00000000000000000001.seg")
	if err != nil {
		f.Fatal(err)
	}
	size, _ := r.Size()
	data := make([]byte, size)
	r.ReadAt(data, 0)
	return data
}
