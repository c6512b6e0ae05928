package localrecovery

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/internal/procfs"
	"github.com/cairn-edge/cairn/internal/testlog"
	"github.com/cairn-edge/cairn/seglog"
)

// logBuffer collects log lines for assertions.
type logBuffer struct{ testlog.Buffer }

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

var task0 = checkpoint.TaskID{Operator: "count", Subtask: 0}

func payload(id uint64, n int) []byte {
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(uint64(i)*7 + id)
	}
	return data
}

// complete stores a snapshot of n bytes for checkpoint id on top of base and
// completes it.
func complete(t *testing.T, s *Store, id uint64, n int, base ...checkpoint.StateHandle) *checkpoint.Manifest {
	t.Helper()
	h, err := s.PutState(id, task0, slices.Values([][]byte{payload(id, n)}))
	if err != nil {
		t.Fatal(err)
	}
	m := &checkpoint.Manifest{ID: id, Subtasks: []checkpoint.Ack{{Task: task0, ID: id, State: h, Base: base}}}
	if err := s.Complete(m); err != nil {
		t.Fatal(err)
	}
	return m
}

func mustOpen(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ids(t *testing.T, s *Store) string {
	t.Helper()
	ms, err := s.Completed()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprint(m.ID))
	}
	return strings.Join(out, " ")
}

func TestStoreRoundTripAcrossReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checkpoints")
	s := mustOpen(t, dir, Options{})
	big := 3*ChunkSize + 12345
	m := complete(t, s, 7, big)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir, Options{})
	if id, _ := s.LastID(); id != 7 {
		t.Fatalf("last id after reopen = %d, want 7", id)
	}
	if got := ids(t, s); got != "7" {
		t.Fatalf("completed after reopen: %q", got)
	}
	data, err := s.ReadState(m.Subtasks[0].State)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, payload(7, big)) {
		t.Fatal("read back different bytes")
	}
	// The snapshot went in as four chunks of at most ChunkSize.
	if n := blobCount(t, s)[7]; n != 4 {
		t.Fatalf("%d chunks, want 4", n)
	}
}

func TestStoreLastIDNeverGoesBack(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	s := mustOpen(t, dir, Options{})
	for _, id := range []uint64{5, 9, 3} {
		if err := s.SaveLastID(id); err != nil {
			t.Fatal(err)
		}
	}
	if id, _ := s.LastID(); id != 9 {
		t.Fatalf("last id %d, want 9", id)
	}
	s.Close()
	if id, _ := mustOpen(t, dir, Options{}).LastID(); id != 9 {
		t.Fatalf("last id %d after reopening, want 9", id)
	}
}

// blobCount is how many chunks of each checkpoint's snapshots the store
// holds.
func blobCount(t *testing.T, s *Store) map[uint64]int {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[uint64]int{}
	for _, b := range s.blobs {
		out[b.id] += len(b.chunks)
	}
	return out
}

// segments is how many segment files the store's log has.
func segments(t *testing.T, dir string) int {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	return len(names)
}

// TestRetentionKeepsNewestAndWhatTheyReference keeps the newest two
// checkpoints and the snapshots of their chains, forgets the rest and
// deletes the segments that hold nothing kept, across a reopen.
func TestRetentionKeepsNewestAndWhatTheyReference(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	opts := Options{Retain: 2, SegmentBytes: 4 << 10}
	s := mustOpen(t, dir, opts)
	full := complete(t, s, 1, 3000)
	complete(t, s, 2, 3000)
	// 3 and 4 are increments on top of 1's snapshot.
	inc := complete(t, s, 3, 100, full.Subtasks[0].State)
	complete(t, s, 4, 100, full.Subtasks[0].State, inc.Subtasks[0].State)
	check := func(s *Store) {
		t.Helper()
		if got := ids(t, s); got != "4 3" {
			t.Fatalf("retained %q, want \"4 3\"", got)
		}
		blobs := blobCount(t, s)
		if blobs[1] == 0 || blobs[3] == 0 || blobs[4] == 0 {
			t.Fatalf("a referenced snapshot was forgotten: %v", blobs)
		}
		if blobs[2] != 0 {
			t.Fatalf("checkpoint 2's snapshot survived retention: %v", blobs)
		}
		for _, m := range mustCompleted(t, s) {
			for _, h := range m.Subtasks[0].Handles() {
				if _, err := s.ReadState(h); err != nil {
					t.Fatalf("checkpoint %d: %v", m.ID, err)
				}
			}
		}
	}
	check(s)
	// Many more, each a whole snapshot: the segments of the old ones go.
	for id := uint64(5); id <= 40; id++ {
		complete(t, s, id, 3000)
	}
	if n := segments(t, dir); n > 4 {
		t.Fatalf("%d segments of 4 KiB hold two checkpoints of 3 KB", n)
	}
	// An aborted checkpoint's state goes with Discard.
	if _, err := s.PutState(41, task0, slices.Values([][]byte{[]byte("x")})); err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(41); err != nil {
		t.Fatal(err)
	}
	if blobCount(t, s)[41] != 0 {
		t.Fatal("Discard left state behind")
	}
	s.Close()
	s = mustOpen(t, dir, opts)
	if got := ids(t, s); got != "40 39" {
		t.Fatalf("retained %q after reopening, want \"40 39\"", got)
	}
}

