package localrecovery

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/internal/procfs"
)

// logBuffer collects log lines for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

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
	if err := s.SaveLastID(id); err != nil {
		t.Fatal(err)
	}
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

func open(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(path, opts)
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
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	s := open(t, path, Options{})
	big := 3*ChunkSize + 12345
	m := complete(t, s, 7, big)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, Options{})
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
	// The blob went in as four chunks of at most ChunkSize.
	err = s.db.View(func(tx *bolt.Tx) error {
		n := 0
		return tx.Bucket(bucketSnapshots).Bucket(blobPrefix(7, m.Subtasks[0].Task.String())).Bucket([]byte{0, 0, 0, 0}).ForEach(func(k, v []byte) error {
			if len(v) > ChunkSize {
				return fmt.Errorf("chunk of %d bytes", len(v))
			}
			if n++; n > 4 {
				return fmt.Errorf("more than 4 chunks")
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestStoreLastIDNeverGoesBack(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "c.db"), Options{})
	for _, id := range []uint64{5, 9, 3} {
		if err := s.SaveLastID(id); err != nil {
			t.Fatal(err)
		}
	}
	if id, _ := s.LastID(); id != 9 {
		t.Fatalf("last id %d, want 9", id)
	}
}

func blobCount(t *testing.T, s *Store) map[uint64]int {
	t.Helper()
	out := map[uint64]int{}
	s.db.View(func(tx *bolt.Tx) error {
		snaps := tx.Bucket(bucketSnapshots)
		return snaps.ForEach(func(k, _ []byte) error {
			snap := snaps.Bucket(k)
			return snap.ForEachBucket(func(part []byte) error {
				return snap.Bucket(part).ForEach(func([]byte, []byte) error {
					out[binary.BigEndian.Uint64(k)]++
					return nil
				})
			})
		})
	})
	return out
}

func TestRetentionKeepsNewestAndWhatTheyReference(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "c.db"), Options{Retain: 2})
	full := complete(t, s, 1, 1000)
	complete(t, s, 2, 1000)
	// 3 and 4 are increments on top of 1's snapshot.
	inc := complete(t, s, 3, 100, full.Subtasks[0].State)
	complete(t, s, 4, 100, full.Subtasks[0].State, inc.Subtasks[0].State)
	if got := ids(t, s); got != "4 3" {
		t.Fatalf("retained %q, want \"4 3\"", got)
	}
	blobs := blobCount(t, s)
	if blobs[1] == 0 || blobs[3] == 0 || blobs[4] == 0 {
		t.Fatalf("a referenced snapshot was deleted: %v", blobs)
	}
	if blobs[2] != 0 {
		t.Fatalf("checkpoint 2's snapshot survived retention: %v", blobs)
	}
	// An aborted checkpoint's state goes with Discard.
	if _, err := s.PutState(5, task0, slices.Values([][]byte{[]byte("x")})); err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(5); err != nil {
		t.Fatal(err)
	}
	if blobCount(t, s)[5] != 0 {
		t.Fatal("Discard left state behind")
	}
}

func TestCompleteRefusesMissingState(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "c.db"), Options{})
	h := checkpoint.StateHandle{Key: handleKey(1, task0.String()), Size: 1}
	err := s.Complete(&checkpoint.Manifest{ID: 1, Subtasks: []checkpoint.Ack{{Task: task0, ID: 1, State: h}}})
	if err == nil || !strings.Contains(err.Error(), "not stored") {
		t.Fatalf("Complete = %v, want a missing-state error", err)
	}
	if got := ids(t, s); got != "" {
		t.Fatalf("completed %q after a refused completion", got)
	}
}

func TestBitFlipIsDetected(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "c.db"), Options{})
	m := complete(t, s, 1, 5000)
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSnapshots).Bucket(blobPrefix(m.ID, m.Subtasks[0].Task.String())).Bucket([]byte{0, 0, 0, 0})
		k, v := b.Cursor().First()
		v = bytes.Clone(v)
		v[2500] ^= 0x04
		return b.Put(bytes.Clone(k), v)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadState(m.Subtasks[0].State); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("ReadState of a flipped blob = %v, want ErrCorrupt", err)
	}
}

func TestMissingCompletionRecordDiscardsItsState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	var logs logBuffer
	s := open(t, path, Options{Logger: logs.logger()})
	complete(t, s, 1, 100)
	complete(t, s, 2, 100)
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCheckpoints).Delete(binary.BigEndian.AppendUint64(nil, 2))
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, path, Options{Logger: logs.logger()})
	if got := ids(t, s); got != "1" {
		t.Fatalf("completed %q, want 1", got)
	}
	if !strings.Contains(logs.String(), `msg="discarding state of a checkpoint that never completed" id=2`) {
		t.Fatalf("the log does not say checkpoint 2 was discarded:\n%s", logs.String())
	}
	if blobCount(t, s)[2] != 0 {
		t.Fatal("checkpoint 2's state survived")
	}
	if id, _ := s.LastID(); id != 2 {
		t.Fatalf("last id %d, want 2: ids never go back", id)
	}
}

