package seglog_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/seglog"
)

// scanned is what a whole read of a log gave: the offsets of the records
// that verified, in order, and the ranges lost to damage.
type scanned struct {
	good []uint64
	lost []seglog.Record // Data dropped
}

// scan reads l from its first offset to its end, checking that the
// records and ranges lost follow one another without a gap and that each
// record read holds its own data.
func scan(t testing.TB, l *seglog.Log) scanned {
	t.Helper()
	var s scanned
	at := l.First()
	err := l.Read(at, func(r seglog.Record) bool {
		if r.Offset != at {
			t.Fatalf("a record at offset %d, want %d", r.Offset, at)
		}
		at = r.End()
		if r.Damage != "" {
			s.lost = append(s.lost, seglog.Record{Offset: r.Offset, Count: r.Count, Damage: r.Damage})
			return true
		}
		if !bytes.HasPrefix(r.Data, fmt.Appendf(nil, "record %d:", r.Offset)) {
			t.Fatalf("offset %d holds %q", r.Offset, r.Data)
		}
		s.good = append(s.good, r.Offset)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if at != l.Synced() {
		t.Fatalf("read to %d of %d", at, l.Synced())
	}
	return s
}

// damageLog writes a log of n records of one offset each over segments
// of segBytes, and returns its directory and segment files, oldest first.
func damageLog(t testing.TB, n int, segBytes int64) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	l := open(t, dir, seglog.Options{SegmentBytes: segBytes})
	for range n {
		appendSync(t, l, 60, 1)
	}
	l.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	slices.Sort(segs)
	return dir, segs
}

// flip inverts the byte at pos of file (from its end if pos < 0).
func flip(t testing.TB, file string, pos int) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if pos < 0 {
		pos += len(data)
	}
	data[pos] ^= 0xFF
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// told collects what OnDamage is told, and what is logged.
type told struct {
	damage []seglog.Damage
	log    strings.Builder
}

func (d *told) options(segBytes int64) seglog.Options {
	return seglog.Options{SegmentBytes: segBytes, OnDamage: func(dm seglog.Damage) { d.damage = append(d.damage, dm) },
		Logger: slog.New(slog.NewTextHandler(&d.log, nil))}
}

// TestDamageCostsTheDamagedRecordOnly: a flipped byte in a record in the
// middle of the log, in the newest segment or an older one, with records
// after it in its segment or none, costs that record's offsets only: a
// read returns them as lost, with the reason, and every other record; the
// damage is told once and logged as an error; Open cuts nothing, and the
// log takes appends after its end.
func TestDamageCostsTheDamagedRecordOnly(t *testing.T) {
	const frame = 16 + 1 + 60 // each record's bytes: its header, count and data
	for _, c := range []struct {
		name   string
		seg    int // -1: the newest
		at     int // the byte flipped in it, from its end if < 0
		header bool
	}{
		{"newest segment, records after it", -1, 20 + frame + 30, false},
		{"newest segment, its first record's length", -1, 20, false},
		{"older segment, records after it", 0, 20 + 2*frame + 40, false},
		{"older segment, its last record", 0, -5, false},
		{"older segment, its header", 1, 3, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, segs := damageLog(t, 40, 400)
			if c.seg < 0 {
				c.seg = len(segs) - 1
			}
			info, _ := os.Stat(segs[c.seg])
			pos := c.at
			if pos < 0 {
				pos += int(info.Size())
			}
			flip(t, segs[c.seg], c.at)
			var d told
			l := open(t, dir, d.options(400))
			if l.Next() != 41 {
				t.Fatalf("Open cut the log to offset %d", l.Next())
			}
			got := scan(t, l)
			var lost []uint64
			for _, r := range got.lost {
				for o := r.Offset; o < r.End(); o++ {
					lost = append(lost, o)
				}
			}
			if c.header {
				if len(got.lost) != 0 || len(got.good) != 40 || !strings.Contains(d.log.String(), "level=ERROR") {
					t.Fatalf("a damaged header: lost %v, %d read; log:\n%s", got.lost, len(got.good), d.log.String())
				}
				return
			}
			first, _ := strconv(segs[c.seg])
			if want := first + uint64((pos-20)/frame); !slices.Equal(lost, []uint64{want}) {
				t.Fatalf("lost %v (offsets %v), want offset %d only", got.lost, lost, want)
			}
			if len(got.good)+len(lost) != 40 {
				t.Fatalf("%d read and %d lost of 40", len(got.good), len(lost))
			}
			if len(d.damage) != 1 || d.damage[0].Offset != lost[0] || d.damage[0].Count != len(lost) || d.damage[0].Segment != segs[c.seg] {
				t.Fatalf("told %+v, want the one range lost", d.damage)
			}
			if !strings.Contains(d.log.String(), `level=ERROR msg="reading past damage in the log: offsets lost"`) || strings.Count(d.log.String(), "\n") != 1 {
				t.Fatalf("the damage is not logged once, as an error:\n%s", d.log.String())
			}
			scan(t, l) // read again: told no more
			if len(d.damage) != 1 {
				t.Fatalf("told %d times", len(d.damage))
			}
			appendSync(t, l, 60, 1)
			l.Close()
			l = open(t, dir, seglog.Options{SegmentBytes: 400})
			if again := scan(t, l); len(again.good) != len(got.good)+1 || fmt.Sprint(again.lost) != fmt.Sprint(got.lost) {
				t.Fatalf("after an append and a reopen: %d read, lost %v", len(again.good), again.lost)
			}
		})
	}
}

