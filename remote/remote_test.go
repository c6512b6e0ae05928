package remote

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/internal/testing/s3test"
	"github.com/cairn-edge/cairn/internal/testing/testlog"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// Every test here runs against a real versitygw (internal/testing/s3test).

const bucket = "cairn"

// fixture is a server with a bucket, a connection to it and a local store
// to upload from.
type fixture struct {
	srv   *s3test.Server
	r     *Remote
	local *checkpoint.MemStore
	log   *testlog.Buffer
}

func newFixture(t *testing.T, prefix string) *fixture {
	srv := s3test.Start(t)
	srv.Bucket(t, bucket)
	r, err := Open(Config{Endpoint: srv.Endpoint, Bucket: bucket, Prefix: prefix,
		AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{srv: srv, r: r, local: checkpoint.NewMemStore(0), log: new(testlog.Buffer)}
}

func (f *fixture) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (f *fixture) uploader(t *testing.T, opts UploadOptions) *Uploader {
	if opts.Device == "" {
		opts.Device = "gw-1"
	}
	opts.Logger = f.logger()
	u, err := NewUploader(f.r, f.local, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close(t.Context()) })
	return u
}

// state stores a blob of size bytes for task of checkpoint id.
func (f *fixture) state(t *testing.T, id uint64, task checkpoint.TaskID, size int) (checkpoint.StateHandle, []byte) {
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(id, uint64(task.Subtask)))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	h, err := f.local.PutState(id, task, slices.Values([][]byte{data}))
	if err != nil {
		t.Fatal(err)
	}
	return h, data
}

var tasks = []checkpoint.TaskID{{Operator: "avg", Subtask: 0}, {Operator: "avg", Subtask: 1}, {Operator: "src", Subtask: 0}}

// complete stores and completes checkpoint id: a whole snapshot per task,
// or, with base, increments on top of base's chains.
func (f *fixture) complete(t *testing.T, id uint64, base *checkpoint.Manifest) *checkpoint.Manifest {
	m := &checkpoint.Manifest{ID: id, Mode: checkpoint.ExactlyOnce}
	for i, task := range tasks {
		h, _ := f.state(t, id, task, 1000+int(id)*10)
		a := checkpoint.Ack{Task: task, ID: id, State: h, Source: task.Operator == "src", Offset: id * 100}
		if base != nil {
			a.Base = base.Subtasks[i].Handles()
		}
		m.Subtasks = append(m.Subtasks, a)
	}
	if err := f.local.Complete(m); err != nil {
		t.Fatal(err)
	}
	return m
}

func awaitState(t *testing.T, u *Uploader, id uint64, status string) {
	t.Helper()
	testwait.For(t, 30*time.Second, fmt.Sprintf("checkpoint %d to be %s", id, status), func() bool {
		s := u.State(id)
		if s.Status == Failed && status != Failed {
			t.Fatalf("upload of checkpoint %d failed: %s", id, s.Err)
		}
		return s.Status == status
	})
}

func TestUploadThenReadBack(t *testing.T) {
	f := newFixture(t, "fleet/a/")
	u := f.uploader(t, UploadOptions{})
	m := f.complete(t, 1, nil)
	if s := u.State(1); s.Status != "" {
		t.Fatalf("state before Upload: %+v", s)
	}
	u.Upload(m)
	awaitState(t, u, 1, Uploaded)

	keys := f.srv.Keys(t, bucket, "")
	want := []string{
		"fleet/a/gw-1/checkpoints/00000000000000000001.json",
		"fleet/a/gw-1/state/1/avg/0", "fleet/a/gw-1/state/1/avg/1", "fleet/a/gw-1/state/1/src/0",
	}
	if !slices.Equal(keys, want) {
		t.Fatalf("bucket holds %q, want %q", keys, want)
	}
	dev, err := f.r.Device("gw-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := dev.Completed()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].ID != 1 || len(ms[0].Subtasks) != 3 || ms[0].Subtasks[2].Offset != 100 {
		t.Fatalf("Completed = %+v", ms)
	}
	for _, a := range ms[0].Subtasks {
		got, err := dev.ReadState(a.State)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := f.local.ReadState(a.State)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s read back differs from what was uploaded", a.State.Key)
		}
	}
	if last, err := dev.LastID(); err != nil || last != 1 {
		t.Fatalf("LastID = %d, %v", last, err)
	}
	if err := dev.Complete(m); err == nil {
		t.Fatal("a Device accepted a write")
	}
	// Another device's area is empty.
	other, _ := f.r.Device("gw-2", nil)
	if ms, err := other.Completed(); err != nil || len(ms) != 0 {
		t.Fatalf("another device's checkpoints: %v, %v", ms, err)
	}
}

