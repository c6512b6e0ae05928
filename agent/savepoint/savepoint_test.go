package savepoint

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cairn-edge/cairn/checkpoint"
)

func TestRoundTripAndDamage(t *testing.T) {
	store := checkpoint.NewMemStore(0)
	task := checkpoint.TaskID{Operator: "count", Subtask: 0}
	base, _ := store.PutState(1, task, slices.Values([][]byte{[]byte("whole snapshot")}))
	inc, _ := store.PutState(2, task, slices.Values([][]byte{[]byte("increment")}))
	m := &checkpoint.Manifest{ID: 2, Subtasks: []checkpoint.Ack{{Task: task, ID: 2, State: inc, Base: []checkpoint.StateHandle{base}}}}
	path := filepath.Join(t.TempDir(), "sp", "savepoint-2.cairn")
	if err := Write(path, m, store); err != nil {
		t.Fatal(err)
	}
	sp, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := sp.ReadState(base); err != nil || string(got) != "whole snapshot" {
		t.Fatalf("base: %q %v", got, err)
	}
	if got, err := sp.ReadState(inc); err != nil || string(got) != "increment" {
		t.Fatalf("increment: %q %v", got, err)
	}
	if ops := sp.Manifest.Operators(); len(ops) != 1 || ops[0] != "count" {
		t.Fatalf("operators %v", ops)
	}
	data, _ := os.ReadFile(path)
	for _, damage := range []func([]byte) []byte{
		func(b []byte) []byte { b[len(b)/2] ^= 1; return b },
		func(b []byte) []byte { return b[:len(b)-7] },
		func(b []byte) []byte { return append([]byte("XX"), b...) },
	} {
		bad := damage(append([]byte(nil), data...))
		os.WriteFile(path, bad, 0o600)
		if _, err := Read(path); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a damaged savepoint read with %v", err)
		}
	}
}

// TestPrune keeps the newest savepoints by id (10 is newer than 9) and
// leaves other files alone.
func TestPrune(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{FileName(9), FileName(10), FileName(2), FileName(11), "notes.txt", "savepoint-x.cairn", ".savepoint-123"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := Prune(dir, 2)
	if err != nil || len(removed) != 2 || filepath.Base(removed[0]) != FileName(2) || filepath.Base(removed[1]) != FileName(9) {
		t.Fatalf("Prune removed %v, %v; want savepoints 2 and 9", removed, err)
	}
	var left []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if want := []string{".savepoint-123", "notes.txt", "savepoint-10.cairn", "savepoint-11.cairn", "savepoint-x.cairn"}; !slices.Equal(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}
}
