package seglog_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cairn-edge/cairn/internal/testing/powercut"
	"github.com/cairn-edge/cairn/seglog"
)

var (
	powerCuts = flag.Int("powercut.cuts", 400, "TestPowerCut: power cuts over all seeds (a long run: 10000 or more)")
	cutSeed   = flag.Uint64("powercut.seed", 0, "TestPowerCut: replay this seed only")
)

// cutsPerSeed is how many times one simulated device loses power.
const cutsPerSeed = 20

// TestPowerCut runs a writer on a file system that loses power at a random
// operation: in the middle of an append, a sync, a new segment, a
// truncation, a rollback. After each cut the disk keeps what was synced and
// perhaps part of what was written after (see package powercut); the log
// is opened again and must hold every record that a sync acknowledged,
// each once, in order, holding its own data, with nothing else but records
// that were appended and not yet acknowledged (as a broker would deliver
// again: the ingest log recognises those). Each seed is a device that
// loses power cutsPerSeed times; a failure prints the seed to replay.
func TestPowerCut(t *testing.T) {
	seeds := max(1, *powerCuts/cutsPerSeed)
	first := uint64(1)
	if *cutSeed != 0 {
		first, seeds = *cutSeed, 1
	}
	recordsAcked := 0
	for seed := first; seed < first+uint64(seeds); seed++ {
		n, err := powerCutRun(seed)
		if err != nil {
			t.Fatalf("seed %d (replay with -powercut.seed=%d): %v", seed, seed, err)
		}
		recordsAcked += n
	}
	t.Logf("%d power cuts over %d seeds, %d records acknowledged", seeds*cutsPerSeed, seeds, recordsAcked)
}

// cutModel is what the writer knows of its log.
type cutModel struct {
	data  map[uint64][]byte // by first offset: every record appended that may be on disk
	count map[uint64]int
	acked uint64 // records below were synced
	// floor is the highest offset below which the writer deleted
	// segments; records from it on must survive.
	floor uint64
}

func powerCutRun(seed uint64) (int, error) {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	fs := powercut.New()
	opts := seglog.Options{FS: fs, SegmentBytes: 2 << 10, Logger: quiet}
	m := &cutModel{data: map[uint64][]byte{}, count: map[uint64]int{}, acked: 1, floor: 1}
	acked := 0
	for cut := 0; cut < cutsPerSeed; cut++ {
		l, err := seglog.Open("/data/log", opts)
		if err != nil {
			return acked, fmt.Errorf("cut %d: open: %v", cut, err)
		}
		if err := m.verify(l); err != nil {
			return acked, fmt.Errorf("cut %d: %v", cut, err)
		}
		fs.DieAfter(1 + rng.IntN(300))
		n, err := m.work(l, rng)
		acked += n
		if err != nil {
			return acked, fmt.Errorf("cut %d: %v", cut, err)
		}
		fs.Cut(rng)
	}
	return acked, nil
}

// work appends, syncs, reads and truncates at random until the power
// fails, and returns the records it saw acknowledged.
func (m *cutModel) work(l *seglog.Log, rng *rand.Rand) (int, error) {
	acked := 0
	for {
		switch p := rng.IntN(100); {
		case p < 60:
			off := l.Next()
			count, data := 1+rng.IntN(4), cutRecord(rng, l.Next())
			got, err := l.Append(count, data)
			if err != nil {
				return acked, m.dead(err)
			}
			if got != off {
				return acked, fmt.Errorf("appended at %d, want %d", got, off)
			}
			m.data[off], m.count[off] = data, count
		case p < 85:
			before := l.Synced()
			if err := l.Sync(); err != nil {
				return acked, m.dead(err)
			}
			m.acked = l.Synced()
			for off := range m.data {
				if off >= before && off < m.acked {
					acked++
				}
			}
		case p < 92:
			if l.Synced() > l.First() {
				at := l.First() + rng.Uint64N(l.Synced()-l.First())
				if err := l.TruncateFront(at); err != nil {
					return acked, m.dead(err)
				}
				m.floor = max(m.floor, min(at, l.First()))
			}
		case p < 93:
			if l.First() == l.Next() {
				to := l.Next() + rng.Uint64N(100)
				if err := l.Reset(to); err != nil {
					// Either done or not: the log is empty both ways.
					return acked, m.dead(err)
				}
				m.acked, m.floor = to, to
			}
		default:
			if err := m.check(l, l.First(), l.Synced()); err != nil {
				return acked, m.dead(err)
			}
		}
	}
}

