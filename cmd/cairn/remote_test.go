package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/s3test"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
	"github.com/cairn-edge/cairn/remote"
)

// These tests run the real binary against a real S3-compatible server
// (versitygw, internal/testing/s3test) on loopback.

const remoteConfig = `agent:
  data_dir: %s
brokers:
  local:
    embedded: true
    listen: 127.0.0.1:%d
checkpoints:
  interval: 100ms
  incremental: true
  max_chain: 4
sources:
  - id: readings
    broker: local
    topics: ["e2e/{device}/t"]
    key: device
    value: v
operators:
  - id: total
    type: sum
    inputs: [readings]
    key_by: key
    parallelism: 2
remote:
  endpoint: %s
  bucket: cairn
  prefix: fleet
  device: %s
  restore_from_device: %s
  access_key: ${CAIRN_E2E_S3_ACCESS}
  secret_key_file: %s
  tls: true
  ca_file: %s
  retained: 3
  timeout: 2s
`

// stopAgent sends SIGTERM to the agent, which takes a final checkpoint
// (and uploads it) and must exit with status 0, and waits for it.
func stopAgent(t *testing.T, a *cairntest.Proc) {
	t.Helper()
	a.Signal(syscall.SIGTERM)
	if err := a.Wait(); err != nil {
		t.Fatalf("the agent exited with %v:\n%s", err, a.Log())
	}
}

// status runs cairn status --json against dataDir.
func remoteStatus(t *testing.T, bin, dataDir string) api.Status {
	t.Helper()
	out, err := exec.Command(bin, "status", "--json", "--data-dir", dataDir).Output()
	if err != nil {
		t.Fatalf("cairn status: %v", err)
	}
	var st api.Status
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status is not JSON: %v\n%s", err, out)
	}
	return st
}

// s3Env is a bucket on a fresh server, over TLS, and the credentials for
// it: the access key in the environment, the secret key in a file.
type s3Env struct {
	srv        *s3test.Server
	secretFile string
	caFile     string
}

