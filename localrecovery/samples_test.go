package localrecovery

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/internal/sample"
)

// sampleSegment is the name of the one segment of the sample store.
const sampleSegment = "00000000000000000001.seg"

// writeSampleStore writes a store in dir, with its checkpoint id mark
// beside it: checkpoint 5, whole, checkpoint 6, an increment on 5's
// snapshot with a source's offset, and the id 8 taken. It returns the
// manifests, newest first.
func writeSampleStore(t *testing.T, dir string) []*checkpoint.Manifest {
	t.Helper()
	s, err := Open(dir, Options{HighWater: dir + "-id"})
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

// TestStoredStore: a store as a cairn wrote it (testdata/store: its one
// segment of chunk, completion and id records, and its checkpoint id mark)
// opens with its checkpoints, their state and the ids taken; the same
// checkpoints are written as the same bytes today.
func TestStoredStore(t *testing.T) {
	now := filepath.Join(t.TempDir(), "checkpoints")
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
	seg := sample.Bytes(t, filepath.Join("testdata", "store", sampleSegment), current(filepath.Join(now, sampleSegment)))
	mark := sample.Bytes(t, filepath.Join("testdata", "store", "checkpoint-id"), current(now+"-id"))

	dir := filepath.Join(t.TempDir(), "checkpoints")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, sampleSegment), seg, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"-id", mark, 0o600); err != nil {
		t.Fatal(err)
	}
	if hw, err := readHighWater(dir + "-id"); err != nil || hw != 8 {
		t.Fatalf("the stored mark reads as %d, %v; want 8", hw, err)
	}
	s := mustOpen(t, dir, Options{HighWater: dir + "-id"})
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
	for name, stored := range map[string][]byte{sampleSegment: seg, "checkpoint-id": mark} {
		path := filepath.Join(now, name)
		if name == "checkpoint-id" {
			path = now + "-id"
		}
		if data := current(path)(); !bytes.Equal(data, stored) {
			t.Errorf("%s: the same checkpoints are written as other bytes today:\n%x\nstored\n%x", name, data, stored)
		}
	}
}
