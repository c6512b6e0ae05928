package savepoint

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/checkpoint"
)

func TestRoundTripAndDamage(t *testing.T) {
	store := checkpoint.NewMemStore(0)
	task := checkpoint.TaskID{Operator: "count", Subtask: 0}
	base, _ := store.PutState(1, task, slices.Values([][]byte{[]byte("whole snapshot")}))
	inc, _ := store.PutState(2, task, slices.Values([][]byte{[]byte("increment")}))
	m := &checkpoint.Manifest{ID: 2, Subtasks: []checkpoint.Ack{{Task: task, ID: 2, State: inc, Base: []checkpoint.StateHandle{base}}}}
	path, err := WriteIn(filepath.Join(t.TempDir(), "sp"), "", false, m, store)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != FileName(2) {
		t.Fatalf("written to %s, want %s", path, FileName(2))
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

// TestWriteInRefuses: a name that is not a plain file name is refused
// before anything is written; an entry of the name is replaced only when
// asked and only if it is a savepoint; a link at the name is never
// followed, and what it points to stays as it was.
func TestWriteInRefuses(t *testing.T) {
	store := checkpoint.NewMemStore(0)
	task := checkpoint.TaskID{Operator: "count", Subtask: 0}
	h, _ := store.PutState(3, task, slices.Values([][]byte{[]byte("state")}))
	m := &checkpoint.Manifest{ID: 3, Subtasks: []checkpoint.Ack{{Task: task, ID: 3, State: h}}}
	dir := filepath.Join(t.TempDir(), "savepoints")
	outside := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(outside, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", ".", "..", "../x", "a/b", `a\b`, "/etc/passwd", ".hidden", "a\x00b", "naïve", "with space",
		strings.Repeat("x", MaxNameLen+1), FileName(3), FileName(12)} {
		if _, err := WriteIn(dir, name, true, m, store); name != "" && !errors.Is(err, ErrBadName) {
			t.Errorf("name %q: %v, want ErrBadName", name, err)
		}
	}
	if _, err := os.Stat(dir); countEntries(t, dir) != 1 || err != nil {
		t.Fatalf("after the refused names %s holds %d entries (%v), want the one savepoint of name \"\"", dir, countEntries(t, dir), err)
	}
	if _, err := WriteIn(dir, strings.Repeat("x", MaxNameLen), false, m, store); err != nil {
		t.Fatalf("the longest name: %v", err)
	}
	os.Symlink(outside, filepath.Join(dir, "link"))
	os.Mkdir(filepath.Join(dir, "sub"), 0o700)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a savepoint"), 0o600)
	for _, c := range []struct{ name, says string }{
		{"link", "taken by a symbolic link"},
		{"sub", "taken by a directory"},
		{"notes.txt", "taken by a file that is not a savepoint"},
	} {
		for _, replace := range []bool{false, true} {
			if _, err := WriteIn(dir, c.name, replace, m, store); !errors.Is(err, ErrTaken) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%s (replace %v): %v, want ErrTaken saying %q", c.name, replace, err, c.says)
			}
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep me" {
		t.Fatalf("the link's target was written: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "not a savepoint" {
		t.Fatalf("a file that is not a savepoint was written: %q", b)
	}
	first, err := WriteIn(dir, "before-upgrade", false, m, store)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteIn(dir, "before-upgrade", false, m, store); !errors.Is(err, ErrTaken) || !strings.Contains(err.Error(), "force") {
		t.Fatalf("a savepoint written again without replace: %v, want ErrTaken that says how to replace it", err)
	}
	if again, err := WriteIn(dir, "before-upgrade", true, m, store); err != nil || again != first {
		t.Fatalf("replacing a savepoint: %s, %v", again, err)
	}
	if _, err := Read(first); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("a temporary file stayed: %s", e.Name())
		}
	}
}

// countEntries is the number of entries in dir.
func countEntries(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