// The manifest is the completion record: it goes up after every blob it
// names, so a listing never shows a manifest whose blobs are missing.
func TestManifestUploadedLast(t *testing.T) {
	f := newFixture(t, "")
	// Upload through a slow link, and watch the bucket meanwhile.
	slow, err := Open(Config{Endpoint: f.srv.Throttle(t, 64<<10), Bucket: bucket, AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	f.r = slow
	u := f.uploader(t, UploadOptions{})
	big := &checkpoint.Manifest{ID: 4}
	for _, task := range tasks {
		h, _ := f.state(t, 4, task, 40<<10)
		big.Subtasks = append(big.Subtasks, checkpoint.Ack{Task: task, ID: 4, State: h})
	}
	if err := f.local.Complete(big); err != nil {
		t.Fatal(err)
	}
	u.Upload(big)
	seenBlobs := 0
	testwait.For(t, 30*time.Second, "checkpoint 4's upload to end", func() bool {
		if u.State(4).Status != Pending {
			return true
		}
		keys := f.srv.Keys(t, bucket, "gw-1/")
		blobs := 0
		for _, k := range keys {
			if strings.HasPrefix(k, "gw-1/state/") {
				blobs++
			}
		}
		if slices.Contains(keys, "gw-1/checkpoints/00000000000000000004.json") && blobs < 3 {
			t.Fatalf("the manifest is in the bucket before its blobs: %q", keys)
		}
		seenBlobs = max(seenBlobs, blobs)
		return false
	})
	awaitState(t, u, 4, Uploaded)
	if seenBlobs == 0 {
		t.Fatal("the upload was too fast to watch: no intermediate state seen")
	}
}

// Blobs an incremental chain shares are uploaded once: the base's object
// is not written again when an increment on top of it is uploaded.
func TestChainSharedBlobsUploadedOnce(t *testing.T) {
	f := newFixture(t, "")
	u := f.uploader(t, UploadOptions{Retain: 10})
	m1 := f.complete(t, 1, nil)
	u.Upload(m1)
	awaitState(t, u, 1, Uploaded)
	// Mark the base's objects: a second upload would overwrite the mark.
	for _, task := range tasks {
		f.srv.Put(t, bucket, "gw-1/state/1/"+task.String(), []byte("mark"))
	}
	m2 := f.complete(t, 2, m1)
	m3 := f.complete(t, 3, m2)
	u.Upload(m2)
	u.Upload(m3)
	awaitState(t, u, 3, Uploaded)
	for _, task := range tasks {
		if got := f.srv.Get(t, bucket, "gw-1/state/1/"+task.String()); string(got) != "mark" {
			t.Fatalf("the base blob of %s was uploaded again", task)
		}
		f.srv.Get(t, bucket, "gw-1/state/2/"+task.String()) // there
	}
	if !strings.Contains(f.log.String(), `msg="checkpoint uploaded" id=3 blobs=3 `) {
		t.Fatalf("checkpoint 3 (a chain of three links per task) should have sent only its own three blobs:\n%s", f.log)
	}
}

// Retention keeps the newest Retain uploaded checkpoints and the blobs
// they reference, including an incremental chain's older links, and
// deletes everything else.
func TestRetention(t *testing.T) {
	f := newFixture(t, "p")
	u := f.uploader(t, UploadOptions{Retain: 2})
	var ms []*checkpoint.Manifest
	for id := uint64(1); id <= 4; id++ {
		ms = append(ms, f.complete(t, id, nil))
		u.Upload(ms[id-1])
		awaitState(t, u, id, Uploaded)
	}
	// 5 and 6 are increments on 4: 4's blobs stay while 5 or 6 is kept.
	m5 := f.complete(t, 5, ms[3])
	u.Upload(m5)
	awaitState(t, u, 5, Uploaded)
	m6 := f.complete(t, 6, m5)
	u.Upload(m6)
	awaitState(t, u, 6, Uploaded)
	var want []string
	want = append(want, "p/gw-1/checkpoints/00000000000000000005.json", "p/gw-1/checkpoints/00000000000000000006.json")
	for _, id := range []int{4, 5, 6} {
		for _, task := range tasks {
			want = append(want, fmt.Sprintf("p/gw-1/state/%d/%s", id, task))
		}
	}
	slices.Sort(want)
	testwait.Poll(10*time.Second, func() bool { return slices.Equal(f.srv.Keys(t, bucket, "p/"), want) }) // retention settles
	if got := f.srv.Keys(t, bucket, "p/"); !slices.Equal(got, want) {
		t.Fatalf("after retention the bucket holds\n%q\nwant\n%q", got, want)
	}
	if s := u.State(1); s.Status != Uploaded {
		t.Fatalf("checkpoint 1 was uploaded (then retired), state %+v", s)
	}
	// A new uploader learns what is in the bucket by listing it.
	u2 := f.uploader(t, UploadOptions{Retain: 2})
	testwait.For(t, 10*time.Second, "a new uploader to know checkpoint 6 is uploaded", func() bool { return u2.State(6).Status == Uploaded })
	if s := u2.State(4); s.Status != "" {
		t.Fatalf("checkpoint 4 is no longer in the bucket, state %+v", s)
	}
}

// A damaged blob fails ReadState with checkpoint.ErrCorrupt naming the
// object; a damaged manifest is left out of Completed with a log line.
func TestDamageIsDetected(t *testing.T) {
	f := newFixture(t, "")
	u := f.uploader(t, UploadOptions{Retain: 5})
	m1 := f.complete(t, 1, nil)
	m2 := f.complete(t, 2, nil)
	u.Upload(m1)
	u.Upload(m2)
	awaitState(t, u, 2, Uploaded)
	dev, _ := f.r.Device("gw-1", f.logger())

	f.srv.FlipBit(t, bucket, "gw-1/state/2/avg/1")
	_, err := dev.ReadState(m2.Subtasks[1].State)
	if !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), "gw-1/state/2/avg/1") || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("reading a flipped blob: %v", err)
	}
	f.srv.Put(t, bucket, "gw-1/state/2/avg/0", []byte("short"))
	if _, err := dev.ReadState(m2.Subtasks[0].State); !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), "bytes") {
		t.Fatalf("reading a truncated blob: %v", err)
	}
	if err := f.srv.Client.RemoveObject(t.Context(), bucket, "gw-1/state/2/src/0", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dev.ReadState(m2.Subtasks[2].State); !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("reading a deleted blob: %v", err)
	}

	f.srv.FlipBit(t, bucket, "gw-1/checkpoints/00000000000000000002.json")
	ms, err := dev.Completed()
	if err != nil || len(ms) != 1 || ms[0].ID != 1 {
		t.Fatalf("Completed with a damaged newest manifest: %v, %v", ms, err)
	}
	if !strings.Contains(f.log.String(), "skipping a damaged remote checkpoint manifest") || !strings.Contains(f.log.String(), "id=2") {
		t.Fatalf("no log line for the damaged manifest:\n%s", f.log)
	}
	// LastID still counts the damaged one: ids must not be issued again.
	if last, err := dev.LastID(); err != nil || last != 2 {
		t.Fatalf("LastID = %d, %v", last, err)
	}
}