func TestCompleteRefusesMissingState(t *testing.T) {
	s := mustOpen(t, filepath.Join(t.TempDir(), "c"), Options{})
	h := checkpoint.StateHandle{Key: handleKey(1, task0.String()), Size: 1}
	err := s.Complete(&checkpoint.Manifest{ID: 1, Subtasks: []checkpoint.Ack{{Task: task0, ID: 1, State: h}}})
	if err == nil || !strings.Contains(err.Error(), "not stored") {
		t.Fatalf("Complete = %v, want a missing-state error", err)
	}
	if got := ids(t, s); got != "" {
		t.Fatalf("completed %q after a refused completion", got)
	}
}

// flip flips the bits of the byte at off of the file at path.
func flip(t *testing.T, path string, off int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += int64(len(data))
	}
	data[off] ^= 0x04
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBitFlipIsDetected: a snapshot whose bytes changed on the disk fails
// its verification.
func TestBitFlipIsDetected(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	s := mustOpen(t, dir, Options{})
	m := complete(t, s, 1, 5000)
	flip(t, filepath.Join(dir, "00000000000000000001.seg"), 2500)
	if _, err := s.ReadState(m.Subtasks[0].State); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("ReadState of a flipped snapshot = %v, want ErrCorrupt", err)
	}
}

// TestLostCompletionRecordDiscardsItsState: a completion record a power
// cut took (the log cut before it) leaves its snapshots named by nothing;
// they go, and the checkpoint before is the newest. Its id may be issued
// again: nothing outside the agent saw that checkpoint complete.
func TestLostCompletionRecordDiscardsItsState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	var logs logBuffer
	s := mustOpen(t, dir, Options{Logger: logs.logger()})
	complete(t, s, 1, 100)
	complete(t, s, 2, 100)
	s.Close()
	seg := filepath.Join(dir, "00000000000000000001.seg")
	fi, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(seg, fi.Size()-10); err != nil { // into the last record, 2's completion
		t.Fatal(err)
	}
	s = mustOpen(t, dir, Options{Logger: logs.logger()})
	if got := ids(t, s); got != "1" {
		t.Fatalf("completed %q, want 1", got)
	}
	for _, want := range []string{"cutting the log at a record that does not verify", `msg="discarding state of a checkpoint that never completed" id=2`} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("the log does not say %q:\n%s", want, logs.String())
		}
	}
	if blobCount(t, s)[2] != 0 {
		t.Fatal("checkpoint 2's state survived")
	}
	if id, _ := s.LastID(); id != 1 {
		t.Fatalf("last id %d, want 1", id)
	}
}

// TestDamageInAnOlderSegment: a completion record that fails its checksum
// in a segment before the newest is lost, and logged; the checkpoints of
// later segments are there.
func TestDamageInAnOlderSegment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	var logs logBuffer
	opts := Options{Logger: logs.logger(), Retain: 10, SegmentBytes: 1 << 10}
	s := mustOpen(t, dir, opts)
	for id := uint64(1); id <= 6; id++ {
		complete(t, s, id, 600)
	}
	s.Close()
	if n := segments(t, dir); n < 3 {
		t.Fatalf("%d segments: the test needs several", n)
	}
	first := filepath.Join(dir, "00000000000000000001.seg")
	flip(t, first, -3) // in the first segment's last record
	s = mustOpen(t, dir, opts)
	got := ids(t, s)
	if !strings.HasPrefix(got, "6 5") || strings.Contains(got, " 1") {
		t.Fatalf("completed %q: want the later segments' newest, not the damaged segment's", got)
	}
	if !strings.Contains(logs.String(), "reading past damage in the log") {
		t.Fatalf("the damage is not logged:\n%s", logs.String())
	}
	for _, m := range mustCompleted(t, s) {
		if _, err := s.ReadState(m.Subtasks[0].State); err != nil {
			t.Fatalf("checkpoint %d: %v", m.ID, err)
		}
	}
}

func mustCompleted(t *testing.T, s *Store) []*checkpoint.Manifest {
	t.Helper()
	ms, err := s.Completed()
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func TestWriteFaultFailsWritesUntilCleared(t *testing.T) {
	var full bool
	s := mustOpen(t, filepath.Join(t.TempDir(), "c"), Options{WriteFault: func() error {
		if full {
			return syscall.ENOSPC
		}
		return nil
	}})
	full = true
	if _, err := s.PutState(1, task0, slices.Values([][]byte{[]byte("x")})); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("PutState on a full disk = %v, want ENOSPC", err)
	}
	full = false
	complete(t, s, 2, 10)
}

