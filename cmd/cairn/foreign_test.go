package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/ingest"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

// foreignConfig is a pipeline with an MQTT source (an ingest log,
// readings/0) from an embedded broker; no message reaches it but those
// the test logs.
const foreignConfig = `agent: {data_dir: %s}
brokers:
  local: {embedded: true, listen: "127.0.0.1:%d"}
checkpoints: {interval: 100ms}
sources:
  - {id: readings, broker: local, topics: ["in/{device}"], key: device}
operators:
  - {id: counts, type: count, inputs: [readings], key_by: key}
sinks:
  - {id: out, input: counts, broker: local, topic: "out/{key}"}
`

// foreignRun is a data directory and a pipeline file on it.
type foreignRun struct{ bin, data, file string }

func newForeignRun(t *testing.T) foreignRun {
	t.Helper()
	dir := t.TempDir()
	r := foreignRun{bin: cairntest.Build(t, "cairn"), data: filepath.Join(dir, "data"), file: filepath.Join(dir, "pipeline.yaml")}
	if err := os.WriteFile(r.file, fmt.Appendf(nil, foreignConfig, r.data, freePort(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

// checkpointed runs the agent until a checkpoint completes, and stops it.
func (r foreignRun) checkpointed(t *testing.T) {
	t.Helper()
	p := startAgent(t, r.bin, r.file)
	p.Await(t, completeLine, time.Minute)
	if err := p.Stop(time.Minute); err != nil {
		t.Fatal(err)
	}
}

// logMessages writes n messages into the ingest log of readings/0, as
// the agent's source would, in segments of segBytes, and truncates the
// log's front below offset below (0: not at all).
func (r foreignRun) logMessages(t *testing.T, n int, segBytes int64, below uint64) {
	t.Helper()
	logs, err := ingest.OpenLogs(ingest.Dir(r.data), ingest.LogOptions{SegmentBytes: segBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	l, err := logs.Log("readings/0")
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]ingest.Message, n)
	for i := range msgs {
		msgs[i] = ingest.Message{Topic: fmt.Sprintf("in/d%d", i%4), Payload: []byte(`{"v": 1}`), Received: time.Now()}
	}
	for len(msgs) > 0 { // a group each, so that segments fill
		k := min(len(msgs), 50)
		if _, err := l.Append(msgs[:k]); err != nil {
			t.Fatal(err)
		}
		msgs = msgs[k:]
	}
	if below > 0 {
		if err := l.Truncate(below); err != nil {
			t.Fatal(err)
		}
		if l.First() <= 1 {
			t.Fatalf("the log was not truncated: it starts at %d", l.First())
		}
	}
}

// TestForeignStoreIsSetAside (issue 41, finding 2): a valid bbolt file
// with buckets "wrong" and "checkpoints" put as checkpoints.db is set
// aside, byte for byte, as checkpoints.db.foreign-1, and the start says
// where; the id mark shows checkpoints were taken, so the start then
// refuses as for a lost store.
func TestForeignStoreIsSetAside(t *testing.T) {
	r := newForeignRun(t)
	r.checkpointed(t)
	store := filepath.Join(r.data, "checkpoints.db")
	os.Remove(store)
	writeBolt(t, store, []string{"wrong", "checkpoints"})
	before, _ := os.ReadFile(store)
	code, _, stderr := cairntest.Run(t, r.bin, "run", "-c", r.file)
	if code != 1 || !strings.Contains(stderr, `msg="the checkpoint store's file is not cairn's: it is set aside untouched`) ||
		!strings.Contains(stderr, "aside="+store+".foreign-1") || !strings.Contains(stderr, "--accept-state-loss") {
		t.Fatalf("start on a foreign checkpoints.db: exit %d\n%s", code, stderr)
	}
	if after, err := os.ReadFile(store + ".foreign-1"); err != nil || !bytes.Equal(after, before) {
		t.Fatalf("the foreign file set aside changed (%v)", err)
	}
}

// writeBolt writes a bbolt file at path with the top-level buckets
// names, each with a key.
func writeBolt(t *testing.T, path string, names []string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, n := range names {
			b, err := tx.CreateBucketIfNotExists([]byte(n))
			if err != nil {
				return err
			}
			if err := b.Put([]byte("k"), []byte("not cairn's")); err != nil {
				return err
			}
		}
		return nil
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
}

// TestStateRebuiltFromTheLogIsSaid (issue 41, finding 3): with no store
// and no id mark but an ingest log that holds everything from offset 1,
// the agent starts, with a WARN and a status line that say the state was
// rebuilt from the log.
func TestStateRebuiltFromTheLogIsSaid(t *testing.T) {
	r := newForeignRun(t)
	r.logMessages(t, 100, 0, 0)
	p := startAgent(t, r.bin, r.file)
	p.Await(t, regexp.MustCompile(`level=WARN msg="no checkpoint store and no checkpoint id mark, but an ingest log that holds every message from offset 1`), time.Minute)
	st := cairntest.AwaitStatus(t, filepath.Join(r.data, "cairn.sock"), "the log replayed", time.Minute, func(st api.Status) bool {
		return st.Rebuilt != "" && st.RecordsOut("readings") == 100
	})
	if !strings.Contains(st.Rebuilt, "rebuilt by replaying them") {
		t.Fatalf("status says %q", st.Rebuilt)
	}
	if code, out, errOut := cairntest.Run(t, r.bin, "status", "--data-dir", r.data); code != 0 || !strings.Contains(out, "state rebuilt from the ingest log: ") {
		t.Fatalf("cairn status: exit %d\n%s%s", code, out, errOut)
	}
	if err := p.Stop(time.Minute); err != nil {
		t.Fatal(err)
	}
}

// TestTrimmedLogWithoutStoreIsRefused (issue 41, finding 3): with no
// store and no id mark but an ingest log truncated at its front, the
// start refuses as for a lost store, naming the flag; with it, it starts.
func TestTrimmedLogWithoutStoreIsRefused(t *testing.T) {
	r := newForeignRun(t)
	r.logMessages(t, ingest.RedeliveryWindow+5000, 4<<10, ingest.RedeliveryWindow+5000)
	code, _, stderr := cairntest.Run(t, r.bin, "run", "-c", r.file)
	if code != 1 || !regexp.MustCompile(`ingest log readings/0 starts at offset \d+, but no checkpoint restores`).MatchString(stderr) ||
		!strings.Contains(stderr, "--accept-state-loss") || strings.Contains(stderr, "rebuilt by replaying") {
		t.Fatalf("start on a trimmed log without a store: exit %d\n%s", code, stderr)
	}
	p := startAgent(t, r.bin, r.file, "--accept-state-loss")
	p.Await(t, regexp.MustCompile(`msg="accepting lost state"`), time.Minute)
	if err := p.Stop(time.Minute); err != nil {
		t.Fatal(err)
	}
}

// TestOthersStoreIsRefused (issue 41, finding 4): a checkpoints.db that
// belongs to nobody and that others may write is refused at start, with
// the one message of datadir.CheckOwner, and left as it is.
func TestOthersStoreIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another user needs root")
	}
	r := newForeignRun(t)
	r.checkpointed(t)
	store := filepath.Join(r.data, "checkpoints.db")
	before, _ := os.ReadFile(store)
	if err := os.Chown(store, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(store, 0o666); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cairntest.Run(t, r.bin, "run", "-c", r.file)
	if code != 1 || !strings.Contains(stderr, store+" belongs to uid 65534 and has mode -rw-rw-rw-") {
		t.Fatalf("start on nobody's checkpoints.db: exit %d\n%s", code, stderr)
	}
	if after, _ := os.ReadFile(store); !bytes.Equal(after, before) {
		t.Fatal("the refused store changed")
	}
	os.Chown(store, 0, 0)
	os.Chmod(store, 0o600)
	r.checkpointed(t)
}

// TestUnreadableStoreAndMarkAreSetAside (issue 41, item 7's cases): with
// checkpoints.db and checkpoint-id both overwritten with other bytes,
// each is set aside byte for byte (the mark was written over in place
// before), and as nothing shows checkpoints were taken, the start says
// that the state was rebuilt from the log, which holds everything.
func TestUnreadableStoreAndMarkAreSetAside(t *testing.T) {
	r := newForeignRun(t)
	r.logMessages(t, 100, 0, 0)
	r.checkpointed(t)
	store, mark := filepath.Join(r.data, "checkpoints.db"), filepath.Join(r.data, "checkpoint-id")
	junk := map[string][]byte{store: bytes.Repeat([]byte("not cairn's "), 2000), mark: []byte("not a checkpoint id mark")}
	for path, b := range junk {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := startAgent(t, r.bin, r.file)
	p.Await(t, regexp.MustCompile(`level=ERROR msg="checkpoint id mark unreadable: it is set aside untouched`), time.Minute)
	p.Await(t, regexp.MustCompile(`level=WARN msg="no checkpoint store and no checkpoint id mark, but an ingest log that holds every message from offset 1`), time.Minute)
	cairntest.AwaitStatus(t, filepath.Join(r.data, "cairn.sock"), "the log replayed", time.Minute, func(st api.Status) bool {
		return st.Rebuilt != "" && st.RecordsOut("readings") == 100
	})
	if err := p.Stop(time.Minute); err != nil {
		t.Fatal(err)
	}
	for path, b := range junk {
		if aside, err := os.ReadFile(path + ".damaged-1"); err != nil || !bytes.Equal(aside, b) {
			t.Errorf("%s set aside: %q (%v), want the bytes put there", path, aside, err)
		}
	}
}

// TestRootReadsAnotherUsersStoppedAgent: the owner rule is about what the
// agent writes, not what others read. With a stopped agent's data
// directory all another user's (the .deb's `cairn`), root's `cairn
// deadletters` lists its dead letters and `cairn checkpoints` its
// checkpoints, creating, mending and changing nothing there (a file
// root made would be another user's to the agent, which would refuse
// it); root's `cairn run` is refused, naming the owner.
func TestRootReadsAnotherUsersStoppedAgent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another user needs root")
	}
	r := newForeignRun(t)
	logs, err := ingest.OpenLogs(ingest.Dir(r.data), ingest.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := logs.Log("readings/0")
	if err == nil {
		_, err = l.Append([]ingest.Message{{Topic: "in/d1", Payload: []byte("not json"), Received: time.Now()}})
	}
	if err := errors.Join(err, logs.Close()); err != nil {
		t.Fatal(err)
	}
	r.checkpointed(t)
	if err := filepath.Walk(r.data, func(p string, _ os.FileInfo, err error) error {
		return errors.Join(err, os.Lchown(p, 65534, 65534))
	}); err != nil {
		t.Fatal(err)
	}
	before := treeOf(t, r.data)
	code, stdout, stderr := cairntest.Run(t, r.bin, "deadletters", "-c", r.file)
	if code != 0 || !strings.Contains(stdout, "readings/0 in/d1 @1") || !strings.Contains(stdout, "not json") {
		t.Fatalf("root's cairn deadletters on nobody's data directory: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := cairntest.Run(t, r.bin, "checkpoints", "-c", r.file); code != 0 || !strings.Contains(stdout, "aligned") {
		t.Fatalf("root's cairn checkpoints on nobody's data directory: exit %d\n%s%s", code, stdout, stderr)
	}
	if after := treeOf(t, r.data); after != before {
		t.Fatalf("reading changed the data directory:\n%s\nwas\n%s", after, before)
	}
	code, _, stderr = cairntest.Run(t, r.bin, "run", "-c", r.file)
	if code != 1 || !strings.Contains(stderr, "belongs to uid 65534") {
		t.Fatalf("root's cairn run on nobody's data directory: exit %d\n%s", code, stderr)
	}
}

// treeOf describes every entry under dir, a line each: its name, owner,
// mode, size and modification time.
func treeOf(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	if err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		uid := -1
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid = int(st.Uid)
		}
		fmt.Fprintf(&b, "%s uid=%d %v %d %d\n", p, uid, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestForeignNewestSegmentIsSetAside (issue 41, item 2, the ingest log):
// bytes that are no segment put as the newest segment of an ingest log
// (after all its records) are set aside, byte for byte, as
// NAME.damaged-1, and the start says where and goes on from the
// checkpoint; the next start, with the file set aside still there, runs
// too.
func TestForeignNewestSegmentIsSetAside(t *testing.T) {
	r := newForeignRun(t)
	r.logMessages(t, 100, 0, 0)
	r.checkpointed(t)
	logs, err := ingest.OpenLogs(ingest.Dir(r.data), ingest.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := logs.Log("readings/0")
	if err != nil {
		t.Fatal(err)
	}
	next := l.Next()
	if err := logs.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(ingest.Dir(r.data), "log-*", "*.seg"))
	if len(segs) == 0 {
		t.Fatal("the log has no segment")
	}
	newest := filepath.Join(filepath.Dir(segs[0]), fmt.Sprintf("%020d.seg", next))
	foreign := bytes.Repeat([]byte("not a segment of cairn's "), 400)
	if err := os.WriteFile(newest, foreign, 0o600); err != nil {
		t.Fatal(err)
	}
	for run := range 2 {
		p := startAgent(t, r.bin, r.file)
		st := cairntest.AwaitStatus(t, filepath.Join(r.data, "cairn.sock"), "running", time.Minute, func(st api.Status) bool {
			return st.State == "running"
		})
		if st.RestoredFrom == nil {
			t.Fatalf("run %d: not restored from a checkpoint:\n%s", run, p.Log())
		}
		if err := p.Stop(time.Minute); err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, p.Log())
		}
		said := strings.Contains(p.Log(), `level=WARN msg="a log segment whose header does not verify, with no record after it that does, `+
			`holds bytes a power cut does not leave: it is set aside untouched" segment=`+newest+" ")
		if said != (run == 0) || said && !strings.Contains(p.Log(), "aside="+newest+".damaged-1") {
			t.Fatalf("run %d: the set-aside said %v, want %v, naming where it went:\n%s", run, said, run == 0, p.Log())
		}
		if _, err := os.Lstat(newest); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("run %d: the foreign segment is still there: %v", run, err)
		}
		if aside, err := os.ReadFile(newest + ".damaged-1"); err != nil || !bytes.Equal(aside, foreign) {
			t.Fatalf("run %d: set aside as %d bytes (%v), want the %d put there", run, len(aside), err, len(foreign))
		}
	}
}
