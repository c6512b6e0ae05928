package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

const savepointDestConfig = `agent:
  data_dir: %s
  api: 127.0.0.1:%d
  api_token_file: %s
checkpoints:
  interval: 100ms
sources:
  - id: fleet
    simulator: {devices: 5, rate: 100}
operators:
  - id: counts
    type: count
    inputs: [fleet]
    key_by: key
`

// savepointAgent is a running agent whose savepoints a test asks for,
// through the CLI and through the TCP control API with its token.
type savepointAgent struct {
	bin, config, data, api string
	p                      *cairntest.Proc
}

func startSavepointAgent(t *testing.T) *savepointAgent {
	t.Helper()
	dir := t.TempDir()
	a := &savepointAgent{bin: cairntest.Build(t, "cairn"), config: filepath.Join(dir, "pipeline.yaml"), data: filepath.Join(dir, "data")}
	token := filepath.Join(dir, "token")
	port := freePort(t)
	a.api = fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := os.WriteFile(token, []byte(e2eToken), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a.config, fmt.Appendf(nil, savepointDestConfig, a.data, port, token), 0o600); err != nil {
		t.Fatal(err)
	}
	a.p = startAgent(t, a.bin, a.config)
	a.p.Await(t, completeLine, 30*time.Second)
	return a
}