// dead accepts err if the power has failed (a rollback that could not be
// done says so too), and returns it otherwise.
func (m *cutModel) dead(err error) error {
	if errors.Is(err, powercut.ErrDead) {
		return nil
	}
	return fmt.Errorf("with the power on: %w", err)
}

// verify checks a log opened after a cut against the model, and makes the
// model what the disk now holds.
func (m *cutModel) verify(l *seglog.Log) error {
	first, next := l.First(), l.Next()
	if l.Synced() != next {
		return fmt.Errorf("opened with synced %d, next %d", l.Synced(), next)
	}
	if next < m.acked {
		return fmt.Errorf("the log ends at %d; records up to %d were acknowledged", next, m.acked)
	}
	if first > m.floor && first < next {
		return fmt.Errorf("the log starts at %d; nothing from %d on was deleted", first, m.floor)
	}
	if err := m.check(l, first, next); err != nil {
		return err
	}
	for off := range m.data {
		if off >= next {
			delete(m.data, off)
			delete(m.count, off)
		}
	}
	m.acked = next
	return nil
}

// check reads [from, to) and compares every record with the model: in
// order, each once, its own data and count, no gap.
func (m *cutModel) check(l *seglog.Log, from, to uint64) error {
	at := from
	var bad error
	err := l.Read(from, func(r seglog.Record) bool {
		if r.Offset >= to {
			return false
		}
		want, ok := m.data[r.Offset]
		switch {
		case r.Offset != at && !(at == from && r.Offset < from):
			bad = fmt.Errorf("record at %d where %d was due", r.Offset, at)
		case !ok || !bytes.Equal(r.Data, want) || r.Count != m.count[r.Offset]:
			bad = fmt.Errorf("record at %d holds %d offsets of %q: never appended there", r.Offset, r.Count, r.Data)
		}
		at = r.End()
		return bad == nil
	})
	if bad != nil {
		return bad
	}
	if err != nil {
		return fmt.Errorf("reading from %d: %w", from, err)
	}
	if at < to {
		return fmt.Errorf("reading from %d stopped at %d, before %d", from, at, to)
	}
	return nil
}

// cutRecord is a record's data: its offset and random bytes, of random
// size (sometimes larger than a segment).
func cutRecord(rng *rand.Rand, off uint64) []byte {
	size := rng.IntN(600)
	if rng.IntN(20) == 0 {
		size = 3000
	}
	b := []byte(fmt.Sprintf("%d:", off))
	for len(b) < size {
		b = append(b, byte(rng.UintN(256)))
	}
	return b
}

// TestSetAsideSurvivesAPowerCut: the power fails at every step of an Open
// that sets the newest segment aside (its rename, the directory's sync);
// after the cut, the next Open finds the bytes put there exactly once,
// under the segment's name or set aside, never lost and never twice, and
// the log opens with its records.
func TestSetAsideSurvivesAPowerCut(t *testing.T) {
	foreign := []byte("precious: not a segment of this log")
	const newest = "/log/00000000000000000004.seg"
	for n := 1; ; n++ {
		fs := powercut.New()
		opts := seglog.Options{FS: fs, Logger: quiet}
		l, err := seglog.Open("/log", opts)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := l.Append(1, []byte("record")); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		l.Close()
		f, err := fs.Create(newest)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(foreign)
		if err := errors.Join(f.Sync(), fs.SyncDir("/log")); err != nil {
			t.Fatal(err)
		}

		fs.DieAfter(n)
		if l, err := seglog.Open("/log", opts); err == nil {
			l.Close()
		}
		died := fs.Dead()
		fs.Cut(nil)
		l, err = seglog.Open("/log", opts)
		if err != nil {
			t.Fatalf("power cut at operation %d: reopen: %v", n, err)
		}
		if l.Next() != 4 {
			t.Fatalf("power cut at operation %d: next %d, want 4", n, l.Next())
		}
		l.Close()
		var copies []string
		for _, p := range fs.Files() {
			r, err := fs.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			size, _ := r.Size()
			data := make([]byte, size)
			r.ReadAt(data, 0)
			if bytes.Equal(data, foreign) {
				copies = append(copies, p)
			}
		}
		if len(copies) != 1 || copies[0] != newest+".damaged-1" {
			t.Fatalf("power cut at operation %d: the bytes put there are at %v, want %s.damaged-1 only", n, copies, newest)
		}
		if !died {
			t.Logf("the power failed at each of the first %d operations of an Open that sets a segment aside", n-1)
			return
		}
	}
}
