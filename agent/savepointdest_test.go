package agent

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/agent/savepoint"
)

var (
	destSeed  = flag.Uint64("dest.seed", 0, "run TestSavepointDestinations with only this seed")
	destCases = flag.Int("dest.cases", 150, "requests TestSavepointDestinations sends per seed")
)

// TestSavepointDestinations sends generated savepoint names — any bytes,
// with separators, "..", NUL, unicode, the agent's own entries, names far
// too long, names taken by a savepoint, a file, a directory or a link —
// with and without force, to the control API of a running pipeline, as
// POST /savepoint and as POST /stop?savepoint=1. Each is answered as a
// deliberately simple model of the rules says (destModel): 400 for a name
// that is not one, 409 for a name taken by what may not be replaced, 200
// and a savepoint file of exactly that name in the savepoints directory
// otherwise. Nothing else changes: no entry of the data directory, or
// beside it, appears, goes or is replaced, and what a link there points
// to stays as it was. A failure prints its seed (-dest.seed=N replays it).
func TestSavepointDestinations(t *testing.T) {
	seed := *destSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -dest.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	ctl, h := startControl(t)
	spDir := ctl.current.Load().savepoints
	dataDir := filepath.Dir(spDir)
	outside := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(outside, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The savepoints directory with an entry of each kind a name may find.
	if err := os.MkdirAll(filepath.Join(spDir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.Symlink(outside, filepath.Join(spDir, "link"))
	os.WriteFile(filepath.Join(spDir, "notes.txt"), []byte("not a savepoint"), 0o600)
	model := destModel{taken: map[string]bool{"sub": false, "link": false, "notes.txt": false}}

	beside := snapshotDir(t, filepath.Dir(dataDir))
	data := snapshotDir(t, dataDir)
	for i := range *destCases {
		name, force, stop := genName(rng, model), rng.IntN(2) == 0, rng.IntN(4) == 0
		q := url.Values{"name": {name}}
		if force {
			q.Set("force", "1")
		}
		// A stop with a savepoint that may succeed would end the agent:
		// only names the model refuses go to POST /stop.
		target := "/savepoint?" + q.Encode()
		want := model.answer(name, force)
		if stop && want != http.StatusOK {
			target = "/stop?savepoint=1&" + q.Encode()
		}
		// The pipeline here takes no stop (startControl): a stop let through
		// waits until the request's context ends, and then answers nothing.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodPost, target, nil))
		cancel()
		if rec.Code != want {
			t.Fatalf("seed %d, request %d: POST %s (name %q): %d %s, want %d", seed, i, target, name, rec.Code, rec.Body, want)
		}
		if want == http.StatusOK {
			if _, err := savepoint.Read(filepath.Join(spDir, name)); err != nil {
				t.Fatalf("seed %d, request %d: name %q answered 200, but: %v", seed, i, name, err)
			}
			model.taken[name] = true
		}
		if got, want := listNames(t, spDir), model.names(); !slices.Equal(got, want) {
			t.Fatalf("seed %d, request %d: name %q (force %v): the savepoints directory holds %q, want %q", seed, i, name, force, got, want)
		}
		if got := snapshotDir(t, dataDir); !slices.Equal(got, data) {
			t.Fatalf("seed %d, request %d: name %q: the data directory's entries changed:\n%v\nwant\n%v", seed, i, name, got, data)
		}
		if got := snapshotDir(t, filepath.Dir(dataDir)); !slices.Equal(got, beside) {
			t.Fatalf("seed %d, request %d: name %q: the directory above the data directory changed:\n%v\nwant\n%v", seed, i, name, got, beside)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep me" {
		t.Fatalf("seed %d: the file a link in the savepoints directory points to was written: %q", seed, b)
	}
	if b, _ := os.ReadFile(filepath.Join(spDir, "notes.txt")); string(b) != "not a savepoint" {
		t.Fatalf("seed %d: a file in the savepoints directory that is not a savepoint was written: %q", seed, b)
	}
}

// destModel is the rules of savepoint names, as simply as they can be
// said: what the savepoints directory holds, and what a request gets.
type destModel struct {
	taken map[string]bool // the entries of the savepoints directory: true for a savepoint
}

var (
	nameChars = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)
	numbered  = regexp.MustCompile(`^savepoint-(0|[1-9][0-9]*)\.cairn$`)
)

// answer is the HTTP status a savepoint of name, with force or not, gets.
func (m destModel) answer(name string, force bool) int {
	if n := numbered.FindStringSubmatch(name); n != nil {
		if _, err := strconv.ParseUint(n[1], 10, 64); err == nil {
			return http.StatusBadRequest
		}
	}
	if _, kept := entries[name]; kept || !nameChars.MatchString(name) || name[0] == '.' {
		return http.StatusBadRequest
	}
	isSavepoint, taken := m.taken[name]
	if taken && !(isSavepoint && force) {
		return http.StatusConflict
	}
	return http.StatusOK
}

func (m destModel) names() []string {
	var out []string
	for name := range m.taken {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// genName makes a savepoint name: a plain one, one taken, one of the
// agent's entries, or any bytes with the pieces of paths among them; not
// "", which asks for the agent's numbering (TestSavepointsAreRetained).
func genName(rng *rand.Rand, m destModel) string {
	const plain = "abcXYZ019._-"
	pieces := []string{"/", "\\", "..", ".", "\x00", "\n", " ", "%2F", "é", "名", "\u202e", "~", "savepoint-1.cairn", "checkpoints.db", "/etc/passwd"}
	switch rng.IntN(6) {
	case 0, 1:
		b := make([]byte, 1+rng.IntN(12))
		for i := range b {
			b[i] = plain[rng.IntN(len(plain))]
		}
		return string(b)
	case 2:
		if names := m.names(); len(names) > 0 {
			return names[rng.IntN(len(names))]
		}
		return "again"
	case 3:
		kept := slices.Sorted(maps.Keys(entries))
		return kept[rng.IntN(len(kept))]
	case 4:
		return strings.Repeat(string(plain[rng.IntN(len(plain))]), 120+rng.IntN(20))
	}
	var b strings.Builder
	for range 1 + rng.IntN(6) {
		if rng.IntN(2) == 0 {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		} else {
			b.WriteByte(byte(rng.IntN(256)))
		}
	}
	return b.String()
}

// entryOf is what a test compares of a directory entry: its name, type
// and file (inode), so that a file replaced, not only one added or
// removed, is seen.
type entryOf struct {
	name string
	mode os.FileMode
	ino  uint64
}

func snapshotDir(t *testing.T, dir string) []entryOf {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []entryOf
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entryOf{e.Name(), info.Mode().Type(), inode(info)})
	}
	return out
}

// inode is the number of the file info describes.
func inode(info os.FileInfo) uint64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}

// listNames is the names in dir but the hidden ones (a savepoint being
// written is one until it is named).
func listNames(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, e := range snapshotDir(t, dir) {
		if !strings.HasPrefix(e.name, ".") {
			out = append(out, e.name)
		}
	}
	return out
}

func (e entryOf) String() string { return fmt.Sprintf("%s %v #%d", e.name, e.mode, e.ino) }
