package localrecovery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/internal/testing/sample"
)

// sampleSegment is the name of the one segment of the sample of the
// segmented store (testdata/store, written by the cairn before this
// store, a3f8062).
const sampleSegment = "00000000000000000001.seg"

// writeSampleStore writes a store at path, with its checkpoint id mark
// beside it: checkpoint 5, whole, checkpoint 6, an increment on 5's
// snapshot with a source's offset, and the id 8 taken. It returns the
// manifests, newest first. (The sample of the segmented store holds the
// same.)
func writeSampleStore(t *testing.T, path string) []*checkpoint.Manifest {
	t.Helper()
	s, err := Open(path, Options{HighWater: path + "-id"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(id uint64, task checkpoint.TaskID, data string) checkpoint.StateHandle {
		h, err := s.PutState(id, task, slices.Values([][]byte{[]byte(data[:3]), []byte(data[3:])}))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	src := checkpoint.TaskID{Operator: "mqtt", Subtask: 0}
	whole := put(5, task0, "whole snapshot of checkpoint 5")
	m5 := &checkpoint.Manifest{ID: 5, Mode: checkpoint.ExactlyOnce, Triggered: 5 * time.Second, Duration: 12 * time.Millisecond,
		Subtasks: []checkpoint.Ack{
			{Task: src, ID: 5, State: put(5, src, "source 5"), Source: true, Offset: 1 << 33, Watermark: -1},
			{Task: task0, ID: 5, State: whole, MaxParallelism: 128, Watermark: 1_700_000_000_000,
				Stats: checkpoint.SubtaskStats{Alignment: time.Millisecond, Sync: 2, Async: 3, StateSize: whole.Size}},
		}}
	inc := put(6, task0, "increment of checkpoint 6")
	m6 := &checkpoint.Manifest{ID: 6, Mode: checkpoint.Unaligned, Triggered: 6 * time.Second, Duration: 9 * time.Millisecond,
		Subtasks: []checkpoint.Ack{
			{Task: src, ID: 6, State: put(6, src, "source 6"), Source: true, Offset: 1<<33 + 99, Watermark: -1},
			{Task: task0, ID: 6, State: inc, Base: []checkpoint.StateHandle{whole}, MaxParallelism: 128, Watermark: 1_700_000_060_000,
				Stats: checkpoint.SubtaskStats{Unaligned: true, StateSize: inc.Size}},
		}}
	for _, m := range []*checkpoint.Manifest{m5, m6} {
		if err := s.Complete(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveLastID(8); err != nil {
		t.Fatal(err)
	}
	return []*checkpoint.Manifest{m6, m5}
}

// sampleManifests are the checkpoints writeSampleStore writes, newest
// first.
func sampleManifests(t *testing.T) []*checkpoint.Manifest {
	t.Helper()
	return writeSampleStore(t, filepath.Join(t.TempDir(), "checkpoints.db"))
}

// checkSample checks that s holds what writeSampleStore wrote: want, the
// snapshots, and the id 8 taken.
func checkSample(t *testing.T, s *Store, want []*checkpoint.Manifest) {
	t.Helper()
	got := mustCompleted(t, s)
	gotJS, _ := json.Marshal(got)
	wantJS, _ := json.Marshal(want)
	if !bytes.Equal(gotJS, wantJS) {
		t.Fatalf("the store holds\n%s\nwant\n%s", gotJS, wantJS)
	}
	states := map[string]string{"5/count/0": "whole snapshot of checkpoint 5", "5/mqtt/0": "source 5",
		"6/count/0": "increment of checkpoint 6", "6/mqtt/0": "source 6"}
	for _, m := range got {
		for _, a := range m.Subtasks {
			for _, h := range a.Handles() {
				data, err := s.ReadState(h)
				if err != nil || string(data) != states[h.Key] {
					t.Fatalf("state %s holds %q (%v), want %q", h.Key, data, err, states[h.Key])
				}
			}
		}
	}
	if id, _ := s.LastID(); id != 8 {
		t.Fatalf("last id %d, want 8", id)
	}
}

// putSegments lays the stored sample of the segmented store into a data
// directory: <dir>/checkpoints/<segment> and the id mark beside it. It
// returns the store's path, <dir>/checkpoints.db.
func putSegments(t *testing.T, dir string) string {
	t.Helper()
	seg := sample.Bytes(t, filepath.Join("testdata", "store", sampleSegment), nil)
	mark := sample.Bytes(t, filepath.Join("testdata", "store", "checkpoint-id"), nil)
	if err := os.MkdirAll(filepath.Join(dir, "checkpoints"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "checkpoints", sampleSegment), seg, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "checkpoint-id"), mark, 0o600); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "checkpoints.db")
}

// TestSegmentsAreMoved: a data directory as the cairn before this store
// left it (the stored sample of its segmented store, and its id mark) is
// moved into checkpoints.db on the first open: every checkpoint with its
// chain and state, and the ids taken; the segments' directory goes.
func TestSegmentsAreMoved(t *testing.T) {
	want := sampleManifests(t)
	dir := t.TempDir()
	path := putSegments(t, dir)
	if hw, err := readHighWater(filepath.Join(dir, "checkpoint-id")); err != nil || hw != 8 {
		t.Fatalf("the stored mark reads as %d, %v; want 8", hw, err)
	}
	var logs logBuffer
	s := mustOpen(t, path, Options{HighWater: filepath.Join(dir, "checkpoint-id"), Logger: logs.logger()})
	checkSample(t, s, want)
	if !strings.Contains(logs.String(), `msg="checkpoint store moved into a bbolt file"`) || !strings.Contains(logs.String(), "checkpoints=2 lost=0") {
		t.Fatalf("the move is not logged:\n%s", logs.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpoints")); !os.IsNotExist(err) {
		t.Fatalf("the segments are still there: %v", err)
	}
	s.Close()
	if err := CheckFile(path); err != nil {
		t.Fatal(err)
	}
	checkSample(t, mustOpen(t, path, Options{}), want)
}

// TestSegmentsMoveAcrossACrash plays a crash at each point of the move:
// its file half written (no mark: done again), whole but not renamed into
// place (renamed), renamed with the segments still there (they go); and
// segments written after the move, which are newer than the file: the
// open fails, naming both, and removes nothing.
func TestSegmentsMoveAcrossACrash(t *testing.T) {
	want := sampleManifests(t)
	moved := func(t *testing.T) (dir, path string, file []byte) {
		dir = t.TempDir()
		path = putSegments(t, dir)
		mark, err := markOfDir(filepath.Join(dir, "checkpoints"))
		if err != nil {
			t.Fatal(err)
		}
		from, err := openSegments(filepath.Join(dir, "checkpoints"), discard)
		if err != nil {
			t.Fatal(err)
		}
		defer from.close()
		if _, _, err := rebuild(path, from, mark, Options{Retain: 3, Logger: discard}); err != nil {
			t.Fatal(err)
		}
		file, err = os.ReadFile(moving(path))
		if err != nil {
			t.Fatal(err)
		}
		return dir, path, file
	}
	t.Run("half written", func(t *testing.T) {
		dir, path, _ := moved(t)
		// A file of the move without its mark: the first transactions.
		if err := os.Remove(moving(path)); err != nil {
			t.Fatal(err)
		}
		s := mustOpen(t, moving(path), Options{})
		complete(t, s, 5, 10)
		s.Close()
		checkSample(t, mustOpen(t, path, Options{HighWater: filepath.Join(dir, "checkpoint-id")}), want)
	})
	t.Run("not renamed", func(t *testing.T) {
		dir, path, _ := moved(t)
		checkSample(t, mustOpen(t, path, Options{}), want)
		if _, err := os.Stat(filepath.Join(dir, "checkpoints")); !os.IsNotExist(err) {
			t.Fatalf("the segments are still there: %v", err)
		}
	})
	t.Run("segments not removed", func(t *testing.T) {
		dir, path, _ := moved(t)
		if err := os.Rename(moving(path), path); err != nil {
			t.Fatal(err)
		}
		checkSample(t, mustOpen(t, path, Options{}), want)
		if _, err := os.Stat(filepath.Join(dir, "checkpoints")); !os.IsNotExist(err) {
			t.Fatalf("the segments are still there: %v", err)
		}
	})
	t.Run("segments written after", func(t *testing.T) {
		dir, path, file := moved(t)
		if err := os.Rename(moving(path), path); err != nil {
			t.Fatal(err)
		}
		seg := filepath.Join(dir, "checkpoints", sampleSegment)
		f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("newer"))
		f.Close()
		_, err = Open(path, Options{})
		if err == nil || !strings.Contains(err.Error(), "was written to after it was moved") {
			t.Fatalf("Open over segments newer than the file = %v", err)
		}
		if now, _ := os.ReadFile(path); !bytes.Equal(now, file) {
			t.Fatal("the file changed")
		}
		if _, err := os.Stat(seg); err != nil {
			t.Fatalf("the segments went: %v", err)
		}
	})
}

// TestSegmentsMoveOnAFullDisk: a move whose writes fail (a full disk)
// fails the store's opening, with the reason, and leaves the segments as
// they were and no file; once there is room, the move is made whole.
func TestSegmentsMoveOnAFullDisk(t *testing.T) {
	want := sampleManifests(t)
	dir := t.TempDir()
	path := putSegments(t, dir)
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
	for _, p := range []string{path, moving(path)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("a failed move left %s: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpoints", sampleSegment)); err != nil {
		t.Fatalf("a failed move took the segments: %v", err)
	}
	checkSample(t, mustOpen(t, path, Options{HighWater: filepath.Join(dir, "checkpoint-id")}), want)
}

// TestStoredStore: a store of this format as a cairn wrote it
// (testdata/checkpoints-v3.db, and its checkpoint id mark) opens with its
// checkpoints, their state and the ids taken; the same checkpoints are
// written as the same keys and values today (bbolt's pages around them
// are bbolt's).
func TestStoredStore(t *testing.T) {
	now := filepath.Join(t.TempDir(), "checkpoints.db")
	want := writeSampleStore(t, now)
	current := func(name string) func() []byte {
		return func() []byte {
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
	file := sample.Bytes(t, filepath.Join("testdata", "checkpoints-v3.db"), current(now))
	mark := sample.Bytes(t, filepath.Join("testdata", "checkpoints-v3.db-id"), current(now+"-id"))
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+"-id", mark, 0o600); err != nil {
		t.Fatal(err)
	}
	if hw, err := readHighWater(path + "-id"); err != nil || hw != 8 {
		t.Fatalf("the stored mark reads as %d, %v; want 8", hw, err)
	}
	ro := mustOpen(t, path, Options{ReadOnly: true})
	checkSample(t, ro, want)
	ro.Close()
	// Written before the magic, the file is cairn's by its shape, and
	// given the magic when opened to write (ownerless).
	s := mustOpen(t, path, Options{})
	checkSample(t, s, want)
	s.Close()
	if got, wantKV := keyValues(t, path), keyValues(t, now); !slices.Equal(got, wantKV) {
		t.Errorf("the same checkpoints are written as other keys and values today:\n%q\nstored\n%q", wantKV, got)
	}
	if data := current(now + "-id")(); !bytes.Equal(data, mark) {
		t.Errorf("the id mark is written as other bytes today:\n%x\nstored\n%x", data, mark)
	}
}

// keyValues lists every key and value of the file at path, bucket by
// bucket.
func keyValues(t *testing.T, path string) []string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out []string
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				out = append(out, fmt.Sprintf("%x/%x=%x", name, k, v))
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
