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
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/internal/s3test"
	"github.com/cairn-edge/cairn/remote"
)

// These tests run the real binary against a real S3-compatible server
// (versitygw, internal/s3test) on loopback.

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

// remoteAgent is a running agent whose every log line is kept.
type remoteAgent struct {
	*agentProc
	mu    sync.Mutex
	all   []string
	read  int // lines await has looked at
	ended chan struct{}
}

func startRemoteAgent(t *testing.T, bin, config string) *remoteAgent {
	t.Helper()
	a := &remoteAgent{agentProc: startAgent(t, bin, config), ended: make(chan struct{})}
	go func() {
		defer close(a.ended)
		for line := range a.lines {
			a.mu.Lock()
			a.all = append(a.all, line)
			a.mu.Unlock()
		}
	}()
	return a
}

// await returns the submatches of the first line after the last awaited
// one that matches re.
func (a *remoteAgent) await(t *testing.T, re *regexp.Regexp, d time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		a.mu.Lock()
		for ; a.read < len(a.all); a.read++ {
			if m := re.FindStringSubmatch(a.all[a.read]); m != nil {
				a.read++
				a.mu.Unlock()
				return m
			}
		}
		a.mu.Unlock()
		select {
		case <-a.ended:
			t.Fatalf("the agent exited before logging %v:\n%s", re, a.log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line matching %v after %v:\n%s", re, d, a.log())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (a *remoteAgent) log() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.Join(a.all, "\n")
}

// stop sends sig and waits for the process and its last log line; after
// SIGTERM, the agent must exit with status 0.
func (a *remoteAgent) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	a.cmd.Process.Signal(sig)
	if sig != syscall.SIGTERM {
		a.cmd.Wait()
		<-a.ended
		return
	}
	a.wait(t)
}

// wait waits for the process to exit with status 0, and for its last log
// line.
func (a *remoteAgent) wait(t *testing.T) {
	t.Helper()
	if err := a.cmd.Wait(); err != nil {
		<-a.ended
		t.Fatalf("the agent exited with %v:\n%s", err, a.log())
	}
	<-a.ended
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

// pollUntil polls cond until it holds, failing after d.
func pollUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	pollUntil(t, 30*time.Second, fmt.Sprintf("no checkpoint after %d was uploaded and could be read", after), func() bool {
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
// operator has seen one, then count readings of devices d0..d9. It returns
// the sums the state must hold.
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
	pollUntil(t, 30*time.Second, "the agent never received a probe", func() bool {
		pub("probe", 0)
		st := remoteStatus(t, bin, dataDir)
		for _, op := range st.Operators {
			for _, s := range op.Subtasks {
				if op.ID == "total" && s.RecordsIn > 0 {
					return true
				}
			}
		}
		return false
	})
	want := map[string]float64{"probe": 0}
	for i := range count {
		device := fmt.Sprintf("d%d", i%10)
		v := float64(i%7) + 0.5
		pub(device, v)
		want[device] += v
	}
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
	bin := buildCairn(t)
	env := newS3Env(t)
	devA := env.device(t, "gw-a")
	dir := t.TempDir()
	dataA := filepath.Join(dir, "a")
	portA := freePort(t)
	configA := filepath.Join(dir, "a.yaml")
	os.WriteFile(configA, []byte(fmt.Sprintf(remoteConfig, dataA, portA, env.srv.Endpoint, "gw-a", "", env.secretFile, env.caFile)), 0o600)
	var logs []string

	// 1. Device A runs and uploads.
	a := startRemoteAgent(t, bin, configA)
	a.await(t, regexp.MustCompile(`msg="remote upload on" remote="endpoint=`+regexp.QuoteMeta(env.srv.Endpoint)+`.* tls=true"`), 30*time.Second)
	a.await(t, completeLine, 30*time.Second)
	want := feed(t, bin, dataA, portA, 500)
	var uploaded *checkpoint.Manifest
	pollUntil(t, 60*time.Second, "no uploaded checkpoint holds every reading", func() bool {
		if uploaded = newest(t, devA); uploaded == nil {
			return false
		}
		got, ok := sums(t, devA, uploaded)
		return ok && maps.Equal(got, want)
	})
	pollUntil(t, 30*time.Second, "the status shows no uploaded checkpoint", func() bool {
		for _, c := range remoteStatus(t, bin, dataA).History {
			if c.Upload == "uploaded" {
				return true
			}
		}
		return false
	})
	// Retention: at most 3 manifests of gw-a stay in the bucket.
	pollUntil(t, 30*time.Second, "remote retention keeps more than 3 checkpoints", func() bool {
		return len(env.srv.Keys(t, "cairn", "fleet/gw-a/checkpoints/")) <= 3
	})
	a.stop(t, syscall.SIGKILL)
	logs = append(logs, a.log())

	// 2. The disk is lost: A restarts from the newest uploaded checkpoint.
	last := newest(t, devA)
	if err := os.RemoveAll(dataA); err != nil {
		t.Fatal(err)
	}
	a = startRemoteAgent(t, bin, configA)
	if m := a.await(t, remoteRestoreLine, 30*time.Second); m[1] != "gw-a" || m[2] != fmt.Sprint(last.ID) {
		t.Fatalf("restoring from remote: %q, want gw-a's newest, %d", m[0], last.ID)
	}
	if id := a.await(t, restoreLine, 30*time.Second)[1]; id != fmt.Sprint(last.ID) {
		t.Fatalf("restored checkpoint %s, want %d", id, last.ID)
	}
	var next uint64
	fmt.Sscan(a.await(t, completeLine, 30*time.Second)[1], &next)
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
	a.cmd.Process.Signal(syscall.SIGTERM)
	var final uint64
	fmt.Sscan(a.await(t, finalLine, 30*time.Second)[1], &final)
	a.wait(t)
	logs = append(logs, a.log())
	if m := newest(t, devA); m.ID != final {
		t.Fatalf("newest uploaded checkpoint %d, want the final one, %d:\n%s", m.ID, final, a.log())
	}
	// Stopped, the agent's checkpoints say what remote storage holds.
	if out, err := exec.Command(bin, "checkpoints", "-c", configA).Output(); err != nil ||
		!regexp.MustCompile(fmt.Sprintf(`(?m)^%d\s.*\s{2}uploaded$`, final)).Match(out) {
		t.Fatalf("cairn checkpoints of the stopped agent: %v\n%s", err, out)
	}

	// 3. A flipped bit in the newest uploaded checkpoint: skipped, and so is
	// every older one that shares the damaged blob (a subtask whose state
	// did not change names the blob it stored before); the newest one that
	// does not is restored.
	ms, err := devA.Completed()
	if err != nil || len(ms) < 2 {
		t.Fatalf("uploaded checkpoints: %v, %v", ms, err)
	}
	damaged := ms[0].Subtask(checkpoint.TaskID{Operator: "total", Subtask: 1}).State
	intact := slices.IndexFunc(ms, func(m *checkpoint.Manifest) bool {
		return !slices.ContainsFunc(m.Subtasks, func(a checkpoint.Ack) bool {
			return slices.ContainsFunc(a.Handles(), func(h checkpoint.StateHandle) bool { return h.Key == damaged.Key })
		})
	})
	if intact < 0 {
		t.Fatalf("every uploaded checkpoint holds %s", damaged.Key)
	}
	env.srv.FlipBit(t, "cairn", "fleet/gw-a/state/"+damaged.Key)
	os.RemoveAll(dataA)
	a = startRemoteAgent(t, bin, configA)
	skip := a.await(t, skippedLine, 30*time.Second)
	if skip[1] != fmt.Sprint(ms[0].ID) || skip[2] != "fleet/gw-a/state/"+damaged.Key {
		t.Fatalf("skipped %s for %s, want %d for %s", skip[1], skip[2], ms[0].ID, damaged.Key)
	}
	if id := a.await(t, restoreLine, 30*time.Second)[1]; id != fmt.Sprint(ms[intact].ID) {
		t.Fatalf("after the damaged %d, restored %s, want %d", ms[0].ID, id, ms[intact].ID)
	}
	a.await(t, completeLine, 30*time.Second)
	if st := remoteStatus(t, bin, dataA); st.RestoredFrom == nil || st.RestoredFrom.Source != "remote" || st.RestoredFrom.ID != ms[intact].ID {
		t.Fatalf("restored_from = %+v, want remote %d", st.RestoredFrom, ms[intact].ID)
	}
	if _, got := newestSums(t, devA, ms[0].ID); !maps.Equal(got, want) {
		t.Fatalf("state after the fallback:\n%v\nwant\n%v", got, want)
	}
	a.stop(t, syscall.SIGTERM)
	logs = append(logs, a.log())

	// 4. A replacement device, with its own data directory and name,
	// restores gw-a's newest checkpoint and uploads as gw-b.
	aLast := newest(t, devA)
	dataB := filepath.Join(dir, "b")
	configB := filepath.Join(dir, "b.yaml")
	portB := freePort(t)
	os.WriteFile(configB, []byte(fmt.Sprintf(remoteConfig, dataB, portB, env.srv.Endpoint, "gw-b", "gw-a", env.secretFile, env.caFile)), 0o600)
	b := startRemoteAgent(t, bin, configB)
	if m := b.await(t, remoteRestoreLine, 30*time.Second); m[1] != "gw-a" || m[2] != fmt.Sprint(aLast.ID) {
		t.Fatalf("replacement: %q, want gw-a's %d", m[0], aLast.ID)
	}
	if id := b.await(t, restoreLine, 30*time.Second)[1]; id != fmt.Sprint(aLast.ID) {
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
	pollUntil(t, 60*time.Second, "no checkpoint of gw-b holds its own input", func() bool {
		m := newest(t, devB)
		got, ok := sums(t, devB, m)
		return ok && maps.Equal(got, more)
	})
	b.cmd.Process.Signal(syscall.SIGTERM)
	var bFinal uint64
	fmt.Sscan(b.await(t, finalLine, 30*time.Second)[1], &bFinal)
	b.wait(t)
	logs = append(logs, b.log())
	if err := os.RemoveAll(dataB); err != nil {
		t.Fatal(err)
	}
	b = startRemoteAgent(t, bin, configB)
	if m := b.await(t, remoteRestoreLine, 30*time.Second); m[1] != "gw-b" || m[2] != fmt.Sprint(bFinal) {
		t.Fatalf("replacement after losing its disk: %q, want its own newest, %d", m[0], bFinal)
	}
	if m, got := newestSums(t, devB, bFinal); !maps.Equal(got, more) {
		t.Fatalf("gw-b's checkpoint %d after restoring its own %d holds %v, want %v", m.ID, bFinal, got, more)
	}
	b.stop(t, syscall.SIGTERM)
	logs = append(logs, b.log())

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
	bin := buildCairn(t)
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
	a := startRemoteAgent(t, bin, config)
	control := startRemoteAgent(t, bin, local)
	dev := env.device(t, "gw-h")
	pollUntil(t, 30*time.Second, "nothing uploaded", func() bool { return newest(t, dev) != nil })
	control.await(t, completeLine, 30*time.Second)

	// completions counts each agent's "checkpoint complete" lines over d.
	completions := func(d time.Duration) (n [2]int) {
		agents := [2]*remoteAgent{a, control}
		for _, p := range agents {
			p.mu.Lock()
			p.read = len(p.all)
			p.mu.Unlock()
		}
		time.Sleep(d) // a measurement window, not a synchronisation
		for i, p := range agents {
			p.mu.Lock()
			for _, l := range p.all[p.read:] {
				if completeLine.MatchString(l) {
					n[i]++
				}
			}
			p.read = len(p.all)
			p.mu.Unlock()
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
			t.Fatalf("%s, %d checkpoints completed in 5s with upload, %d without:\n%s", []string{"over a slow link", "while the storage hung"}[i], n[0], n[1], a.log())
		}
	}
	control.stop(t, syscall.SIGTERM)
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
	what := a.await(t, regexp.MustCompile(`msg="remote (upload|retention) works again"`), 60*time.Second)[1]
	hung := newest(t, dev).ID
	pollUntil(t, 30*time.Second, "uploads did not resume:\n"+a.log(), func() bool { return newest(t, dev).ID > hung })
	a.stop(t, syscall.SIGTERM)
	if !slices.ContainsFunc(strings.Split(a.log(), "\n"), func(l string) bool { return strings.Contains(l, "remote "+what+" failed") }) {
		t.Fatalf("%s works again, but its failure was not logged:\n%s", what, a.log())
	}
}
