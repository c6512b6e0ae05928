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

// formatOfFile is the format of the closed store's file at path.
func formatOfFile(t *testing.T, path string) byte {
	t.Helper()
	f := openBoltFile(path, Options{Logger: discard})
	defer f.close()
	return f.format
}

// TestFormat1IsMoved opens a store whose file is of format 1: its
// checkpoints move into a file of format 3 in its place, read back whole
// and keep their ids.
func TestFormat1IsMoved(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	ms := writeFormat1(t, path, 2*ChunkSize+10, 1000)
	s := mustOpen(t, path, Options{})
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
	s.Close()
	if f := formatOfFile(t, path); f != formatVersion {
		t.Fatalf("the file is of format %d after opening", f)
	}
}

// TestEarliestStoreKeepsWorking opens a store of which only the bbolt
// file that 03e3c0f wrote is there (testdata/checkpoints-bbolt.db, format
// 2): checkpoints 6, an increment on 5's snapshot, and 7, retained, and
// an id counter at 9. They move with their chains into format 3, in
// place, and the counter with them.
func TestEarliestStoreKeepsWorking(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	copyFile(t, filepath.Join("testdata", "checkpoints-bbolt.db"), path)
	var logs logBuffer
	s := mustOpen(t, path, Options{Logger: logs.logger()})
	checkEarliest(t, s)
	if !strings.Contains(logs.String(), `msg="checkpoint store moved into a new file"`) || !strings.Contains(logs.String(), `from="format 2" checkpoints=2 lost=0`) {
		t.Fatalf("the move is not logged:\n%s", logs.String())
	}
	complete(t, s, 10, 100) // ids go on above the counter
	s.Close()
	s = mustOpen(t, path, Options{})
	if got := ids(t, s); got != "10 7 6" {
		t.Fatalf("completed %q after reopening", got)
	}
}

// checkEarliest checks that s holds what testdata/checkpoints-bbolt.db
// does.
func checkEarliest(t *testing.T, s *Store) {
	t.Helper()
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
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestEarliestStoreMoveOnAFullDisk: a move whose writes fail (a full
// disk) fails the store's opening, with the reason, and keeps the file as
// it was; once there is room, the move is made whole.
func TestEarliestStoreMoveOnAFullDisk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	copyFile(t, filepath.Join("testdata", "checkpoints-bbolt.db"), path)
	before, _ := os.ReadFile(path)
	writes := 0
	_, err := Open(path, Options{WriteFault: func() error {
		if writes++; writes > 2 {
			return syscall.ENOSPC
		}
		return nil
	}})
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "moving the checkpoint store") {
		t.Fatalf("opening with a full disk = %v, want the move to fail with ENOSPC", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("a failed move changed the file")
	}
	if _, err := os.Stat(moving(path)); !os.IsNotExist(err) {
		t.Fatalf("a failed move left its file: %v", err)
	}
	checkEarliest(t, mustOpen(t, path, Options{}))
}

// TestDamagedEarlierStoreIsSalvaged: of a bbolt file of format 1 cut
// short or not bbolt at all, what verifies is moved, the file is then
// renamed aside, and the store works.
func TestDamagedEarlierStoreIsSalvaged(t *testing.T) {
	for _, damage := range []string{"truncated", "garbage"} {
		t.Run(damage, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "checkpoints.db")
			data := bytes.Repeat([]byte("not a database "), 1000)
			if damage == "truncated" {
				writeFormat1(t, path, 3*ChunkSize, 3*ChunkSize)
				full, _ := os.ReadFile(path)
				data = full[:len(full)*2/3]
			}
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			var logs logBuffer
			s := mustOpen(t, path, Options{Logger: logs.logger()})
			for _, m := range mustCompleted(t, s) {
				if _, err := s.ReadState(m.Subtasks[0].State); err != nil {
					t.Fatalf("moved checkpoint %d does not verify: %v", m.ID, err)
				}
			}
			if !strings.Contains(logs.String(), "checkpoint store is damaged; it is set aside") {
				t.Fatalf("the damage is not logged:\n%s", logs.String())
			}
			if _, err := os.Stat(path + ".damaged-1"); err != nil {
				t.Fatalf("the damaged file was not kept aside: %v", err)
			}
			complete(t, s, 10, 10) // the store works
		})
	}
}

