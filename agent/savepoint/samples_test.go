package savepoint

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/internal/testing/sample"
)

// sampleCheckpoint is a completed checkpoint in a store: an incremental
// snapshot on a whole one, a source's empty state and its offset.
func sampleCheckpoint(t *testing.T) (*checkpoint.Manifest, checkpoint.Store) {
	t.Helper()
	store := checkpoint.NewMemStore(0)
	task := checkpoint.TaskID{Operator: "count", Subtask: 1}
	put := func(id uint64, task checkpoint.TaskID, data string) checkpoint.StateHandle {
		h, err := store.PutState(id, task, slices.Values([][]byte{[]byte(data)}))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	base := put(3, task, "whole snapshot of checkpoint 3")
	m := &checkpoint.Manifest{ID: 4, Mode: checkpoint.ExactlyOnce, Triggered: 4 * time.Second, Duration: time.Millisecond,
		Subtasks: []checkpoint.Ack{
			{Task: task, ID: 4, State: put(4, task, "increment of checkpoint 4"), Base: []checkpoint.StateHandle{base}, MaxParallelism: 128, Watermark: 1_700_000_000_000},
			{Task: checkpoint.TaskID{Operator: "mqtt"}, ID: 4, State: put(4, checkpoint.TaskID{Operator: "mqtt"}, ""), Source: true, Offset: 1 << 40},
		}}
	return m, store
}

// TestStoredSavepoint: a savepoint as a cairn wrote it in version 1
// (testdata/savepoint-v1.cairn) reads with its manifest and snapshots, and
// the same checkpoint is written as the same bytes today.
func TestStoredSavepoint(t *testing.T) {
	m, store := sampleCheckpoint(t)
	now, err := WriteIn(t.TempDir(), "now.cairn", false, m, store)
	if err != nil {
		t.Fatal(err)
	}
	current, err := os.ReadFile(now)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "savepoint-v1.cairn")
	stored := sample.Bytes(t, path, func() []byte { return current })
	sp, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	gotJS, _ := json.Marshal(sp.Manifest)
	wantJS, _ := json.Marshal(m)
	if !bytes.Equal(gotJS, wantJS) {
		t.Fatalf("the manifest reads as\n%s\nwant\n%s", gotJS, wantJS)
	}
	for _, h := range handles(m) {
		got, err := sp.ReadState(h)
		want, _ := store.ReadState(h)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("state %s reads as %q (%v), want %q", h.Key, got, err, want)
		}
	}
	if !bytes.Equal(current, stored) {
		t.Errorf("the same checkpoint is written as other bytes today:\n%x\nstored\n%x", current, stored)
	}
}
