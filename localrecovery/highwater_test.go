package localrecovery

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHighWaterOutlivesTheStore: ids taken by a store that is then
// deleted, or replaced by an older copy, are not taken again (I6).
func TestHighWaterOutlivesTheStore(t *testing.T) {
	root := t.TempDir()
	dir, mark := filepath.Join(root, "checkpoints.db"), filepath.Join(root, "checkpoint-id")
	opts := Options{HighWater: mark}
	s := mustOpen(t, dir, opts)
	complete(t, s, 1, 100)
	s.Close()
	older := filepath.Join(root, "older")
	copyFile(t, dir, older)
	s = mustOpen(t, dir, opts)
	complete(t, s, 2, 100)
	complete(t, s, 3, 100)
	if err := s.SaveLastID(5); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// An older copy of the store: checkpoint 1 is restored, ids go on at 6.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(older, dir); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	opts.Logger = logs.logger()
	s = mustOpen(t, dir, opts)
	if got := ids(t, s); got != "1" {
		t.Fatalf("completed in the older copy: %q", got)
	}
	if id, _ := s.LastID(); id != 5 {
		t.Fatalf("last id %d, want 5", id)
	}
	if !strings.Contains(logs.String(), "the checkpoint store lost checkpoints") {
		t.Fatalf("no warning:\n%s", logs.String())
	}
	s.Close()

	// The store deleted: nothing completed, the ids still taken.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir, opts)
	if id, _ := s.LastID(); id != 5 || ids(t, s) != "" {
		t.Fatalf("last id %d, completed %q; want 5 and none", id, ids(t, s))
	}
	complete(t, s, 6, 100)
	s.Close()
	if hw, err := readHighWater(mark); err != nil || hw != 6 {
		t.Fatalf("mark %d (%v), want 6", hw, err)
	}
}

// TestCrashDuringFirstCompletionRefusesNothing: a crash while the first
// checkpoint is being completed, at any of the store's failpoints, leaves
// a data directory whose next start has nothing to restore and starts
// empty, without refusing: no checkpoint had completed, so no state was
// lost. (The id mark was written before the completion record, and such
// a start refused for state that never was.) One that crashes after the
// record committed restores the checkpoint.
func TestCrashDuringFirstCompletionRefusesNothing(t *testing.T) {
	for _, point := range []string{"before-completion", "retention", "after-completion"} {
		t.Run(point, func(t *testing.T) {
			root, crashed := t.TempDir(), t.TempDir()
			store, mark := filepath.Join(root, "checkpoints.db"), filepath.Join(root, "checkpoint-id")
			// What a kill -9 at the failpoint leaves on disk: the files as
			// they are there (bbolt writes nothing of a transaction before
			// it commits).
			s := mustOpen(t, store, Options{HighWater: mark, Failpoint: func(name string) {
				if name == point {
					copyFile(t, store, filepath.Join(crashed, "checkpoints.db"))
					if _, err := os.Stat(mark); err == nil {
						copyFile(t, mark, filepath.Join(crashed, "checkpoint-id"))
					}
				}
			}})
			complete(t, s, 1, 100)
			s.Close()

			s = mustOpen(t, filepath.Join(crashed, "checkpoints.db"), Options{HighWater: filepath.Join(crashed, "checkpoint-id")})
			defer s.Close()
			choice, err := Choose(Sources{Local: s})
			switch {
			case err != nil:
				t.Fatalf("the start after a crash at %s refused: %v", point, err)
			case point == "after-completion" && (len(choice.Candidates) == 0 || choice.Candidates[0].Manifest.ID != 1):
				t.Fatalf("after a crash at %s: %d candidates, want checkpoint 1", point, len(choice.Candidates))
			case point != "after-completion" && len(choice.Candidates) != 0:
				t.Fatalf("after a crash at %s: checkpoint %d to restore, which never completed", point, choice.Candidates[0].Manifest.ID)
			}
		})
	}
}

// TestDamagedHighWaterIsNotTrusted: a mark that fails its checksum is
// reported and set aside as it was; the store's own ids count, and the
// next id taken is marked in a new file.
func TestDamagedHighWaterIsNotTrusted(t *testing.T) {
	root := t.TempDir()
	dir, mark := filepath.Join(root, "checkpoints.db"), filepath.Join(root, "checkpoint-id")
	s := mustOpen(t, dir, Options{HighWater: mark})
	complete(t, s, 4, 100)
	s.Close()
	b, err := os.ReadFile(mark)
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40 // would read as id 68
	if err := os.WriteFile(mark, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	s = mustOpen(t, dir, Options{HighWater: mark, Logger: logs.logger()})
	if id, _ := s.LastID(); id != 4 {
		t.Fatalf("last id %d, want the store's 4", id)
	}
	if !strings.Contains(logs.String(), "checkpoint id mark unreadable: it is set aside untouched") {
		t.Fatalf("damage not reported:\n%s", logs.String())
	}
	complete(t, s, 5, 100)
	s.Close()
	if aside, err := os.ReadFile(mark + ".damaged-1"); err != nil || !bytes.Equal(aside, b) {
		t.Fatalf("the mark set aside holds %x (%v), want %x", aside, err, b)
	}
	if hw, err := readHighWater(mark); err != nil || hw != 5 {
		t.Fatalf("new mark %d (%v), want 5", hw, err)
	}
}

// TestStoreFilesAreItsOwn: the store's file, its id mark and the file of
// a move are opened without following a symbolic link, and not when
// another name links to them: Open refuses, saying what it found, and the
// file linked to is left as it was.
func TestStoreFilesAreItsOwn(t *testing.T) {
	for _, c := range []struct{ name, file string }{
		{"store symlink", "checkpoints.db"}, {"store hard link", "checkpoints.db"},
		{"mark symlink", "checkpoint-id"}, {"mark hard link", "checkpoint-id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			path, mark := filepath.Join(root, "checkpoints.db"), filepath.Join(root, "checkpoint-id")
			s := mustOpen(t, path, Options{HighWater: mark})
			complete(t, s, 1, 100)
			s.Close()
			target := filepath.Join(root, "elsewhere")
			if err := os.Rename(filepath.Join(root, c.file), target); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(target)
			link, want := os.Symlink, "is a symbolic link, which cairn does not follow"
			if strings.HasSuffix(c.name, "hard link") {
				link, want = os.Link, "has 2 hard links"
			}
			if err := link(target, filepath.Join(root, c.file)); err != nil {
				t.Fatal(err)
			}
			_, err := Open(path, Options{HighWater: mark})
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), c.file) {
				t.Fatalf("Open with %s = %v, want %q", c.name, err, want)
			}
			if after, _ := os.ReadFile(target); !bytes.Equal(before, after) {
				t.Fatal("the file linked to changed")
			}
		})
	}
}