// Upload never blocks, even when the storage hangs; a backlog is skipped
// in favour of the newest checkpoint, which is uploaded once the storage
// answers again.
func TestHangingStorageNeverBlocksUpload(t *testing.T) {
	f := newFixture(t, "")
	u := f.uploader(t, UploadOptions{Retain: 3})
	m1 := f.complete(t, 1, nil)
	u.Upload(m1)
	awaitState(t, u, 1, Uploaded)

	f.srv.Pause(t)
	var ms []*checkpoint.Manifest
	for id := uint64(2); id <= 41; id++ {
		ms = append(ms, f.complete(t, id, nil))
	}
	var slowest time.Duration
	for _, m := range ms {
		start := time.Now()
		u.Upload(m)
		slowest = max(slowest, time.Since(start))
	}
	// Blocking would mean waiting for the storage's 5s request timeout;
	// a second is for a loaded machine's pauses.
	if slowest > time.Second {
		t.Fatalf("Upload blocked for %v while the storage hung", slowest)
	}
	if !strings.Contains(f.log.String(), `msg="remote upload is behind; skipping to the newest checkpoint"`) {
		t.Fatalf("skipping was not logged:\n%s", f.log)
	}
	skipped := 0
	for id := uint64(2); id <= 41; id++ {
		if s := u.State(id); s.Status == Skipped {
			skipped++
			if !strings.Contains(s.Err, "fell behind") {
				t.Fatalf("state of skipped checkpoint %d: %+v", id, s)
			}
		}
	}
	if skipped < 35 {
		t.Fatalf("%d of 40 checkpoints were skipped while the storage hung", skipped)
	}
	f.srv.Resume(t)
	awaitState(t, u, 41, Uploaded)
	dev, _ := f.r.Device("gw-1", nil)
	if last, _ := dev.LastID(); last != 41 {
		t.Fatalf("the newest uploaded checkpoint is %d, want 41", last)
	}
}