// strconv is the first offset a segment's file name gives.
func strconv(path string) (uint64, error) {
	var first uint64
	_, err := fmt.Sscanf(filepath.Base(path), "%020d.seg", &first)
	return first, err
}

// TestRemovedSegmentCostsItsOffsets: a segment removed from the middle of
// the log loses its offsets, and only those; the first segment removed
// takes the log's front with it.
func TestRemovedSegmentCostsItsOffsets(t *testing.T) {
	dir, segs := damageLog(t, 40, 400)
	os.Remove(segs[2])
	var d told
	l := open(t, dir, d.options(400))
	got := scan(t, l)
	first, _ := strconv(segs[2])
	end, _ := strconv(segs[3])
	if len(got.lost) != 1 || got.lost[0].Offset != first || got.lost[0].End() != end || len(got.good) != 40-int(end-first) {
		t.Fatalf("lost %v, %d read; want %d..%d lost", got.lost, len(got.good), first, end)
	}
	if len(d.damage) != 1 || !strings.Contains(d.damage[0].Reason, "the next begins at") {
		t.Fatalf("told %+v", d.damage)
	}
}

// TestTornTailIsNoDamage: the bytes of a write torn by a power cut at the
// end of the newest segment are cut, as a warning; nothing is told lost.
func TestTornTailIsNoDamage(t *testing.T) {
	dir, segs := damageLog(t, 40, 400)
	newest := segs[len(segs)-1]
	data, _ := os.ReadFile(newest)
	os.WriteFile(newest, append(data, data[20:20+30]...), 0o600) // half a record
	var d told
	l := open(t, dir, d.options(400))
	if got := scan(t, l); len(got.lost) != 0 || len(got.good) != 40 || len(d.damage) != 0 {
		t.Fatalf("after a torn write: lost %v, %d read, told %v", got.lost, len(got.good), d.damage)
	}
	if !strings.Contains(d.log.String(), "level=WARN") || strings.Contains(d.log.String(), "level=ERROR") {
		t.Fatalf("a torn write is a warning:\n%s", d.log.String())
	}
}

// TestAnotherFormatIsRefused: a segment whose header verifies and names a
// format this cairn does not read is refused, not read past.
func TestAnotherFormatIsRefused(t *testing.T) {
	dir, segs := damageLog(t, 40, 400)
	for _, seg := range []string{segs[0], segs[len(segs)-1]} {
		data, _ := os.ReadFile(seg)
		orig := bytes.Clone(data)
		data[4] = 2 // the format, under a checksum that verifies
		binary.LittleEndian.PutUint32(data[16:], crc32.Checksum(data[:16], crc32.MakeTable(crc32.Castagnoli)))
		os.WriteFile(seg, data, 0o600)
		if _, err := seglog.Open(dir, seglog.Options{Logger: quiet}); !errors.Is(err, seglog.ErrCorrupt) || !strings.Contains(err.Error(), "segment format 2") {
			t.Fatalf("Open with a segment of format 2: %v", err)
		}
		os.WriteFile(seg, orig, 0o600)
	}
}