func newS3Env(t *testing.T) s3Env {
	srv, ca := s3test.StartTLS(t)
	srv.Bucket(t, "cairn")
	t.Setenv("CAIRN_E2E_S3_ACCESS", s3test.AccessKey)
	secret := filepath.Join(t.TempDir(), "s3.secret")
	if err := os.WriteFile(secret, []byte(s3test.SecretKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return s3Env{srv: srv, secretFile: secret, caFile: ca}
}

func (e s3Env) device(t *testing.T, name string) *remote.Device {
	r, err := remote.Open(remote.Config{Endpoint: e.srv.Endpoint, Bucket: "cairn", Prefix: "fleet", AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey,
		TLS: true, CAFile: e.caFile})
	if err != nil {
		t.Fatal(err)
	}
	d, err := r.Device(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// sums decodes the keyed state of operator total in checkpoint m.
func sums(t *testing.T, dev *remote.Device, m *checkpoint.Manifest) (map[string]float64, bool) {
	t.Helper()
	out := make(map[string]float64)
	for _, a := range m.Subtasks {
		if a.Task.Operator != "total" {
			continue
		}
		var links []*graph.SubtaskSnapshot
		for _, h := range a.Handles() {
			data, err := dev.ReadState(h)
			if err != nil {
				t.Logf("reading checkpoint %d: %v", m.ID, err)
				return nil, false
			}
			snap, err := graph.DecodeSubtaskSnapshot(data, graph.KeyGroupRange{Start: 0, End: graph.DefaultMaxParallelism})
			if err != nil {
				t.Fatal(err)
			}
			links = append(links, snap)
		}
		snap, err := graph.MergeChain(links)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range snap.Groups {
			for _, tab := range g.Tables {
				for i, k := range tab.Keys {
					v, err := graph.Float64Codec{}.Decode(tab.Values[i])
					if err != nil {
						t.Fatal(err)
					}
					out[k] = v
				}
			}
		}
	}
	return out, true
}

// newestSums waits until dev's newest uploaded checkpoint is newer than
// after and can be read, and returns it and its sums.
func newestSums(t *testing.T, dev *remote.Device, after uint64) (*checkpoint.Manifest, map[string]float64) {
	t.Helper()
	var m *checkpoint.Manifest
	var got map[string]float64
	testwait.For(t, 30*time.Second, fmt.Sprintf("a checkpoint after %d uploaded and readable", after), func() bool {
		var ok bool
		if m = newest(t, dev); m == nil || m.ID <= after {
			return false
		}
		got, ok = sums(t, dev, m)
		return ok
	})
	return m, got
}

// newest returns the newest uploaded checkpoint of dev that verifies.
func newest(t *testing.T, dev *remote.Device) *checkpoint.Manifest {
	t.Helper()
	ms, err := dev.Completed()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		return nil
	}
	return ms[0]
}

// feed publishes readings to the agent's embedded broker once its
// subscription is live: probes of value 0 (key "probe") until the sum
// operator has seen one, then count readings of devices d0..d9, and waits
// until the source has read them. It returns the sums the state must hold.
func feed(t *testing.T, bin, dataDir string, port, count int) map[string]float64 {
	t.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker(fmt.Sprintf("tcp://127.0.0.1:%d", port)).SetClientID("e2e-feeder"))
	if tok := c.Connect(); tok.Wait() && tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	defer c.Disconnect(100)
	pub := func(device string, v float64) {
		if tok := c.Publish("e2e/"+device+"/t", 1, false, fmt.Sprintf(`{"v": %g}`, v)); tok.Wait() && tok.Error() != nil {
			t.Fatal(tok.Error())
		}
	}
	var read int64 // what the source had read when the probe was seen
	testwait.For(t, 30*time.Second, "the agent to receive a probe", func() bool {
		pub("probe", 0)
		st := remoteStatus(t, bin, dataDir)
		read = st.RecordsOut("readings")
		for _, op := range st.Operators {
			for _, s := range op.Subtasks {
				if op.ID == "total" && s.RecordsIn > 0 {
					return true
				}
			}
		}
		return false
	})
	// All at once, then every acknowledgement: the embedded broker
	// acknowledges a reading once the ingest log has synced it, and a
	// sync for each, one after another, takes minutes under qemu.
	want := map[string]float64{"probe": 0}
	toks := make([]paho.Token, 0, count)
	for i := range count {
		device := fmt.Sprintf("d%d", i%10)
		v := float64(i%7) + 0.5
		toks = append(toks, c.Publish("e2e/"+device+"/t", 1, false, fmt.Sprintf(`{"v": %g}`, v)))
		want[device] += v
	}
	for i, tok := range toks {
		if !tok.WaitTimeout(time.Minute) || tok.Error() != nil {
			t.Fatalf("reading %d not acknowledged within a minute: %v", i, tok.Error())
		}
	}
	testwait.For(t, 30*time.Second, "the source to read the readings", func() bool {
		return remoteStatus(t, bin, dataDir).RecordsOut("readings") >= read+int64(count)
	})
	return want
}

var (
	remoteRestoreLine = regexp.MustCompile(`msg="no local checkpoint to restore; restoring from remote storage" device=(\S+) newest=(\d+)`)
	skippedLine       = regexp.MustCompile(`msg="checkpoint cannot be restored; trying an older one" id=(\d+) err=.*(fleet/gw-a/state/[^:\s"]+).*checksum`)
)

// TestRemoteRestore: an agent uploads its checkpoints; its data directory
// is deleted and it restarts from the newest uploaded checkpoint, with
// exactly the uploaded state; a flipped bit in the newest one makes it fall
// back to the one before; a replacement device restores the first one's
// checkpoint by naming it, and after losing its own disk restores its own
// newer uploads. No log line holds the credentials.
func TestRemoteRestore(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	env := newS3Env(t)
	devA := env.device(t, "gw-a")
	dir := t.TempDir()
	dataA := filepath.Join(dir, "a")
	portA := freePort(t)
	configA := filepath.Join(dir, "a.yaml")
	os.WriteFile(configA, []byte(fmt.Sprintf(remoteConfig, dataA, portA, env.srv.Endpoint, "gw-a", "", env.secretFile, env.caFile)), 0o600)
	var logs []string

	// 1. Device A runs and uploads.
	a := startAgent(t, bin, configA)
	a.Await(t, regexp.MustCompile(`msg="remote upload on" remote="endpoint=`+regexp.QuoteMeta(env.srv.Endpoint)+`.* tls=true"`), 30*time.Second)
	a.Await(t, completeLine, 30*time.Second)
	want := feed(t, bin, dataA, portA, 500)
	var uploaded *checkpoint.Manifest
	testwait.For(t, 60*time.Second, "an uploaded checkpoint that holds every reading", func() bool {
		if uploaded = newest(t, devA); uploaded == nil {
			return false
		}
		got, ok := sums(t, devA, uploaded)
		return ok && maps.Equal(got, want)
	})
	testwait.For(t, 30*time.Second, "the status to show an uploaded checkpoint", func() bool {
		for _, c := range remoteStatus(t, bin, dataA).History {
			if c.Upload == "uploaded" {
				return true
			}
		}
		return false
	})
	// Retention: at most 3 manifests of gw-a stay in the bucket.
	testwait.For(t, 30*time.Second, "remote retention to keep at most 3 checkpoints", func() bool {
		return len(env.srv.Keys(t, "cairn", "fleet/gw-a/checkpoints/")) <= 3
	})
	a.Kill()
	logs = append(logs, a.Log())

	// 2. The disk is lost: A restarts from the newest uploaded checkpoint.
	last := newest(t, devA)
	if err := os.RemoveAll(dataA); err != nil {
		t.Fatal(err)
	}
	a = startAgent(t, bin, configA)
	if m := a.Await(t, remoteRestoreLine, 30*time.Second); m[1] != "gw-a" || m[2] != fmt.Sprint(last.ID) {
		t.Fatalf("restoring from remote: %q, want gw-a's newest, %d", m[0], last.ID)
	}
	if id := a.Await(t, restoreLine, 30*time.Second)[1]; id != fmt.Sprint(last.ID) {
		t.Fatalf("restored checkpoint %s, want %d", id, last.ID)
	}
	var next uint64
	fmt.Sscan(a.Await(t, completeLine, 30*time.Second)[1], &next)
	if next <= last.ID {
		t.Fatalf("checkpoint %d after restoring %d: ids must go on increasing", next, last.ID)
	}
	st := remoteStatus(t, bin, dataA)
	if st.RestoredFrom == nil || st.RestoredFrom.Source != "remote" || st.RestoredFrom.ID != last.ID {
		t.Fatalf("restored_from = %+v, want remote %d", st.RestoredFrom, last.ID)
	}
	// The state is exactly the uploaded one: the next checkpoints (no new
	// input) hold the same sums, and they upload.
	if _, got := newestSums(t, devA, last.ID); !maps.Equal(got, want) {
		t.Fatalf("state after the remote restore:\n%v\nwant\n%v", got, want)
	}
	// SIGTERM: the final checkpoint is uploaded before the agent exits.
	a.Signal(syscall.SIGTERM)
	var final uint64
	fmt.Sscan(a.Await(t, finalLine, 30*time.Second)[1], &final)
	if err := a.Wait(); err != nil {
		t.Fatalf("after SIGTERM the agent exited with %v:\n%s", err, a.Log())
	}
	logs = append(logs, a.Log())
	if m := newest(t, devA); m.ID != final {
		t.Fatalf("newest uploaded checkpoint %d, want the final one, %d:\n%s", m.ID, final, a.Log())
	}
	// Stopped, the agent's checkpoints say what remote storage holds.
	if out, err := exec.Command(bin, "checkpoints", "-c", configA).Output(); err != nil ||
		!regexp.MustCompile(fmt.Sprintf(`(?m)^%d\s.*\s{2}uploaded$`, final)).Match(out) {
		t.Fatalf("cairn checkpoints of the stopped agent: %v\n%s", err, out)
	}

	// 3. A flipped bit in the newest uploaded checkpoint: skipped, and so is
	// every older one that shares the damaged blob (a subtask whose state
	// did not change names the blob it stored before); the newest one that
	// does not is restored. The blob flipped is a subtask's own of the
	// newest that the oldest retained does not hold: which blobs the
	// retained share depends on how many checkpoints with something to
	// store the restarted agent took before its stop (after a restore, a
	// whole snapshot, an empty increment on it, the source's state), and
	// so on the pace of the machine.
	ms, err := devA.Completed()
	if err != nil || len(ms) < 2 {
		t.Fatalf("uploaded checkpoints: %v, %v", ms, err)
	}
	holds := func(m *checkpoint.Manifest, key string) bool {
		return slices.ContainsFunc(m.Subtasks, func(a checkpoint.Ack) bool {
			return slices.ContainsFunc(a.Handles(), func(h checkpoint.StateHandle) bool { return h.Key == key })
		})
	}
	i := slices.IndexFunc(ms[0].Subtasks, func(a checkpoint.Ack) bool { return !holds(ms[len(ms)-1], a.State.Key) })
	if i < 0 {
		t.Fatalf("the oldest retained checkpoint, %d, holds every blob of the newest, %d", ms[len(ms)-1].ID, ms[0].ID)
	}
	damaged := ms[0].Subtasks[i].State
	intact := slices.IndexFunc(ms, func(m *checkpoint.Manifest) bool { return !holds(m, damaged.Key) })
	env.srv.FlipBit(t, "cairn", "fleet/gw-a/state/"+damaged.Key)
	os.RemoveAll(dataA)
	a = startAgent(t, bin, configA)
	skip := a.Await(t, skippedLine, 30*time.Second)
	if skip[1] != fmt.Sprint(ms[0].ID) || skip[2] != "fleet/gw-a/state/"+damaged.Key {
		t.Fatalf("skipped %s for %s, want %d for %s", skip[1], skip[2], ms[0].ID, damaged.Key)
	}
	if id := a.Await(t, restoreLine, 30*time.Second)[1]; id != fmt.Sprint(ms[intact].ID) {
		t.Fatalf("after the damaged %d, restored %s, want %d", ms[0].ID, id, ms[intact].ID)
	}
	a.Await(t, completeLine, 30*time.Second)
	if st := remoteStatus(t, bin, dataA); st.RestoredFrom == nil || st.RestoredFrom.Source != "remote" || st.RestoredFrom.ID != ms[intact].ID {
		t.Fatalf("restored_from = %+v, want remote %d", st.RestoredFrom, ms[intact].ID)
	}
	if _, got := newestSums(t, devA, ms[0].ID); !maps.Equal(got, want) {
		t.Fatalf("state after the fallback:\n%v\nwant\n%v", got, want)
	}
	stopAgent(t, a)
	logs = append(logs, a.Log())

	// 4. A replacement device, with its own data directory and name,
	// restores gw-a's newest checkpoint and uploads as gw-b.
	aLast := newest(t, devA)
	dataB := filepath.Join(dir, "b")
	configB := filepath.Join(dir, "b.yaml")
	portB := freePort(t)
	os.WriteFile(configB, []byte(fmt.Sprintf(remoteConfig, dataB, portB, env.srv.Endpoint, "gw-b", "gw-a", env.secretFile, env.caFile)), 0o600)
	b := startAgent(t, bin, configB)
	if m := b.Await(t, remoteRestoreLine, 30*time.Second); m[1] != "gw-a" || m[2] != fmt.Sprint(aLast.ID) {
		t.Fatalf("replacement: %q, want gw-a's %d", m[0], aLast.ID)
	}
	if id := b.Await(t, restoreLine, 30*time.Second)[1]; id != fmt.Sprint(aLast.ID) {
		t.Fatalf("replacement restored %s, want gw-a's %d", id, aLast.ID)
	}
	devB := env.device(t, "gw-b")
	if m, got := newestSums(t, devB, 0); m.ID <= aLast.ID || !maps.Equal(got, want) {
		t.Fatalf("gw-b's checkpoint %d (after gw-a's %d) holds %v, want %v", m.ID, aLast.ID, got, want)
	}
	if st := remoteStatus(t, bin, dataB); st.RestoredFrom == nil || st.RestoredFrom.Source != "remote" || st.RestoredFrom.ID != aLast.ID {
		t.Fatalf("replacement restored_from = %+v", st.RestoredFrom)
	}
	if m := newest(t, devA); m.ID != aLast.ID {
		t.Fatalf("the replacement touched gw-a's checkpoints: newest %d, was %d", m.ID, aLast.ID)
	}
	// 5. The replacement goes on with input of its own, then loses its
	// disk too: it restores its own newest upload, not gw-a's older one,
	// and keeps it.
	more := feed(t, bin, dataB, portB, 100)
	for k, v := range want {
		more[k] += v
	}
	testwait.For(t, 60*time.Second, "a checkpoint of gw-b that holds its own input", func() bool {
		m := newest(t, devB)
		got, ok := sums(t, devB, m)
		return ok && maps.Equal(got, more)
	})
	b.Signal(syscall.SIGTERM)
	var bFinal uint64
	fmt.Sscan(b.Await(t, finalLine, 30*time.Second)[1], &bFinal)
	if err := b.Wait(); err != nil {
		t.Fatalf("after SIGTERM the agent exited with %v:\n%s", err, b.Log())
	}
	logs = append(logs, b.Log())
	if err := os.RemoveAll(dataB); err != nil {
		t.Fatal(err)
	}
	b = startAgent(t, bin, configB)
	if m := b.Await(t, remoteRestoreLine, 30*time.Second); m[1] != "gw-b" || m[2] != fmt.Sprint(bFinal) {
		t.Fatalf("replacement after losing its disk: %q, want its own newest, %d", m[0], bFinal)
	}
	if m, got := newestSums(t, devB, bFinal); !maps.Equal(got, more) {
		t.Fatalf("gw-b's checkpoint %d after restoring its own %d holds %v, want %v", m.ID, bFinal, got, more)
	}
	stopAgent(t, b)
	logs = append(logs, b.Log())

	all := strings.Join(logs, "\n")
	for _, secret := range []string{s3test.SecretKey, s3test.AccessKey} {
		if strings.Contains(all, secret) {
			t.Fatalf("a credential is in the log:\n%s", all)
		}
	}
	if !strings.Contains(all, "checkpoint complete") {
		t.Fatal("the collected log is empty")
	}
}

// TestRemoteHangDoesNotDelayCheckpoints: with the storage behind a slow
// link (16 KB/s, slower than checkpoints are taken), and then hanging (its
// process stopped), local checkpoints go on completing at the pace (half,
// at least) of the same pipeline without remote upload, run at the same
// time (so that the load of other processes falls on both); uploads fail or
// are skipped, and the status says so; once the storage answers again,
// uploads resume.
func TestRemoteHangDoesNotDelayCheckpoints(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	env := newS3Env(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	sim := strings.Replace(remoteConfig, `  - id: readings
    broker: local
    topics: ["e2e/{device}/t"]
    key: device
    value: v
`, "  - id: readings\n    simulator: {devices: 50, rate: 2000}\n", 1)
	config := filepath.Join(dir, "a.yaml")
	slow := env.srv.Throttle(t, 16<<10)
	os.WriteFile(config, []byte(fmt.Sprintf(sim, data, freePort(t), slow, "gw-h", "", env.secretFile, env.caFile)), 0o600)
	local := filepath.Join(dir, "local.yaml")
	withoutRemote, _, _ := strings.Cut(fmt.Sprintf(sim, filepath.Join(dir, "local"), freePort(t), "", "", "", "", ""), "remote:")
	os.WriteFile(local, []byte(withoutRemote), 0o600)
	a := startAgent(t, bin, config)
	control := startAgent(t, bin, local)
	dev := env.device(t, "gw-h")
	testwait.For(t, 30*time.Second, "an upload", func() bool { return newest(t, dev) != nil })
	control.Await(t, completeLine, 30*time.Second)

	// completions counts each agent's "checkpoint complete" lines over d.
	completions := func(d time.Duration) (n [2]int) {
		agents := [2]*cairntest.Proc{a, control}
		for _, p := range agents {
			p.Skip(nil)
		}
		time.Sleep(d) // a measurement window, not a synchronisation
		for i, p := range agents {
			n[i] = p.Skip(completeLine)
		}
		return n
	}
	// An upload that held checkpoints up would stop them for its 2s
	// request timeout at a time; half the control's pace leaves room for
	// the other processes of a loaded machine.
	before := completions(5 * time.Second)
	env.srv.Pause(t)
	during := completions(5 * time.Second)
	t.Logf("checkpoints completed in 5s, with upload and without: %d and %d with a slow link, %d and %d with the storage hanging",
		before[0], before[1], during[0], during[1])
	for i, n := range [][2]int{before, during} {
		if n[1] < 10 || float64(n[0]) < 0.5*float64(n[1]) {
			t.Fatalf("%s, %d checkpoints completed in 5s with upload, %d without:\n%s", []string{"over a slow link", "while the storage hung"}[i], n[0], n[1], a.Log())
		}
	}
	stopAgent(t, control)
	var failed, skipped int
	for _, c := range remoteStatus(t, bin, data).History {
		switch c.Upload {
		case "failed":
			failed++
			if c.UploadError == "" {
				t.Fatalf("failed upload without a reason: %+v", c)
			}
		case "skipped":
			skipped++
		}
	}
	if failed+skipped == 0 {
		t.Fatal("no upload failed or was skipped while the storage hung")
	}
	// The hang outlasts the 2s request timeout, so whichever request was
	// in flight when it began fails: an upload, or the retention's listing
	// that follows one. Either is logged, and logged as mended once the
	// storage answers.
	env.srv.Resume(t)
	what := a.Await(t, regexp.MustCompile(`msg="remote (upload|retention) works again"`), 60*time.Second)[1]
	hung := newest(t, dev).ID
	if !testwait.Poll(30*time.Second, func() bool { return newest(t, dev).ID > hung }) {
		t.Fatalf("uploads did not resume in 30s:\n%s", a.Log())
	}
	stopAgent(t, a)
	if !slices.ContainsFunc(strings.Split(a.Log(), "\n"), func(l string) bool { return strings.Contains(l, "remote "+what+" failed") }) {
		t.Fatalf("%s works again, but its failure was not logged:\n%s", what, a.Log())
	}
}
