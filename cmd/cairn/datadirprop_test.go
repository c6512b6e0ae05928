package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

var (
	dataDirCases = flag.Int("datadir.cases", 24, "TestDataDirDamageProperty: generated cases (a long run: 500)")
	dataDirSeed  = flag.Uint64("datadir.seed", 0, "TestDataDirDamageProperty: seed of the first case (0: from the clock); "+
		"with -datadir.cases=1, the one case to run again")
)

// dataDirEntries are the entries of the agent's data directory, as
// agent/lock.go's entries names them, with what the agent keeps at each.
// Scratch entries hold nothing the agent reads back (its pid, its
// socket): what is written there as content is the agent's to replace.
var dataDirEntries = []struct {
	name         string
	dir, scratch bool
}{
	{name: "LOCK"}, {name: "cairn.pid", scratch: true}, {name: "cairn.sock", scratch: true}, {name: "checkpoint-id"},
	{name: "checkpoints.db"}, {name: "checkpoints.db.moving"}, {name: "ingest", dir: true}, {name: "savepoints", dir: true},
	{name: "savepoint-restored"}, {name: "savepoint-restored.new"}, {name: "checkpoints", dir: true}, {name: "ingest.db"},
}

// TestDataDirDamageProperty (issue 41, item 7): generated damage at the
// entries of a data directory that a run left with state (checkpoints, an
// ingest log, a savepoint) — random bytes, empty files, bbolt files that
// are not cairn's, a directory where a file is kept or a file where a
// directory is, o+w, another owner (nobody), symbolic and hard links to
// files elsewhere — and a start of the binary on it. Each start either
// refuses, with exit status 1 and a message that names a damaged entry
// or --accept-state-loss, or runs, restored from a checkpoint or saying
// that the state was rebuilt from the log (never empty and silent), and
// stops cleanly. Either way, what was put there is where it was, as it
// was, or set aside byte for byte as NAME.foreign-N or NAME.damaged-N
// (content at a scratch entry excepted), and no file outside the data
// directory changed. Each case is a subtest named by its seed:
// -datadir.seed=N -datadir.cases=1 runs it again.
func TestDataDirDamageProperty(t *testing.T) {
	root := os.Geteuid() == 0
	base := newForeignRun(t)
	base.logMessages(t, 100, 0, 0)
	p := startAgent(t, base.bin, base.file)
	cairntest.AwaitStatus(t, filepath.Join(base.data, "cairn.sock"), "the log read", time.Minute, func(st api.Status) bool {
		return st.RecordsOut("readings") == 100
	})
	p.Await(t, completeLine, time.Minute)
	if code, out, errOut := cairntest.Run(t, base.bin, "savepoint", "-c", base.file); code != 0 {
		t.Fatalf("cairn savepoint: exit %d\n%s%s", code, out, errOut)
	}
	if err := p.Stop(time.Minute); err != nil {
		t.Fatalf("%v\n%s", err, p.Log())
	}
	cases := filepath.Join(filepath.Dir(base.data), "cases")
	if err := os.Mkdir(cases, 0o700); err != nil {
		t.Fatal(err)
	}
	first := *dataDirSeed
	if first == 0 {
		first = uint64(time.Now().UnixNano())
	}
	t.Logf("seeds %d to %d (-datadir.seed=N -datadir.cases=1 runs case N again)", first, first+uint64(*dataDirCases)-1)
	for i := range *dataDirCases {
		seed := first + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			dir, err := os.MkdirTemp(cases, "")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			c := damageCase{rng: rand.New(rand.NewPCG(seed, 41)), data: filepath.Join(dir, "data"), elsewhere: filepath.Join(dir, "elsewhere"), root: root}
			if err := copyTree(base.data, c.data); err != nil {
				t.Fatal(err)
			}
			c.generate(t)
			c.check(t, base.bin, filepath.Join(dir, "pipeline.yaml"))
		})
	}
}

// damageCase is one generated case: the data directory damaged, and a
// directory elsewhere whose files links there point to.
type damageCase struct {
	rng             *rand.Rand
	data, elsewhere string
	root            bool // chown to nobody is possible
	// damaged are the paths damaged, each with what was there after all
	// the damage was done, and whether it is content at a scratch entry.
	damaged []damaged
	// outside is what elsewhere held before the start.
	outside tree
}

type damaged struct {
	path, what string
	scratch    bool
	before     tree
}