// TestPutStateInParts stores a snapshot given in parts, larger than a
// chunk: it reads back as the parts joined, before its checkpoint
// completes (from memory) and after (from the file), in chunks of
// ChunkSize.
func TestPutStateInParts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	s := mustOpen(t, path, Options{})
	parts := [][]byte{[]byte("head"), payload(1, ChunkSize+ChunkSize/2), nil, payload(2, 3*ChunkSize), []byte("tail")}
	whole := bytes.Join(parts, nil)
	h, err := s.PutState(8, task0, slices.Values(parts))
	if err != nil {
		t.Fatal(err)
	}
	if h.Size != int64(len(whole)) || h.CRC32C != checkpoint.Checksum(whole) {
		t.Fatalf("handle %+v does not describe the joined parts", h)
	}
	if got, err := s.ReadState(h); err != nil || !bytes.Equal(got, whole) {
		t.Fatalf("read back before completion: %v", err)
	}
	if err := s.Complete(&checkpoint.Manifest{ID: 8, Subtasks: []checkpoint.Ack{{Task: task0, ID: 8, State: h}}}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ReadState(h); err != nil || !bytes.Equal(got, whole) {
		t.Fatalf("read back after completion: %v", err)
	}
	s.Close()
	if n, want := chunkCount(t, path, 8), (len(whole)+ChunkSize-1)/ChunkSize; n != want {
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

// TestValues: a value holds what was stored, deflated where small and
// that saves a tenth, raw otherwise; a changed byte anywhere in it fails
// its checksum; its header says its length without inflating it.
func TestValues(t *testing.T) {
	for _, c := range []struct {
		name    string
		data    []byte
		deflate bool
	}{
		{"empty", nil, false},
		{"tiny", []byte("x"), false},
		{"small, repetitive", bytes.Repeat([]byte("reading "), 400), true},
		{"small, random", payloadRandom(3000), false},
		{"large", payload(1, deflateBelow+1), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := encodeValue(c.data)
			if (v[0] == valueDeflate) != c.deflate {
				t.Fatalf("encoding %d, want deflated %v", v[0], c.deflate)
			}
			if n, ok := valueSize(v); !ok || n != int64(len(c.data)) {
				t.Fatalf("valueSize %d %v, want %d", n, ok, len(c.data))
			}
			got, err := decodeValue(v, ChunkSize)
			if err != nil || !bytes.Equal(got, c.data) {
				t.Fatalf("decodeValue: %v", err)
			}
			for i := range v {
				bad := slices.Clone(v)
				bad[i] ^= 0x20
				if _, err := decodeValue(bad, ChunkSize); err == nil {
					t.Fatalf("a value with byte %d of %d changed decodes", i, len(v))
				}
			}
			if len(c.data) > 0 {
				if _, err := decodeValue(v, len(c.data)-1); err == nil {
					t.Fatal("a value larger than the limit decodes")
				}
			}
		})
	}
}

// payloadRandom is n bytes that do not deflate.
func payloadRandom(n int) []byte {
	data := make([]byte, n)
	x := uint64(88172645463325252)
	for i := range data {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		data[i] = byte(x)
	}
	return data
}

// TestIncompleteCheckpointWritesNothing: snapshots taken in for a
// checkpoint that never completes (the store closed, as a crash would)
// leave nothing in the file (I4); the completed checkpoints stay readable.
func TestIncompleteCheckpointWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	s := mustOpen(t, path, Options{})
	m := complete(t, s, 1, 100)
	written, syncs := s.Wear()
	for i := range 3 {
		if _, err := s.PutState(2, checkpoint.TaskID{Operator: "op", Subtask: i}, slices.Values([][]byte{payload(2, 2*ChunkSize)})); err != nil {
			t.Fatal(err)
		}
	}
	if w, n := s.Wear(); w != written || n != syncs {
		t.Fatalf("taking in snapshots wrote %d bytes and synced %d times", w-written, n-syncs)
	}
	s.Close()
	s = mustOpen(t, path, Options{})
	if got := buckets(t, s); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("buckets %v, want only 1's", got)
	}
	if _, err := s.ReadState(m.Subtasks[0].State); err != nil {
		t.Fatal(err)
	}
}
