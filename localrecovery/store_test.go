package localrecovery

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
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
	"github.com/cairn-edge/cairn/internal/testing/testlog"
)

// logBuffer collects log lines for assertions.
type logBuffer struct{ testlog.Buffer }

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

var discard = slog.New(slog.DiscardHandler)

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
	dir := filepath.Join(t.TempDir(), "checkpoints.db")
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
	s.Close()
	if n := chunkCount(t, dir, 7); n != 4 {
		t.Fatalf("%d chunks, want 4", n)
	}
}

func TestStoreLastIDNeverGoesBack(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c.db")
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

// chunkCount is how many chunks of snapshots of checkpoint id the closed
// store at path holds.
func chunkCount(t *testing.T, path string, id uint64) int {
	t.Helper()
	s := mustOpen(t, path, Options{ReadOnly: true})
	defer s.Close()
	n := 0
	if err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(checkpointBucket(id))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, _ []byte) error {
			if _, _, ok := parseChunkKey(k); ok {
				n++
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// buckets are the ids of the checkpoint buckets in the store's file.
func buckets(t *testing.T, s *Store) []uint64 {
	t.Helper()
	var out []uint64
	if err := s.view(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			if id, ok := parseCheckpointBucket(name); ok {
				out = append(out, id)
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRetentionKeepsNewestAndWhatTheyReference keeps the newest two
// checkpoints and the buckets of their chains, and deletes the rest in
// the transaction of the checkpoint that made them old, across a reopen;
// the file lists only the retained ones; it stops growing.
func TestRetentionKeepsNewestAndWhatTheyReference(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c.db")
	opts := Options{Retain: 2}
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
		if got := buckets(t, s); !slices.Equal(got, []uint64{1, 3, 4}) {
			t.Fatalf("buckets %v, want 1 (in a retained chain), 3 and 4", got)
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
	s.Close()
	s = mustOpen(t, dir, opts)
	check(s)
	s.Close()
	// The file holds the retained checkpoints only, as `cairn checkpoints`
	// lists a stopped agent's: 1's bucket stays for its snapshot, not as
	// a checkpoint.
	s = mustOpen(t, dir, Options{Retain: math.MaxInt32, ReadOnly: true})
	if got := ids(t, s); got != "4 3" {
		t.Fatalf("the file lists %q, want the retained \"4 3\"", got)
	}
	s.Close()
	s = mustOpen(t, dir, opts)
	// Many more, each a whole snapshot: the file's pages are used again.
	for id := uint64(5); id <= 40; id++ {
		complete(t, s, id, 3000)
	}
	size := fileSize(t, dir)
	for id := uint64(41); id <= 200; id++ {
		complete(t, s, id, 3000)
	}
	if grown := fileSize(t, dir); grown > size {
		t.Fatalf("the file grew from %d to %d bytes keeping two checkpoints of 3 KB", size, grown)
	}
	// An aborted checkpoint's state goes with Discard, and was never
	// written.
	if _, err := s.PutState(201, task0, slices.Values([][]byte{[]byte("x")})); err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(201); err != nil {
		t.Fatal(err)
	}
	if len(s.pending) != 0 {
		t.Fatal("Discard left state behind")
	}
	s.Close()
	s = mustOpen(t, dir, opts)
	if got := ids(t, s); got != "200 199" {
		t.Fatalf("retained %q after reopening, want \"200 199\"", got)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func TestCompleteRefusesMissingState(t *testing.T) {
	s := mustOpen(t, filepath.Join(t.TempDir(), "c.db"), Options{})
	h := checkpoint.StateHandle{Key: handleKey(1, task0.String()), Size: 1}
	err := s.Complete(&checkpoint.Manifest{ID: 1, Subtasks: []checkpoint.Ack{{Task: task0, ID: 1, State: h}}})
	if err == nil || !strings.Contains(err.Error(), "not stored") {
		t.Fatalf("Complete = %v, want a missing-state error", err)
	}
	if got := ids(t, s); got != "" {
		t.Fatalf("completed %q after a refused completion", got)
	}
}

// TestBitFlipIsDetected: a snapshot whose bytes changed on the disk fails
// its chunk's checksum.
func TestBitFlipIsDetected(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c.db")
	s := mustOpen(t, dir, Options{})
	m := complete(t, s, 1, 5000)
	s.Close()
	if _, err := FlipNewestBlob(dir); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir, Options{})
	_, err := s.ReadState(m.Subtasks[0].State)
	if !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), "chunk 0: fails its checksum") {
		t.Fatalf("ReadState of a flipped snapshot = %v, want ErrCorrupt", err)
	}
}

// TestStructuralDamageIsSetAside: a file whose pages bbolt's check finds
// broken (a branch page's pointer, a leaf's type flipped), or that was
// cut to half, is set aside as <file>.damaged-N; what of it verifies is
// moved into a new file, whose ids go on; the store works.
func TestStructuralDamageIsSetAside(t *testing.T) {
	for _, damage := range []string{"branch", "leaf", "truncated"} {
		t.Run(damage, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "c.db")
			opts := Options{Retain: 5, HighWater: filepath.Join(t.TempDir(), "checkpoint-id")}
			s := mustOpen(t, dir, opts)
			n := 150 // a bucket of 150 snapshots: leaves under a branch
			if damage == "leaf" {
				n = 5 // a bucket of five snapshots: one leaf
			}
			for id := uint64(1); id <= 5; id++ {
				completeMany(t, s, id, n, 200)
			}
			s.Close()
			var err error
			if damage == "truncated" {
				err = TruncateHalf(dir)
			} else {
				err = FlipPage(dir, damage)
			}
			if err != nil {
				t.Fatal(err)
			}
			if CheckFile(dir) == nil {
				t.Fatal("the check finds no damage")
			}
			var logs logBuffer
			opts.Logger = logs.logger()
			s = mustOpen(t, dir, opts)
			if !strings.Contains(logs.String(), "checkpoint store is damaged; it is set aside") {
				t.Fatalf("the damage is not logged:\n%s", logs.String())
			}
			if _, err := os.Stat(dir + ".damaged-1"); err != nil {
				t.Fatalf("the damaged file was not kept aside: %v", err)
			}
			for _, m := range mustCompleted(t, s) {
				for _, a := range m.Subtasks {
					if _, err := s.ReadState(a.State); err != nil {
						t.Fatalf("moved checkpoint %d does not verify: %v", m.ID, err)
					}
				}
			}
			if id, _ := s.LastID(); id != 5 {
				t.Fatalf("last id %d after salvage, want 5", id)
			}
			if damage != "truncated" && len(mustCompleted(t, s)) == 0 {
				t.Fatal("nothing salvaged")
			}
			completeMany(t, s, 6, 3, 10) // the store works
			s.Close()
			if err := CheckFile(dir); err != nil {
				t.Fatalf("the new file: %v", err)
			}
		})
	}
}

// completeMany completes checkpoint id with n subtasks' snapshots of size
// bytes each.
func completeMany(t *testing.T, s *Store, id uint64, n, size int) *checkpoint.Manifest {
	t.Helper()
	m := &checkpoint.Manifest{ID: id}
	for i := range n {
		task := checkpoint.TaskID{Operator: "op", Subtask: i}
		h, err := s.PutState(id, task, slices.Values([][]byte{payload(id+uint64(i), size)}))
		if err != nil {
			t.Fatal(err)
		}
		m.Subtasks = append(m.Subtasks, checkpoint.Ack{Task: task, ID: id, State: h})
	}
	if err := s.Complete(m); err != nil {
		t.Fatal(err)
	}
	return m
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
	s := mustOpen(t, filepath.Join(t.TempDir(), "c.db"), Options{WriteFault: func() error {
		if full {
			return syscall.ENOSPC
		}
		return nil
	}})
	full = true
	h, err := s.PutState(1, task0, slices.Values([][]byte{[]byte("x")}))
	if err != nil {
		t.Fatal(err)
	}
	err = s.Complete(&checkpoint.Manifest{ID: 1, Subtasks: []checkpoint.Ack{{Task: task0, ID: 1, State: h}}})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Complete on a full disk = %v, want ENOSPC", err)
	}
	if got := ids(t, s); got != "" {
		t.Fatalf("completed %q after a failed write", got)
	}
	full = false
	complete(t, s, 2, 10)
}

// TestLockedStoreIsNotOpenedTwice opens a store that a running agent
// holds: a second Open fails and says so; a read-only one too, at once,
// rather than wait for the agent.
func TestLockedStoreIsNotOpenedTwice(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c.db")
	s := mustOpen(t, dir, Options{})
	complete(t, s, 1, 10)
	for _, readOnly := range []bool{false, true} {
		if _, err := Open(dir, Options{ReadOnly: readOnly}); err == nil || !strings.Contains(err.Error(), "in use by a running cairn") {
			t.Fatalf("a second Open (read-only %v) of a store in use: %v", readOnly, err)
		}
	}
	if got := ids(t, s); got != "1" {
		t.Fatalf("the store in use lost its checkpoints: %q", got)
	}
}

// TestReadOnlyChangesNothing: a store opened read-only lists and reads
// what the file holds and writes nothing, also to a damaged file, whose
// damage it reports.
func TestReadOnlyChangesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c.db")
	s := mustOpen(t, dir, Options{})
	m := complete(t, s, 1, 100)
	complete(t, s, 2, 100)
	s.Close()
	before, _ := os.ReadFile(dir)
	ro := mustOpen(t, dir, Options{ReadOnly: true})
	if got := ids(t, ro); got != "2 1" {
		t.Fatalf("read-only lists %q", got)
	}
	if _, err := ro.ReadState(m.Subtasks[0].State); err != nil {
		t.Fatal(err)
	}
	if err := ro.Complete(&checkpoint.Manifest{ID: 3}); err == nil {
		t.Fatal("a read-only store completed a checkpoint")
	}
	ro.Close()
	if after, _ := os.ReadFile(dir); !bytes.Equal(before, after) {
		t.Fatal("a read-only open changed the file")
	}
	if err := FlipPage(dir, "leaf"); err != nil {
		t.Fatal(err)
	}
	before, _ = os.ReadFile(dir)
	ro = mustOpen(t, dir, Options{ReadOnly: true})
	if len(ro.Damage()) == 0 {
		t.Fatal("a read-only open of a damaged file reports no damage")
	}
	ro.Close()
	if after, _ := os.ReadFile(dir); !bytes.Equal(before, after) {
		t.Fatal("a read-only open changed the damaged file")
	}
	if _, err := os.Stat(dir + ".damaged-1"); !os.IsNotExist(err) {
		t.Fatalf("a read-only open set the file aside: %v", err)
	}
}

// TestWearAgreesWithTheFile: the pages the store counts a checkpoint
// writing, for snapshots large and small, completion records and
// retention, are the pages of the file that its commit changed, and each
// checkpoint is one commit: two syncs. The kernel counts no fewer
// (/proc/self/io), and may count more: where bbolt writes a page inside a
// large folio of the page cache (one that a write of several pages made),
// Linux 6.18's ext4 counts the whole folio written, though the disk is
// written the page only (docs/checkpoints.md).
func TestWearAgreesWithTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	s := mustOpen(t, path, Options{Retain: 2})
	pages := func() [][]byte {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var out [][]byte
		for p := range slices.Chunk(data, 4096) {
			out = append(out, p)
		}
		return out
	}
	written0, syncs0 := s.Wear()
	kernel0, err := procfs.WriteBytes(procfs.Self)
	if err != nil {
		t.Fatalf("this test needs Linux's /proc/self/io: %v", err)
	}
	for id := uint64(1); id <= 30; id++ {
		before := pages()
		w, _ := s.Wear()
		if id%3 == 0 {
			complete(t, s, id, int(id)*150_000%(3<<20))
		} else {
			completeMany(t, s, id, int(id), int(id)*97)
		}
		after := pages()
		changed := 0
		zero := make([]byte, 4096)
		for i, p := range after {
			was := zero // a page the file grew by, unwritten
			if i < len(before) {
				was = before[i]
			}
			if !bytes.Equal(p, was) {
				changed++
			}
		}
		if w2, _ := s.Wear(); w2-w != int64(changed)*4096 {
			t.Fatalf("checkpoint %d: the store counted %d bytes written, the commit changed %d pages", id, w2-w, changed)
		}
	}
	kernel, _ := procfs.WriteBytes(procfs.Self)
	written, syncs := s.Wear()
	if kernel-kernel0 < written-written0 {
		t.Fatalf("the kernel counted %d bytes written, the store %d", kernel-kernel0, written-written0)
	}
	if n := syncs - syncs0; n < 2*30 || n > 2*30+10 {
		t.Fatalf("%d syncs for 30 checkpoints", n)
	}
}

// TestConcurrentWritesOnAFailingDisk stores snapshots from several
// goroutines at once while checkpoints complete, on a disk that fails one
// write or sync in twenty. A failed write rolls back everything not yet
// synced, whoever appended it: a checkpoint whose Complete returned nil
// must still be there, with every snapshot it names, after reopening.
func TestConcurrentWritesOnAFailingDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c.db")
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