// TestRandomDamage: bytes flipped anywhere in a log's segments, headers
// included, cost the records that held them and no other: every record
// read is one written, at its offset, every offset is read or lost, and
// each range lost holds a flipped byte or follows a damaged length.
func TestRandomDamage(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		dir, segs := damageLog(t, 30, 300+int64(rng.IntN(600)))
		flipped := 0
		for range 1 + rng.IntN(4) {
			seg := segs[rng.IntN(len(segs))]
			info, _ := os.Stat(seg)
			flip(t, seg, rng.IntN(int(info.Size())))
			flipped++
		}
		var d told
		l, err := seglog.Open(dir, d.options(300))
		if err != nil {
			t.Fatalf("seed %d: Open: %v", seed, err)
		}
		got := scan(t, l)
		lostOffsets := 0
		for _, r := range got.lost {
			lostOffsets += r.Count
		}
		// A flip in the newest segment's last record is a torn write, cut.
		cut := 30 - int(l.Synced()-1)
		if len(got.good)+lostOffsets+cut != 30 || len(got.lost) > flipped || len(d.damage) != len(got.lost) {
			t.Fatalf("seed %d: %d flips: %d read, %v lost, %d cut, told %d", seed, flipped, len(got.good), got.lost, cut, len(d.damage))
		}
		l.Close()
	}
}

// newestUnheaded writes a log of three records of one offset (synced) and,
// after its segment, the file of the segment the next record would start:
// 00000000000000000004.seg, holding data. It returns the log's directory
// and that file's path.
func newestUnheaded(t *testing.T, data []byte) (string, string) {
	t.Helper()
	dir := t.TempDir()
	l := open(t, dir, seglog.Options{})
	appendSync(t, l, 60, 1, 1, 1)
	l.Close()
	newest := filepath.Join(dir, "00000000000000000004.seg")
	if err := os.WriteFile(newest, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, newest
}

// headerOf is the header of the segment starting at first.
func headerOf(first uint64) []byte {
	h := append([]byte("CRNL"), 1, 0, 0, 0)
	h = binary.LittleEndian.AppendUint64(h, first)
	return binary.LittleEndian.AppendUint32(h, crc32.Checksum(h, crc32.MakeTable(crc32.Castagnoli)))
}

// opensOnFromFour checks that the log in dir reads its three records, and
// takes an append at offset 4 that reads back after a reopen.
func opensOnFromFour(t *testing.T, l *seglog.Log, dir string) {
	t.Helper()
	if l.Next() != 4 || len(readAll(t, l, 1)) != 3 {
		t.Fatalf("after the newest segment was taken away: next %d", l.Next())
	}
	appendSync(t, l, 60, 1)
	l.Close()
	l = open(t, dir, seglog.Options{})
	if rs := readAll(t, l, 1); len(rs) != 4 || rs[3].Offset != 4 || l.Next() != 5 {
		t.Fatalf("the append after it, reopened: next %d, %v", l.Next(), rs)
	}
}

// TestNewestSegmentTornAtCreationIsRemoved: a newest segment that holds
// only what a power cut leaves of a segment created and never synced —
// nothing, zeros (blocks allocated, never written), the start of its own
// header and zeros — is removed, as a warning, and the log goes on from
// the segment before.
func TestNewestSegmentTornAtCreationIsRemoved(t *testing.T) {
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"zeros", make([]byte, 8192)},
		{"a few zeros", make([]byte, 7)},
		{"the start of its header", headerOf(4)[:11]},
		{"the start of its header and zeros", append(headerOf(4)[:9], make([]byte, 4000)...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, newest := newestUnheaded(t, c.data)
			var d told
			l := open(t, dir, d.options(0))
			if _, err := os.Lstat(newest); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the torn segment is still there: %v", err)
			}
			if asides, _ := filepath.Glob(newest + ".*"); len(asides) != 0 {
				t.Fatalf("a torn segment was set aside: %v", asides)
			}
			if !strings.Contains(d.log.String(), `level=WARN msg="removing a log segment whose header does not verify: a write torn by a power cut" segment=`+newest) {
				t.Fatalf("the removal is not a warning naming the segment:\n%s", d.log.String())
			}
			opensOnFromFour(t, l, dir)
		})
	}
}

