package localrecovery

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/cairn-edge/cairn/checkpoint"
)

// writeFormat1 writes a bbolt store as cairn wrote it before its format 2:
// every chunk of every snapshot in one bucket, "blobs", under the
// snapshot's key prefix. It holds checkpoints 3 and 4, of sizes n3 and n4.
func writeFormat1(t *testing.T, path string, n3, n4 int) []*checkpoint.Manifest {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ms []*checkpoint.Manifest
	err = db.Update(func(tx *bolt.Tx) error {
		meta, _ := tx.CreateBucket(bucketMeta)
		blobs, _ := tx.CreateBucket(legacyBlobs)
		records, _ := tx.CreateBucket(bucketCheckpoints)
		if err := meta.Put([]byte("format"), []byte{1}); err != nil {
			return err
		}
		if err := meta.Put(keyLastID, binary.BigEndian.AppendUint64(nil, 4)); err != nil {
			return err
		}
		for _, id := range []uint64{3, 4} {
			n := map[uint64]int{3: n3, 4: n4}[id]
			data := payload(id, n)
			prefix := append(append(binary.BigEndian.AppendUint64(nil, id), task0.String()...), 0)
			for i := 0; i*ChunkSize < len(data); i++ {
				key := binary.BigEndian.AppendUint32(bytes.Clone(prefix), uint32(i))
				if err := blobs.Put(key, data[i*ChunkSize:min(len(data), (i+1)*ChunkSize)]); err != nil {
					return err
				}
			}
			h := checkpoint.StateHandle{Key: handleKey(id, task0.String()), Size: int64(n), CRC32C: checkpoint.Checksum(data)}
			m := &checkpoint.Manifest{ID: id, Subtasks: []checkpoint.Ack{{Task: task0, ID: id, State: h}}}
			js, err := json.Marshal(m)
			if err != nil {
				return err
			}
			if err := records.Put(binary.BigEndian.AppendUint64(nil, id), binary.BigEndian.AppendUint32(js, checkpoint.Checksum(js))); err != nil {
				return err
			}
			ms = append(ms, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestFormat1IsMoved opens a store of which only a format 1 bbolt file is
// there: its checkpoints move into the log, read back whole, keep their
// ids, and the file is gone.
func TestFormat1IsMoved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checkpoints")
	ms := writeFormat1(t, dir+".db", 2*ChunkSize+10, 1000)
	s := mustOpen(t, dir, Options{})
	if got := ids(t, s); got != "4 3" {
		t.Fatalf("completed %q, want 4 3", got)
	}
	for _, m := range ms {
		data, err := s.ReadState(m.Subtasks[0].State)
		if err != nil || !bytes.Equal(data, payload(m.ID, int(m.Subtasks[0].State.Size))) {
			t.Fatalf("checkpoint %d: %v", m.ID, err)
		}
	}
	if id, _ := s.LastID(); id != 4 {
		t.Fatalf("last id %d, want 4", id)
	}
	if _, err := os.Stat(dir + ".db"); !os.IsNotExist(err) {
		t.Fatalf("the bbolt file is still there: %v", err)
	}
}

// TestBoltStoreIsMoved opens a store of which only the bbolt file that
// 03e3c0f wrote is there (testdata/checkpoints-bbolt.db): checkpoints 6,
// an increment on 5's snapshot, and 7, retained, and an id counter at 9.
// They move with their chains, and the counter with them.
func TestBoltStoreIsMoved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checkpoints")
	sample, err := os.ReadFile(filepath.Join("testdata", "checkpoints-bbolt.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+".db", sample, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	s := mustOpen(t, dir, Options{Logger: logs.logger()})
	if got := ids(t, s); got != "7 6" {
		t.Fatalf("completed %q, want 7 6", got)
	}
	for _, m := range mustCompleted(t, s) {
		for _, a := range m.Subtasks {
			var state []string
			for _, h := range a.Handles() {
				data, err := s.ReadState(h)
				if err != nil {
					t.Fatalf("checkpoint %d, %s: %v", m.ID, a.Task, err)
				}
				state = append(state, string(data))
			}
			if want := a.Task.String() + " state of checkpoint " + string(rune('0'+m.ID)); state[len(state)-1] != want {
				t.Fatalf("checkpoint %d, %s holds %q, want %q", m.ID, a.Task, state, want)
			}
		}
	}
	if a := mustCompleted(t, s)[1].Subtask(checkpoint.TaskID{Operator: "count"}); len(a.Base) != 1 || a.Base[0].Key != "5/count/0" {
		t.Fatalf("checkpoint 6's chain: %+v", a)
	}
	if id, _ := s.LastID(); id != 9 {
		t.Fatalf("last id %d, want 9", id)
	}
	if !strings.Contains(logs.String(), `msg="checkpoint store moved to a segmented log"`) || !strings.Contains(logs.String(), "checkpoints=2 lost=0") {
		t.Fatalf("the move is not logged:\n%s", logs.String())
	}
	s.Close()
	if _, err := os.Stat(dir + ".db"); !os.IsNotExist(err) {
		t.Fatalf("the bbolt file is still there: %v", err)
	}
	if got := ids(t, mustOpen(t, dir, Options{})); got != "7 6" {
		t.Fatalf("completed %q after reopening", got)
	}
}

// TestBoltStoreMoveOnAFullDisk: a move whose writes fail (a full disk)
// fails the store's opening, with the reason, and keeps the bbolt file;
// once there is room, the move is made whole.
func TestBoltStoreMoveOnAFullDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checkpoints")
	sample, err := os.ReadFile(filepath.Join("testdata", "checkpoints-bbolt.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+".db", sample, 0o600); err != nil {
		t.Fatal(err)
	}
	writes := 0
	_, err = Open(dir, Options{WriteFault: func() error {
		if writes++; writes > 3 {
			return syscall.ENOSPC
		}
		return nil
	}})
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "moving the checkpoint store") {
		t.Fatalf("opening with a full disk = %v, want the move to fail with ENOSPC", err)
	}
	if _, err := os.Stat(dir + ".db"); err != nil {
		t.Fatalf("the bbolt file is gone after a failed move: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a failed move left the store in place: %v", err)
	}
	s := mustOpen(t, dir, Options{})
	if got := ids(t, s); got != "7 6" {
		t.Fatalf("completed %q after the move, want 7 6", got)
	}
	if id, _ := s.LastID(); id != 9 {
		t.Fatalf("last id %d, want 9", id)
	}
}

// TestDamagedBoltStoreIsSalvaged: of a bbolt file cut short or not bbolt
// at all, what verifies is moved, the file is then renamed aside, and the
// store works.
func TestDamagedBoltStoreIsSalvaged(t *testing.T) {
	for _, damage := range []string{"truncated", "garbage"} {
		t.Run(damage, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "checkpoints")
			data := bytes.Repeat([]byte("not a database "), 1000)
			if damage == "truncated" {
				writeFormat1(t, dir+".db", 3*ChunkSize, 3*ChunkSize)
				full, _ := os.ReadFile(dir + ".db")
				data = full[:len(full)*2/3]
			}
			if err := os.WriteFile(dir+".db", data, 0o600); err != nil {
				t.Fatal(err)
			}
			var logs logBuffer
			s := mustOpen(t, dir, Options{Logger: logs.logger()})
			for _, m := range mustCompleted(t, s) {
				if _, err := s.ReadState(m.Subtasks[0].State); err != nil {
					t.Fatalf("moved checkpoint %d does not verify: %v", m.ID, err)
				}
			}
			if !strings.Contains(logs.String(), "checkpoint store is damaged; salvaging what verifies") {
				t.Fatalf("the damage is not logged:\n%s", logs.String())
			}
			if _, err := os.Stat(dir + ".db.damaged-1"); err != nil {
				t.Fatalf("the damaged file was not kept aside: %v", err)
			}
			complete(t, s, 10, 10) // the store works
		})
	}
}

// TestPutStateInParts stores a snapshot given in parts, larger than a
// chunk, once failing half way as a full disk would: the retry stores it
// whole, and it reads back as the parts joined.
func TestPutStateInParts(t *testing.T) {
	failAt := 3 // the second chunk's write fails, once (the first write is the segment's header)
	calls := 0
	s := mustOpen(t, filepath.Join(t.TempDir(), "c"), Options{WriteFault: func() error {
		if calls++; calls == failAt {
			return syscall.ENOSPC
		}
		return nil
	}})
	parts := [][]byte{[]byte("head"), payload(1, ChunkSize+ChunkSize/2), nil, payload(2, 3*ChunkSize), []byte("tail")}
	whole := bytes.Join(parts, nil)
	if _, err := s.PutState(8, task0, slices.Values(parts)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("PutState with a failing second append = %v, want ENOSPC", err)
	}
	h, err := s.PutState(8, task0, slices.Values(parts))
	if err != nil {
		t.Fatal(err)
	}
	if h.Size != int64(len(whole)) || h.CRC32C != checkpoint.Checksum(whole) {
		t.Fatalf("handle %+v does not describe the joined parts", h)
	}
	got, err := s.ReadState(h)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, whole) {
		t.Fatal("read back different bytes")
	}
	if n, want := blobCount(t, s)[8], (len(whole)+ChunkSize-1)/ChunkSize; n != want {
		t.Fatalf("%d chunks, want %d", n, want)
	}
}

func TestChunker(t *testing.T) {
	small := bytes.Repeat([]byte("s"), ChunkSize/3)
	big := payload(3, 2*ChunkSize+5)
	parts := [][]byte{small, nil, small, big, small, {}}
	got := slices.Collect(chunks(slices.Values(parts)))
	if !bytes.Equal(bytes.Join(got, nil), bytes.Join(parts, nil)) {
		t.Fatal("chunks do not join back into the parts")
	}
	for i, c := range got[:len(got)-1] {
		if len(c) != ChunkSize {
			t.Fatalf("chunk %d of %d is %d bytes, want %d", i, len(got), len(c), ChunkSize)
		}
	}
	if got := slices.Collect(chunks(slices.Values([][]byte{nil, {}}))); len(got) != 0 {
		t.Fatalf("empty parts gave %d chunks", len(got))
	}
}

// TestPutStateStreams: PutState appends a snapshot while its parts are
// still being made, a chunk at a time, so that storing a snapshot never
// takes memory in proportion to its size.
func TestPutStateStreams(t *testing.T) {
	appends := 0 // chunks appended
	s := mustOpen(t, filepath.Join(t.TempDir(), "c"), Options{Failpoint: func(name string) {
		if name == "blob-chunk" {
			appends++
		}
	}})
	const parts, partSize = 64, 256 << 10 // 16 MiB
	var whole []byte
	yielded := 0 // bytes
	data := func(yield func([]byte) bool) {
		for i := range parts {
			if ahead := yielded - appends*ChunkSize; ahead > 2*ChunkSize {
				t.Errorf("%d bytes yielded, %d chunks appended: %d bytes held", yielded, appends, ahead)
			}
			p := payload(uint64(i), partSize)
			whole = append(whole, p...)
			yielded += len(p)
			if !yield(p) {
				return
			}
		}
	}
	appends = 0
	h, err := s.PutState(3, task0, data)
	if err != nil {
		t.Fatal(err)
	}
	if want := parts * partSize / ChunkSize; appends < want {
		t.Fatalf("%d appends for %d bytes, want at least %d", appends, len(whole), want)
	}
	got, err := s.ReadState(h)
	if err != nil || !bytes.Equal(got, whole) {
		t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, len(whole))
	}
}

