package datadir_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/datadir"
)

// TestOpenFileFollowsNoLink: a symbolic link at the name is refused, also
// one to a file that does not exist yet (which O_CREATE would make), and
// so is a file with another name; the file they point to is unchanged.
// A file of one name opens.
func TestOpenFileFollowsNoLink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(target, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Symlink(target, filepath.Join(dir, "link"))
	os.Symlink(filepath.Join(t.TempDir(), "new"), filepath.Join(dir, "dangling"))
	os.Link(target, filepath.Join(dir, "hard"))
	os.WriteFile(filepath.Join(dir, "own"), nil, 0o600)
	for _, c := range []struct{ name, says string }{
		{"link", "is a symbolic link"},
		{"dangling", "is a symbolic link"},
		{"hard", "has 2 hard links"},
		{"own", ""},
	} {
		f, err := datadir.OpenFile(filepath.Join(dir, c.name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if c.says == "" {
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			f.Close()
			continue
		}
		if err == nil {
			f.Close()
			t.Fatalf("%s was opened", c.name)
		}
		if !errors.Is(err, datadir.ErrNotOwn) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), c.name) {
			t.Fatalf("%s: %v, want ErrNotOwn saying %q", c.name, err, c.says)
		}
		if err := datadir.CheckEntry(filepath.Join(dir, c.name), datadir.File); !errors.Is(err, datadir.ErrNotOwn) {
			t.Fatalf("CheckEntry(%s): %v", c.name, err)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "keep me" {
		t.Fatalf("the link's target was written: %q", b)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(target), "new")); err == nil {
		t.Fatal("the dangling link's target was created")
	}
	os.Mkdir(filepath.Join(dir, "sub"), 0o700)
	for name, kind := range map[string]datadir.Kind{"own": datadir.File, "sub": datadir.Dir, "missing": datadir.File} {
		if err := datadir.CheckEntry(filepath.Join(dir, name), kind); err != nil {
			t.Fatalf("CheckEntry(%s): %v", name, err)
		}
	}
}