func TestDamagedCompletionRecordIsSkipped(t *testing.T) {
	var logs logBuffer
	s := open(t, filepath.Join(t.TempDir(), "c.db"), Options{Logger: logs.logger()})
	complete(t, s, 1, 100)
	complete(t, s, 2, 100)
	if err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCheckpoints)
		k := binary.BigEndian.AppendUint64(nil, 2)
		v := bytes.Clone(b.Get(k))
		v[3] ^= 1
		return b.Put(k, v)
	}); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, s); got != "1" {
		t.Fatalf("completed %q, want the intact 1", got)
	}
	if !strings.Contains(logs.String(), "skipping a damaged completion record") {
		t.Fatalf("no log line for the damaged record:\n%s", logs.String())
	}
}

func TestTruncatedFileIsSalvaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	var logs logBuffer
	s := open(t, path, Options{Logger: logs.logger(), Retain: 4})
	for id := uint64(1); id <= 4; id++ {
		complete(t, s, id, 700_000)
	}
	s.Close()
	// Cut the file inside the pages in use: the newest checkpoint's state,
	// written last, is at the end.
	meta, err := checkFile(path)
	if err != nil {
		t.Fatal(err)
	}
	used := int64(meta.highPage) * int64(meta.pageSize)
	if err := os.Truncate(path, used-400_000); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, Options{Logger: logs.logger(), Retain: 4})
	got := ids(t, s)
	if got == "" || strings.HasPrefix(got, "4") {
		t.Fatalf("after truncation the store holds %q; want older checkpoints only", got)
	}
	for _, m := range mustCompleted(t, s) {
		if _, err := s.ReadState(m.Subtasks[0].State); err != nil {
			t.Fatalf("salvaged checkpoint %d does not verify: %v", m.ID, err)
		}
	}
	for _, want := range []string{"checkpoint store is damaged", "truncated", "checkpoint lost in the damaged store", "id=4", "checkpoint salvaged from the damaged store"} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("log lacks %q:\n%s", want, logs.String())
		}
	}
	if _, err := os.Stat(path + ".damaged-1"); err != nil {
		t.Fatalf("the damaged file was not kept aside: %v", err)
	}
	if id, _ := s.LastID(); id != 4 {
		t.Fatalf("last id %d after salvage, want 4", id)
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

func TestGarbageFileIsSetAside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	if err := os.WriteFile(path, bytes.Repeat([]byte("not a database "), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	s := open(t, path, Options{Logger: logs.logger()})
	if got := ids(t, s); got != "" {
		t.Fatalf("completed %q from garbage", got)
	}
	if !strings.Contains(logs.String(), "neither meta page verifies") {
		t.Fatalf("log does not say why:\n%s", logs.String())
	}
	complete(t, s, 1, 10) // the new file works
}

func TestWriteFaultFailsWritesUntilCleared(t *testing.T) {
	var full bool
	s := open(t, filepath.Join(t.TempDir(), "c.db"), Options{WriteFault: func() error {
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

// TestLockedStoreIsNotDamaged opens a store that a running agent holds: the
// second open must fail, not set the live file aside.
func TestLockedStoreIsNotDamaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	s := open(t, path, Options{})
	complete(t, s, 1, 10)
	if _, err := Open(path, Options{}); err == nil {
		t.Fatal("a second Open of a store in use succeeded")
	}
	if _, err := os.Stat(path + ".damaged-1"); !os.IsNotExist(err) {
		t.Fatal("a store in use was set aside as damaged")
	}
	if got := ids(t, s); got != "1" {
		t.Fatalf("the store in use lost its checkpoints: %q", got)
	}
}

// TestWearCountsTheWrites: what the store counts as written by its
// transactions (snapshots small and spread over several, completion
// records, retention) is at most what the kernel wrote for them, and each
// commit two syncs. The kernel (/proc/self/io) counts more: the file
// system's own pages for the blocks the file takes, which the store does
// not see (the agent's status reports the kernel's count for this
// reason).
func TestWearCountsTheWrites(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "checkpoints.db"), Options{Retain: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	written0, syncs0 := s.Wear()
	before, err := procfs.WriteBytes(procfs.Self)
	if err != nil {
		t.Fatalf("this test needs Linux's /proc/self/io: %v", err)
	}
	for id := uint64(1); id <= 12; id++ {
		complete(t, s, id, int(id)*200_000%(5<<20))
	}
	after, _ := procfs.WriteBytes(procfs.Self)
	written, syncs := s.Wear()
	commits := (syncs - syncs0) / 2
	if commits < 3*12 || (syncs-syncs0)%2 != 0 {
		t.Fatalf("%d syncs counted for 12 checkpoints of at least 3 commits of two syncs each", syncs-syncs0)
	}
	// Each commit writes its pages and the meta page, in 4 KiB pages.
	if kernel, counted := after-before, written-written0; counted < commits*2*4096 || counted%4096 != 0 || kernel < counted {
		t.Fatalf("the kernel wrote %d bytes for %d commits, the store counted %d", kernel, commits, counted)
	}
}
