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
