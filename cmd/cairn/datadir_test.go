package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

// TestDataDirLinksAreRefused: replaced with a symbolic link to a file the
// agent's user may write, checkpoint-id is not written through, and a
// cairn.pid that is another name of such a file is not truncated: the
// start fails, saying which entry and what to do, and the file pointed to
// keeps its bytes. With the entries put back, the agent starts.
func TestDataDirLinksAreRefused(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	data, file := filepath.Join(dir, "data"), filepath.Join(dir, "pipeline.yaml")
	pipeline := fmt.Sprintf("agent:\n  data_dir: %s\ncheckpoints:\n  interval: 100ms\nsources:\n  - id: fleet\n    simulator: {devices: 5, rate: 100}\n"+
		"operators:\n  - {id: counts, type: count, inputs: [fleet], key_by: key}\n", data)
	if err := os.WriteFile(file, []byte(pipeline), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func() {
		p := startAgent(t, bin, file)
		p.Await(t, completeLine, time.Minute)
		if err := p.Stop(time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	run()
	precious := filepath.Join(t.TempDir(), "precious")
	for _, c := range []struct {
		entry, kind string
		link        func(target, entry string) error
		says        string
	}{
		{"checkpoint-id", "symbolic link", os.Symlink, "is a symbolic link, which cairn does not follow in its data directory"},
		{"cairn.pid", "hard link", os.Link, "has 2 hard links, and cairn writes only files of its own"},
	} {
		if err := os.WriteFile(precious, []byte("the agent's user may write me"), 0o600); err != nil {
			t.Fatal(err)
		}
		entry := filepath.Join(data, c.entry)
		saved, err := os.ReadFile(entry)
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(entry)
		if err := c.link(precious, entry); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := cairntest.Run(t, bin, "run", "-c", file)
		if code != 1 || !regexp.MustCompile(regexp.QuoteMeta(entry)+" "+regexp.QuoteMeta(c.says)).MatchString(stderr) {
			t.Fatalf("%s a %s: exit %d\n%s", c.entry, c.kind, code, stderr)
		}
		if b, _ := os.ReadFile(precious); !strings.HasPrefix(string(b), "the agent's user may write me") {
			t.Fatalf("%s, a %s, was written through: %q", c.entry, c.kind, b)
		}
		os.Remove(entry)
		if err := os.WriteFile(entry, saved, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run()
}