// An unreachable storage fails uploads with a reason, logs it once, and
// says so when it works again.
func TestUnreachableStorage(t *testing.T) {
	f := newFixture(t, "")
	down, err := Open(Config{Endpoint: "127.0.0.1:1", Bucket: bucket, AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	up := f.r
	f.r = down
	u := f.uploader(t, UploadOptions{})
	m1, m2 := f.complete(t, 1, nil), f.complete(t, 2, nil)
	u.Upload(m1)
	awaitState(t, u, 1, Failed)
	u.Upload(m2)
	awaitState(t, u, 2, Failed)
	if s := u.State(1); !strings.Contains(s.Err, "connection refused") {
		t.Fatalf("failure reason: %+v", s)
	}
	if n := strings.Count(f.log.String(), "remote upload failed"); n != 1 {
		t.Fatalf("%d failure lines for two failed uploads, want 1:\n%s", n, f.log)
	}
	if strings.Contains(f.log.String(), s3test.SecretKey) {
		t.Fatal("the secret key is in the log")
	}

	// Wrong credentials: the reason is the server's, the secret is not in it.
	f.r, err = Open(Config{Endpoint: f.srv.Endpoint, Bucket: bucket, AccessKey: s3test.AccessKey, SecretKey: "wrong-" + s3test.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	bad := f.uploader(t, UploadOptions{Device: "gw-2"})
	bad.Upload(m1)
	awaitState(t, bad, 1, Failed)
	if s := bad.State(1); strings.Contains(s.Err, s3test.SecretKey) || !strings.Contains(strings.ToLower(s.Err), "signature") {
		t.Fatalf("failure with a wrong secret: %+v", s)
	}

	f.r = up
	good := f.uploader(t, UploadOptions{Device: "gw-3"})
	good.Upload(m2)
	awaitState(t, good, 2, Uploaded)
}

func TestOpenRefusals(t *testing.T) {
	for cfg, want := range map[Config]string{
		{Endpoint: "https://s3.example:9000", Bucket: "b"}:                                "without a scheme",
		{Endpoint: "s3.example:9000"}:                                                     "no bucket",
		{Endpoint: "s3.example:9000", Bucket: "b", CAFile: "/x.pem"}:                      "needs tls",
		{Endpoint: "s3.example:9000", Bucket: "b", TLS: true, CAFile: "/nonexistent.pem"}: "CA file",
	} {
		if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%v) = %v, want an error about %q", cfg, err, want)
		}
	}
	r, err := Open(Config{Endpoint: "s3.example:9000", Bucket: "b", SecretKey: "hush"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "a/b", " x", "..", `a\b`} {
		if _, err := r.Device(name, nil); err == nil {
			t.Errorf("device name %q accepted", name)
		}
	}
	if s := fmt.Sprint(Config{Endpoint: "e:1", SecretKey: "hush", AccessKey: "who"}); strings.Contains(s, "hush") || strings.Contains(s, "who") {
		t.Errorf("a Config prints its credentials: %s", s)
	}
}

// Over TLS, the server is verified with ca_file's certificates: uploads go
// through with them and fail without them.
func TestTLS(t *testing.T) {
	srv, ca := s3test.StartTLS(t)
	srv.Bucket(t, bucket)
	f := &fixture{srv: srv, local: checkpoint.NewMemStore(0), log: new(testlog.Buffer)}
	var err error
	f.r, err = Open(Config{Endpoint: srv.Endpoint, Bucket: bucket, AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, TLS: true, CAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	u := f.uploader(t, UploadOptions{})
	m := f.complete(t, 1, nil)
	u.Upload(m)
	awaitState(t, u, 1, Uploaded)
	dev, _ := f.r.Device("gw-1", nil)
	if data, err := dev.ReadState(m.Subtasks[0].State); err != nil || int64(len(data)) != m.Subtasks[0].State.Size {
		t.Fatalf("reading back over TLS: %v", err)
	}

	f.r, err = Open(Config{Endpoint: srv.Endpoint, Bucket: bucket, AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	untrusting := f.uploader(t, UploadOptions{Device: "gw-2"})
	untrusting.Upload(m)
	awaitState(t, untrusting, 1, Failed)
	if s := untrusting.State(1); !strings.Contains(s.Err, "certificate") {
		t.Fatalf("without the CA: %+v", s)
	}
	f.r, err = Open(Config{Endpoint: srv.Endpoint, Bucket: bucket, AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	plain := f.uploader(t, UploadOptions{Device: "gw-3"})
	plain.Upload(m)
	awaitState(t, plain, 1, Failed)
}

// An upload slower than the local store keeps a checkpoint still succeeds:
// the uploader reads the checkpoint's blobs before it sends them, so local
// retention cannot delete them under it.
func TestSlowLinkOutlivesLocalRetention(t *testing.T) {
	f := newFixture(t, "")
	var err error
	f.r, err = Open(Config{Endpoint: f.srv.Throttle(t, 8<<10), Bucket: bucket, AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	f.local = checkpoint.NewMemStore(3)
	u := f.uploader(t, UploadOptions{})
	var uploaded *checkpoint.Manifest
	ms := make(map[uint64]*checkpoint.Manifest)
	// Checkpoints come every 50ms until one of them is uploaded.
	id := uint64(0)
	if !testwait.PollEvery(30*time.Second, 50*time.Millisecond, func() bool {
		for done := range id {
			if u.State(done+1).Status == Uploaded {
				uploaded = ms[done+1]
			}
		}
		if uploaded != nil {
			return true
		}
		id++
		ms[id] = f.complete(t, id, nil)
		u.Upload(ms[id])
		return false
	}) {
		t.Fatalf("nothing uploaded in 30s:\n%s", f.log)
	}
	h := uploaded.Subtasks[2].State
	if _, err := f.local.ReadState(h); err == nil {
		t.Fatalf("checkpoint %d is still in the local store: the link was not slower than local retention", uploaded.ID)
	}
	dev, _ := f.r.Device("gw-1", nil)
	if _, err := dev.ReadState(h); err != nil {
		t.Fatalf("checkpoint %d, uploaded after local retention deleted it: %v", uploaded.ID, err)
	}
}