// TestNewestSegmentOfOtherBytesIsSetAside: a newest segment whose header
// does not verify, with no record after it that does, and that holds
// bytes a power cut does not leave (a file put there, bit rot) is renamed
// untouched to NAME.damaged-N, the first N free, as a warning that says
// where it went; the log goes on from the segment before, and Open passes
// the files set aside by.
func TestNewestSegmentOfOtherBytesIsSetAside(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 2))
	noise := make([]byte, 100<<10)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	rotten := headerOf(4)
	rotten[12] ^= 0x10
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"random bytes", noise},
		{"a text file", []byte("precious: do not lose\n")},
		{"one byte", []byte{0xff}},
		{"its header, a bit flipped", append(rotten, make([]byte, 100)...)},
		{"the start of its header, then bytes", append(headerOf(4)[:10], "not zeros"...)},
		{"zeros, then a byte", append(make([]byte, 4096), 1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, newest := newestUnheaded(t, c.data)
			// damaged-1 is taken: by an earlier one, or by the operator.
			taken := []byte("set aside before")
			if err := os.WriteFile(newest+".damaged-1", taken, 0o600); err != nil {
				t.Fatal(err)
			}
			var d told
			l := open(t, dir, d.options(0))
			if _, err := os.Lstat(newest); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the segment is still there: %v", err)
			}
			aside := newest + ".damaged-2"
			if got, err := os.ReadFile(aside); err != nil || !bytes.Equal(got, c.data) {
				t.Fatalf("set aside as %s: %d bytes of %d, equal %v, %v", aside, len(got), len(c.data), bytes.Equal(got, c.data), err)
			}
			if got, _ := os.ReadFile(newest + ".damaged-1"); !bytes.Equal(got, taken) {
				t.Fatalf("%s.damaged-1 was overwritten: %q", newest, got)
			}
			said := d.log.String()
			if !strings.Contains(said, "level=WARN") || !strings.Contains(said, "it is set aside untouched") ||
				!strings.Contains(said, "segment="+newest+" ") || !strings.Contains(said, "aside="+aside) {
				t.Fatalf("the set-aside is not a warning naming the segment and where it went:\n%s", said)
			}
			if len(d.damage) != 0 {
				t.Fatalf("told of damage: %v", d.damage)
			}
			opensOnFromFour(t, l, dir)
			if got, _ := os.ReadFile(aside); !bytes.Equal(got, c.data) {
				t.Fatal("the file set aside changed after the log went on")
			}
		})
	}
}

// TestNewestSegmentReadOnlyIsUntouched: opened read-only, a log whose
// newest segment would be removed or set aside changes nothing in its
// directory, ends before that segment, and says in Damage what the mode
// that writes does.
func TestNewestSegmentReadOnlyIsUntouched(t *testing.T) {
	for _, c := range []struct {
		name, says string
		data       []byte
	}{
		{"zeros", "removing a log segment", make([]byte, 512)},
		{"other bytes", "it is set aside untouched", []byte("precious: do not lose\n")},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, newest := newestUnheaded(t, c.data)
			before, _ := os.ReadDir(dir)
			var d told
			opts := d.options(0)
			opts.ReadOnly = true
			l := open(t, dir, opts)
			if l.Next() != 4 || len(readAll(t, l, 1)) != 3 {
				t.Fatalf("read-only: next %d", l.Next())
			}
			if dmg := l.Damage(); len(dmg) != 1 || !strings.Contains(dmg[0], c.says) || !strings.Contains(dmg[0], newest) {
				t.Fatalf("read-only Damage: %q, want %q of %s", dmg, c.says, newest)
			}
			if d.log.Len() != 0 {
				t.Fatalf("read-only logged:\n%s", d.log.String())
			}
			l.Close()
			after, _ := os.ReadDir(dir)
			if len(after) != len(before) {
				t.Fatalf("read-only changed the directory: %v, was %v", after, before)
			}
			if got, err := os.ReadFile(newest); err != nil || !bytes.Equal(got, c.data) {
				t.Fatalf("read-only changed the segment: %v", err)
			}
		})
	}
}