// TestPartialSnapshotGoesAtOpen: a snapshot whose first chunk was appended
// and whose second failed (a crash or a full disk between them) is named
// by no completion record; it is forgotten, also after reopening the
// store (invariants I4, I9), and the completed checkpoints stay readable.
func TestPartialSnapshotGoesAtOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	failing, calls := false, 0 // once failing, the second append fails
	s, err := Open(dir, Options{WriteFault: func() error {
		if calls++; failing && calls == 2 {
			return syscall.ENOSPC
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	m := complete(t, s, 1, 100)
	failing, calls = true, 0
	if _, err := s.PutState(2, task0, slices.Values([][]byte{payload(2, 2*ChunkSize)})); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("PutState with a failing second append = %v, want ENOSPC", err)
	}
	if n := blobCount(t, s)[2]; n != 0 {
		t.Fatalf("%d chunks of the partial snapshot are still known", n)
	}
	s.Close()
	s = mustOpen(t, dir, Options{})
	if n := blobCount(t, s)[2]; n != 0 {
		t.Fatalf("%d chunks of the partial snapshot survived reopening", n)
	}
	if got := ids(t, s); got != "1" {
		t.Fatalf("completed %q, want 1", got)
	}
	if _, err := s.ReadState(m.Subtasks[0].State); err != nil {
		t.Fatal(err)
	}
}