// generate does one to three kinds of damage to c.data.
func (c *damageCase) generate(t *testing.T) {
	t.Helper()
	if err := os.Mkdir(c.elsewhere, 0o700); err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(c.elsewhere, "precious"), c.bytes(1, 4096), 0o600))
	must(t, os.MkdirAll(filepath.Join(c.elsewhere, "precious-dir"), 0o700))
	must(t, os.WriteFile(filepath.Join(c.elsewhere, "precious-dir", "f"), c.bytes(1, 100), 0o600))
	// Content more often than the rest, which every entry refuses alike.
	kinds := []string{"random bytes", "random bytes", "random bytes", "empty file", "bbolt file", "bbolt file", "bbolt file",
		"directory", "o+w", "nobody's", "symbolic link", "hard link"}
	if !c.root {
		kinds = slices.DeleteFunc(kinds, func(k string) bool { return k == "nobody's" })
	}
	for range 1 + c.rng.IntN(2) {
		path, scratch := c.target()
		kind := kinds[c.rng.IntN(len(kinds))]
		t.Logf("damage: %s at %s", kind, path)
		c.damage(t, path, kind)
		content := kind == "random bytes" || kind == "empty file" || kind == "bbolt file"
		c.damaged = slices.DeleteFunc(c.damaged, func(d damaged) bool { return d.path == path || strings.HasPrefix(d.path, path+"/") })
		c.damaged = append(c.damaged, damaged{path: path, what: kind, scratch: scratch && content})
	}
	for i := range c.damaged {
		c.damaged[i].before = snapshot(t, c.damaged[i].path)
	}
	c.outside = snapshot(t, c.elsewhere)
}

// target picks an entry of the data directory, or something under one of
// its directories (a file that is there, or a new name), and says whether
// it is a scratch entry.
func (c *damageCase) target() (string, bool) {
	if c.rng.IntN(3) == 0 {
		var under []string
		filepath.WalkDir(c.data, func(p string, d fs.DirEntry, err error) error {
			if err == nil && p != c.data && filepath.Dir(p) != c.data {
				under = append(under, p)
			}
			return nil
		})
		var dirs []string
		for _, p := range under {
			if st, err := os.Lstat(p); err == nil && st.IsDir() {
				dirs = append(dirs, p)
			}
		}
		switch {
		case len(dirs) > 0 && c.rng.IntN(3) == 0:
			return filepath.Join(dirs[c.rng.IntN(len(dirs))], fmt.Sprintf("foreign-%d", c.rng.IntN(100))), false
		case len(under) > 0:
			return under[c.rng.IntN(len(under))], false
		}
	}
	// The stores more often than the rest.
	if c.rng.IntN(2) == 0 {
		return filepath.Join(c.data, []string{"checkpoints.db", "checkpoint-id", "checkpoints.db.moving"}[c.rng.IntN(3)]), false
	}
	e := dataDirEntries[c.rng.IntN(len(dataDirEntries))]
	return filepath.Join(c.data, e.name), e.scratch
}

// damage does kind at path: puts there what kind names, in place of what
// was there, or changes the mode or the owner of what is there (of a
// file of random bytes where there was nothing).
func (c *damageCase) damage(t *testing.T, path, kind string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(path), 0o700))
	switch kind {
	case "o+w", "nobody's":
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			must(t, os.WriteFile(path, c.bytes(1, 4096), 0o600))
		}
		st, err := os.Lstat(path)
		must(t, err)
		if kind == "o+w" {
			must(t, os.Chmod(path, st.Mode().Perm()|0o002))
		} else {
			must(t, os.Lchown(path, 65534, 65534))
		}
		return
	}
	must(t, os.RemoveAll(path))
	switch kind {
	case "random bytes":
		must(t, os.WriteFile(path, c.bytes(1, 64<<10), 0o600))
	case "empty file":
		must(t, os.WriteFile(path, nil, 0o600))
	case "bbolt file":
		pool := []string{"meta", "checkpoints", "snapshots", "blobs", "wrong", "checkpoint/0000000000000001", "state/x", ""}
		var names []string
		for range 1 + c.rng.IntN(4) {
			name := pool[c.rng.IntN(len(pool))]
			if name == "" {
				name = fmt.Sprintf("%x", c.bytes(1, 16))
			}
			names = append(names, name)
		}
		writeBolt(t, path, names)
	case "directory":
		must(t, os.Mkdir(path, 0o700))
		must(t, os.WriteFile(filepath.Join(path, "inside"), c.bytes(0, 512), 0o600))
	case "symbolic link":
		target := filepath.Join(c.elsewhere, []string{"precious", "precious-dir", "missing"}[c.rng.IntN(3)])
		must(t, os.Symlink(target, path))
	case "hard link":
		must(t, os.Link(filepath.Join(c.elsewhere, "precious"), path))
	default:
		t.Fatalf("no damage %q", kind)
	}
}

// bytes returns from lo to hi random bytes.
func (c *damageCase) bytes(lo, hi int) []byte {
	b := make([]byte, lo+c.rng.IntN(hi-lo+1))
	for i := range b {
		b[i] = byte(c.rng.Uint32())
	}
	return b
}

