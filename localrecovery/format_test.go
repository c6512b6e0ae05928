package localrecovery

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/cairn-edge/cairn/checkpoint"
)

// writeFormat1 writes a store as cairn wrote it before format 2: every
// chunk of every snapshot in one bucket, "blobs", under the snapshot's key
// prefix. It holds checkpoints 3 and 4, of sizes n3 and n4.
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
		if err := meta.Put(keyFormat, []byte{1}); err != nil {
			return err
		}
		if err := meta.Put(keyLastID, binary.BigEndian.AppendUint64(nil, 4)); err != nil {
			return err
		}
		for id, n := range map[uint64]int{3: n3, 4: n4} {
			data := payload(id, n)
			for i := 0; i*ChunkSize < len(data); i++ {
				key := binary.BigEndian.AppendUint32(blobPrefix(id, task0.String()), uint32(i))
				if err := blobs.Put(key, data[i*ChunkSize:min(len(data), (i+1)*ChunkSize)]); err != nil {
					return err
				}
			}
			h := checkpoint.StateHandle{Key: handleKey(id, task0.String()), Size: int64(n), CRC32C: checkpoint.Checksum(data)}
			m := &checkpoint.Manifest{ID: id, Subtasks: []checkpoint.Ack{{Task: task0, ID: id, State: h}}}
			record, err := encodeRecord(m)
			if err != nil {
				return err
			}
			if err := records.Put(binary.BigEndian.AppendUint64(nil, id), record); err != nil {
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

// TestFormat1IsMigrated opens a format 1 store: its snapshots move into
// buckets of their own, read back whole, and the old bucket is gone.
func TestFormat1IsMigrated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	ms := writeFormat1(t, path, 2*ChunkSize+100, 5000)
	s := open(t, path, Options{})
	if got := ids(t, s); got != "4 3" {
		t.Fatalf("completed %q after migration, want 4 3", got)
	}
	for _, m := range ms {
		data, err := s.ReadState(m.Subtasks[0].State)
		if err != nil {
			t.Fatalf("checkpoint %d after migration: %v", m.ID, err)
		}
		if !bytes.Equal(data, payload(m.ID, int(m.Subtasks[0].State.Size))) {
			t.Fatalf("checkpoint %d read back different bytes", m.ID)
		}
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(legacyBlobs) != nil {
			t.Error("the format 1 bucket is still there")
		}
		if v := tx.Bucket(bucketMeta).Get(keyFormat); !bytes.Equal(v, []byte{formatVersion}) {
			t.Errorf("format %x, want %d", v, formatVersion)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := blobCount(t, s); got[3] != 3 || got[4] != 1 {
		t.Fatalf("chunks per checkpoint %v, want 3 of checkpoint 3 and 1 of 4", got)
	}
}

// TestFormat1ReadsWithoutMigration reads a format 1 file as salvage does,
// read-only: the snapshots are found in the old bucket.
func TestFormat1ReadsWithoutMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	ms := writeFormat1(t, path, ChunkSize+1, 10)
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	old := &Store{db: db, path: path}
	for _, m := range ms {
		if _, err := old.ReadState(m.Subtasks[0].State); err != nil {
			t.Fatalf("checkpoint %d of a format 1 file: %v", m.ID, err)
		}
	}
}

// TestPutStateInParts stores a snapshot given in parts, larger than a
// transaction, once failing half way as a full disk would: the retry
// replaces what the failed attempt left, and the snapshot reads back as
// the parts joined.
func TestPutStateInParts(t *testing.T) {
	failAt := 2 // the second transaction fails, once
	calls := 0
	s := open(t, filepath.Join(t.TempDir(), "c.db"), Options{WriteFault: func() error {
		if calls++; calls == failAt {
			return syscall.ENOSPC
		}
		return nil
	}})
	parts := [][]byte{[]byte("head"), payload(1, TxBytes+ChunkSize/2), nil, payload(2, 3*ChunkSize), []byte("tail")}
	whole := bytes.Join(parts, nil)
	if _, err := s.PutState(8, task0, slices.Values(parts)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("PutState with a failing second transaction = %v, want ENOSPC", err)
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
	// Chunks of ChunkSize across parts, the last shorter; the failed
	// attempt's are gone.
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

// TestPutStateStreams: PutState writes a snapshot while its parts are still
// being made, a transaction of at most TxBytes at a time, so that storing a
// snapshot never takes memory in proportion to its size.
func TestPutStateStreams(t *testing.T) {
	writes := 0
	s := open(t, filepath.Join(t.TempDir(), "c.db"), Options{WriteFault: func() error {
		writes++
		return nil
	}})
	const parts, partSize = 64, 256 << 10 // 16 MiB
	var whole []byte
	yielded := 0 // bytes
	data := func(yield func([]byte) bool) {
		for i := range parts {
			if ahead := yielded - writes*TxBytes; ahead > 2*TxBytes {
				t.Errorf("%d bytes yielded, %d transactions written: %d bytes held", yielded, writes, ahead)
			}
			p := payload(uint64(i), partSize)
			whole = append(whole, p...)
			yielded += len(p)
			if !yield(p) {
				return
			}
		}
	}
	writes = 0
	h, err := s.PutState(3, task0, data)
	if err != nil {
		t.Fatal(err)
	}
	if want := parts * partSize / TxBytes; writes < want {
		t.Fatalf("%d transactions for %d bytes, want at least %d", writes, len(whole), want)
	}
	got, err := s.ReadState(h)
	if err != nil || !bytes.Equal(got, whole) {
		t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, len(whole))
	}
}

// TestPartialSnapshotGoesAtOpen: a snapshot whose first transaction was
// written and whose second failed (a crash or a full disk between them) is
// referenced by no completion record; reopening the store deletes it
// (invariants I4, I9), and the completed checkpoints stay readable.
func TestPartialSnapshotGoesAtOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	failing, calls := false, 0 // once failing, the second write fails
	s, err := Open(path, Options{WriteFault: func() error {
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
	if _, err := s.PutState(2, task0, slices.Values([][]byte{payload(2, 2*TxBytes)})); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("PutState with a failing second transaction = %v, want ENOSPC", err)
	}
	if n := blobCount(t, s)[2]; n == 0 {
		t.Fatal("the first transaction left nothing: the test needs a partial snapshot")
	}
	s.Close()
	s = open(t, path, Options{})
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