// TestLockedStoreIsNotOpenedTwice opens a store that a running agent
// holds: the second open fails at once and says so.
func TestLockedStoreIsNotOpenedTwice(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	s := mustOpen(t, dir, Options{})
	complete(t, s, 1, 10)
	if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a second Open of a store in use: %v", err)
	}
	if got := ids(t, s); got != "1" {
		t.Fatalf("the store in use lost its checkpoints: %q", got)
	}
}

// TestWearAgreesWithTheKernel: the pages the store counts, for snapshots
// large and small, completion records and retention, are what the kernel
// says this process's writes made it write (/proc/self/io), and each
// checkpoint is one sync.
func TestWearAgreesWithTheKernel(t *testing.T) {
	s := mustOpen(t, filepath.Join(t.TempDir(), "c"), Options{Retain: 2, SegmentBytes: 1 << 20})
	written0, syncs0 := s.Wear()
	before, err := procfs.WriteBytes(procfs.Self)
	if err != nil {
		t.Fatalf("this test needs Linux's /proc/self/io: %v", err)
	}
	for id := uint64(1); id <= 12; id++ {
		h, err := s.PutState(id, task0, slices.Values([][]byte{payload(id, int(id)*150_000%(3<<20))}))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(&checkpoint.Manifest{ID: id, Subtasks: []checkpoint.Ack{{Task: task0, ID: id, State: h}}}); err != nil {
			t.Fatal(err)
		}
	}
	after, _ := procfs.WriteBytes(procfs.Self)
	written, syncs := s.Wear()
	// The file system may write a directory block of its own now and then.
	if kernel, counted := after-before, written-written0; counted == 0 || kernel < counted || kernel > counted+4*seglog.PageSize {
		t.Fatalf("the kernel wrote %d bytes for the store, it counted %d", kernel, counted)
	}
	// One sync a checkpoint, and one for the directory at each new
	// segment.
	if n := syncs - syncs0; n < 12 || n > 3*12 {
		t.Fatalf("%d syncs for 12 checkpoints", n)
	}
}

// TestConcurrentWritesOnAFailingDisk stores snapshots from several
// goroutines at once while checkpoints complete, on a disk that fails one
// write or sync in twenty. A failed write rolls back everything not yet
// synced, whoever appended it: a checkpoint whose Complete returned nil
// must still be there, with every snapshot it names, after reopening.
func TestConcurrentWritesOnAFailingDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(3, 4))
	s := mustOpen(t, dir, Options{Retain: 1000, WriteFault: func() error {
		mu.Lock()
		defer mu.Unlock()
		if rng.IntN(20) == 0 {
			return syscall.ENOSPC
		}
		return nil
	}})
	tasks := []checkpoint.TaskID{{Operator: "a"}, {Operator: "b"}, {Operator: "c"}}
	completed := map[uint64]*checkpoint.Manifest{}
	var pending *checkpoint.Manifest // stored, completing while the next is stored
	for id := uint64(1); id <= 1000; id++ {
		m := &checkpoint.Manifest{ID: id}
		var wg sync.WaitGroup
		acks := make([]checkpoint.Ack, len(tasks))
		failed := make([]bool, len(tasks))
		for i, task := range tasks {
			wg.Go(func() {
				h, err := s.PutState(id, task, slices.Values([][]byte{payload(id, 100+int(id)%7*1000)}))
				acks[i], failed[i] = checkpoint.Ack{Task: task, ID: id, State: h}, err != nil
			})
		}
		if pending != nil {
			wg.Go(func() {
				if s.Complete(pending) == nil {
					completed[pending.ID] = pending
				}
			})
		}
		wg.Wait()
		pending = nil
		if !slices.Contains(failed, true) {
			m.Subtasks, pending = acks, m
		}
	}
	if len(completed) < 200 {
		t.Fatalf("only %d of 1000 checkpoints completed", len(completed))
	}
	s.Close()
	s = mustOpen(t, dir, Options{Retain: 1000})
	ms, err := s.Completed()
	if err != nil {
		t.Fatal(err)
	}
	found := map[uint64]bool{}
	for _, m := range ms {
		found[m.ID] = true
		if completed[m.ID] == nil {
			t.Errorf("checkpoint %d is there, but its Complete failed", m.ID)
		}
	}
	for id, m := range completed {
		if !found[id] {
			t.Errorf("checkpoint %d completed, and is not there after reopening", id)
			continue
		}
		for _, a := range m.Subtasks {
			if got, err := s.ReadState(a.State); err != nil || !bytes.Equal(got, payload(id, 100+int(id)%7*1000)) {
				t.Errorf("checkpoint %d, %s: %v", id, a.Task, err)
			}
		}
	}
}