// post sends POST target to the TCP control API with the token and
// returns the status and the body.
func (a *savepointAgent) post(t *testing.T, target string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, a.api+target, nil)
	req.Header.Set("Authorization", "Bearer "+e2eToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// awaitRunning waits for the agent to answer that it runs, and to
// complete another checkpoint: a refused savepoint left it going.
func (a *savepointAgent) awaitRunning(t *testing.T) {
	t.Helper()
	cairntest.AwaitStatus(t, filepath.Join(a.data, "cairn.sock"), "the agent running", 30*time.Second, func(st api.Status) bool { return st.State == "running" })
	a.p.Await(t, completeLine, 30*time.Second)
}

// savepoints lists the data directory's savepoints/ (nil if there is none).
func (a *savepointAgent) savepoints(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(a.data, "savepoints"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestSavepointOverTheStoreIsRefused is the finding of issue 41: a stop
// with a savepoint given the store's path, over the TCP API with the
// token, replaced the store with the savepoint, and the next start found
// nothing to restore. Now every way of naming the store, or any path, is
// refused with 400 and what to pass instead; the store is the same file,
// the agent runs on, and after a SIGTERM the next start restores its
// final checkpoint.
func TestSavepointOverTheStoreIsRefused(t *testing.T) {
	a := startSavepointAgent(t)
	store := filepath.Join(a.data, "checkpoints.db")
	before, err := os.Stat(store)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ target, says string }{
		{"/stop?savepoint=1&path=" + store, "path= is not taken"},
		{"/stop?savepoint=1&path=" + store + "&force=1", "path= is not taken"},
		{"/stop?savepoint=1&name=" + store, "give a name, not a path"},
		{"/stop?savepoint=1&name=../checkpoints.db&force=1", "give a name, not a path"},
		{"/stop?savepoint=1&name=checkpoints.db&force=1", "the name of an entry the agent keeps in its data directory"},
		{"/savepoint?name=checkpoints.db&force=1", "the name of an entry the agent keeps in its data directory"},
		{"/savepoint?name=checkpoint-id", "the name of an entry the agent keeps in its data directory"},
		{"/stop?name=x", "add savepoint=1"},
	} {
		if code, body := a.post(t, c.target); code != http.StatusBadRequest || !strings.Contains(body, c.says) {
			t.Errorf("POST %s: %d %s, want 400 saying %q", c.target, code, body, c.says)
		}
	}
	for _, args := range [][]string{
		{"stop", "--savepoint", store, "--force"},
		{"savepoint", "--name", store, "--force"},
	} {
		code, _, stderr := cairntest.Run(t, a.bin, append(args, "-c", a.config)...)
		if code != 1 || !strings.Contains(stderr, "give a name, not a path") {
			t.Errorf("cairn %s: exit status %d, %s; want 1 and what to pass instead", strings.Join(args, " "), code, stderr)
		}
	}
	a.awaitRunning(t)
	if after, err := os.Stat(store); err != nil || !os.SameFile(before, after) {
		t.Fatalf("the store %s was replaced (%v)", store, err)
	}
	if names := a.savepoints(t); len(names) > 0 {
		t.Fatalf("refused savepoints left %v", names)
	}

	a.p.Signal(syscall.SIGTERM)
	final := a.p.Await(t, finalLine, 30*time.Second)[1]
	if err := a.p.Wait(); err != nil {
		t.Fatal(err)
	}
	next := startAgent(t, a.bin, a.config)
	if got := next.Await(t, restoreLine, 30*time.Second)[1]; got != final {
		t.Fatalf("the next start restored checkpoint %s, want the final %s", got, final)
	}
	next.Await(t, completeLine, 30*time.Second)
}

// TestSavepointOverwriteNeedsForce: a savepoint name taken by an earlier
// savepoint is refused, through `cairn savepoint` and `cairn stop`, and
// the file stays as it was; with --force it is replaced. A name taken by
// a file that is not a savepoint, a directory or a symbolic link is
// refused even with --force, and what the link points to is untouched.
func TestSavepointOverwriteNeedsForce(t *testing.T) {
	a := startSavepointAgent(t)
	cairn := func(args ...string) (int, string, string) {
		t.Helper()
		return cairntest.Run(t, a.bin, append(args, "-c", a.config)...)
	}
	path := filepath.Join(a.data, "savepoints", "before-upgrade")
	if code, out, stderr := cairn("savepoint", "--name", "before-upgrade"); code != 0 || strings.TrimSpace(out) != path {
		t.Fatalf("cairn savepoint --name before-upgrade: exit status %d, %q %s; want 0 and %s", code, out, stderr, path)
	}
	first, _ := os.ReadFile(path)
	for _, args := range [][]string{{"savepoint", "--name", "before-upgrade"}, {"stop", "--savepoint", "before-upgrade"}} {
		code, _, stderr := cairn(args...)
		if code != 1 || !strings.Contains(stderr, "taken by an earlier savepoint") || !strings.Contains(stderr, "--force") {
			t.Errorf("cairn %s again: exit status %d, %s; want 1 saying to ask with --force", strings.Join(args, " "), code, stderr)
		}
	}
	a.awaitRunning(t)
	if again, _ := os.ReadFile(path); !bytes.Equal(again, first) {
		t.Fatal("a savepoint refused without --force changed the file")
	}
	if code, out, stderr := cairn("savepoint", "--name", "before-upgrade", "--force"); code != 0 || strings.TrimSpace(out) != path {
		t.Fatalf("cairn savepoint --name before-upgrade --force: exit status %d, %q %s", code, out, stderr)
	}
	if again, _ := os.ReadFile(path); bytes.Equal(again, first) {
		t.Fatal("--force left the earlier savepoint, not a new one")
	}

	outside := filepath.Join(t.TempDir(), "precious")
	os.WriteFile(outside, []byte("keep me"), 0o600)
	dir := filepath.Join(a.data, "savepoints")
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a savepoint"), 0o600)
	os.Symlink(outside, filepath.Join(dir, "link"))
	os.Mkdir(filepath.Join(dir, "sub"), 0o700)
	for _, c := range []struct{ name, says string }{
		{"notes.txt", "taken by a file that is not a savepoint"},
		{"link", "taken by a symbolic link"},
		{"sub", "taken by a directory"},
	} {
		if code, _, stderr := cairn("savepoint", "--name", c.name, "--force"); code != 1 || !strings.Contains(stderr, c.says) {
			t.Errorf("cairn savepoint --name %s --force: exit status %d, %s; want 1 saying %q", c.name, code, stderr, c.says)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep me" {
		t.Fatalf("the file the link points to was written: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "not a savepoint" {
		t.Fatalf("a file that is not a savepoint was replaced: %q", b)
	}

	if code, out, stderr := cairn("stop", "--savepoint", "before-upgrade", "--force"); code != 0 || strings.TrimSpace(out) != path {
		t.Fatalf("cairn stop --savepoint before-upgrade --force: exit status %d, %q %s", code, out, stderr)
	}
	if err := a.p.Wait(); err != nil {
		t.Fatalf("the agent stopped with %v, want status 0", err)
	}
}

// TestSavepointBadNamesRefused: a name that is not a plain file name —
// a path, "..", a hidden name, one too long, one with a character outside
// A-Z a-z 0-9 . _ -, one of the agent's numbered names or entries — is
// refused, saying which rule, and no file is written anywhere.
func TestSavepointBadNamesRefused(t *testing.T) {
	a := startSavepointAgent(t)
	for _, c := range []struct{ name, says string }{
		{"../escape", "give a name, not a path"},
		{"a/b", "give a name, not a path"},
		{"..", "starts with a dot"},
		{".hidden", "starts with a dot"},
		{"with space", "may hold only the letters"},
		{"naïve", "may hold only the letters"},
		{"a\x01b", "may hold only the letters"},
		{strings.Repeat("x", 129), "129 bytes long, longer than 128"},
		{"savepoint-3.cairn", "the agent's own"},
		{"LOCK", "the name of an entry the agent keeps"},
		{"cairn.sock", "the name of an entry the agent keeps"},
	} {
		code, _, stderr := cairntest.Run(t, a.bin, "savepoint", "--name", c.name, "-c", a.config)
		if code != 1 || !strings.Contains(stderr, "is not a savepoint name") || !strings.Contains(stderr, c.says) {
			t.Errorf("cairn savepoint --name %q: exit status %d, %s; want 1 saying %q", c.name, code, stderr, c.says)
		}
	}
	// What the CLI cannot pass, over the TCP API.
	for _, target := range []string{"/savepoint?name=a%00b", "/savepoint?name=a%2F..%2F..%2Fb", "/savepoint?name=x&force=maybe"} {
		if code, body := a.post(t, target); code != http.StatusBadRequest || !strings.Contains(body, "error") {
			t.Errorf("POST %s: %d %s, want 400", target, code, body)
		}
	}
	if code, _, stderr := cairntest.Run(t, a.bin, "stop", "--force", "-c", a.config); code != 2 || !strings.Contains(stderr, "--force is for --savepoint") {
		t.Errorf("cairn stop --force: exit status %d, %s; want 2", code, stderr)
	}
	a.awaitRunning(t)
	if names := a.savepoints(t); len(names) > 0 {
		t.Fatalf("refused names left %v in the savepoints directory", names)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(a.data), "escape")); err == nil {
		t.Fatal("a savepoint was written beside the data directory")
	}
}