// check starts the agent on c.data and holds it to the invariant
// (TestDataDirDamageProperty).
func (c *damageCase) check(t *testing.T, bin, file string) {
	t.Helper()
	must(t, os.WriteFile(file, fmt.Appendf(nil, foreignConfig, c.data, freePort(t)), 0o600))
	p := startAgent(t, bin, file)
	// Running: restored, or with nothing to restore, and its sources
	// started.
	var st *api.Status
	if !testwait.Poll(2*time.Minute, func() bool {
		select {
		case <-p.Ended():
			st = nil // what it said before it ended: "starting", say
			return true
		default:
			st = statusOf(filepath.Join(c.data, "cairn.sock"))
			return st != nil && st.State == "running"
		}
	}) {
		t.Fatalf("the agent neither ran nor ended within 2m:\n%s", p.Log())
	}
	stopped := errors.New("it ended before it ran")
	if st != nil {
		switch {
		case st.RestoredFrom != nil:
			t.Logf("ran, restored from %s checkpoint %d", st.RestoredFrom.Source, st.RestoredFrom.ID)
		case st.Rebuilt != "":
			t.Logf("ran, rebuilt from the log")
		default:
			t.Errorf("the agent started with empty state, and said nothing of it:\n%s", p.Log())
		}
		stopped = p.Stop(time.Minute)
	}
	if stopped != nil { // it ended on its own: a start refused, perhaps by a source once it ran
		var ee *exec.ExitError
		if err := p.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("the agent ended with %v (%v), want exit status 1:\n%s", err, stopped, p.Log())
		}
		named := strings.Contains(p.Log(), "--accept-state-loss")
		for _, d := range c.damaged {
			named = named || strings.Contains(p.Log(), d.path)
		}
		if !named {
			t.Errorf("the start was refused, naming neither a damaged entry nor --accept-state-loss:\n%s", p.Log())
		}
		t.Logf("refused: %s", stoppedLine(p.Log()))
	}
	for _, d := range c.damaged {
		if d.scratch {
			continue
		}
		why := keptOrSetAside(t, d)
		if why != "" {
			t.Errorf("%s at %s: %s\n%s", d.what, d.path, why, p.Log())
		}
	}
	if diff := snapshot(t, c.elsewhere).diff(c.outside); diff != "" {
		t.Errorf("a file outside the data directory changed: %s\n%s", diff, p.Log())
	}
}

// keptOrSetAside says how what d put there was lost: "" if it is still
// at its path, as it was, or renamed whole to PATH.foreign-N or
// PATH.damaged-N. An empty file holds nothing to lose.
func keptOrSetAside(t *testing.T, d damaged) string {
	if len(d.before) == 1 && d.before["."].mode.IsRegular() && len(d.before["."].data) == 0 && d.before["."].mode.Perm()&0o002 == 0 {
		return ""
	}
	diff := snapshot(t, d.path).diff(d.before)
	if diff == "" {
		return ""
	}
	for _, what := range []string{"foreign", "damaged"} {
		asides, _ := filepath.Glob(d.path + "." + what + "-*")
		for _, aside := range asides {
			if snapshot(t, aside).diff(d.before) == "" {
				return ""
			}
		}
	}
	return "changed in place, and not set aside as it was: " + diff
}

// tree is what is at a path, by the path of each entry under it ("." for
// itself), not following links.
type tree map[string]node

type node struct {
	mode  os.FileMode
	uid   uint32
	links uint64
	data  []byte // of a regular file
	link  string // of a symbolic link
}

func snapshot(t *testing.T, path string) tree {
	t.Helper()
	out := tree{}
	err := filepath.WalkDir(path, func(p string, _ fs.DirEntry, err error) error {
		if errors.Is(err, os.ErrNotExist) && p == path {
			return nil
		}
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		sys := st.Sys().(*syscall.Stat_t)
		n := node{mode: st.Mode(), uid: sys.Uid, links: uint64(sys.Nlink)}
		switch {
		case st.Mode().IsRegular():
			if n.data, err = os.ReadFile(p); err != nil {
				return err
			}
		case st.Mode()&os.ModeSymlink != 0:
			if n.link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		if st.IsDir() {
			n.links = 0 // a directory's count changes with its subdirectories
		}
		rel, _ := filepath.Rel(path, p)
		out[rel] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// diff describes the first difference of tr from was, of what was has;
// "" if none.
func (tr tree) diff(was tree) string {
	for _, p := range slices.Sorted(maps.Keys(was)) {
		a := was[p]
		b, ok := tr[p]
		switch {
		case !ok:
			return p + " is gone"
		case a.mode != b.mode || a.uid != b.uid || a.links != b.links || a.link != b.link:
			return fmt.Sprintf("%s was %v uid %d links %d %q, is %v uid %d links %d %q", p, a.mode, a.uid, a.links, a.link, b.mode, b.uid, b.links, b.link)
		case !bytes.Equal(a.data, b.data):
			return fmt.Sprintf("%s held %d bytes, holds %d others", p, len(a.data), len(b.data))
		}
	}
	return "" // what was added beside it, in a directory, is the agent's
}

// copyTree copies the directory src to dst: its directories and regular
// files, with their modes.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		st, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(to, st.Mode().Perm())
		case st.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(to, b, st.Mode().Perm())
		}
		return nil // a socket
	})
}

// statusOf is the agent's answer to GET /status on socket; nil if there
// is none (yet).
func statusOf(socket string) *api.Status {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
	}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://cairn/status")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var st api.Status
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil {
		return nil
	}
	return &st
}

// stoppedLine is the line of log that says why the agent stopped, or its
// last line.
func stoppedLine(log string) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	for _, l := range slices.Backward(lines) {
		if strings.Contains(l, `msg="cairn stopped"`) {
			return l
		}
	}
	return lines[len(lines)-1]
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
