package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/procfs"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/loopback"
)

func freePort(t testing.TB) int {
	port, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// e2eToken is the control API's token in the tests.
const e2eToken = "c4a1f0e2d3b5a6978877665544332211"

const e2eConfig = `agent:
  data_dir: %s
  memory_limit: 200MiB
  metrics: 127.0.0.1:%d
  api: 127.0.0.1:%d
  api_token_file: %s
brokers:
  local:
    embedded: true
    listen: 127.0.0.1:%d
checkpoints:
  interval: 100ms
sources:
  - id: fleet
    simulator: {devices: 50, rate: 2000, skew: 0.5}
operators:
  - id: avg
    type: window
    inputs: [fleet]
    key_by: key
    parallelism: 2
    window: {kind: tumbling, size: 200ms}
    aggregate: avg
sinks:
  - id: out
    input: avg
    broker: local
    topic: e2e/avg/{key}
`

// startAgent runs `cairn run -c config args...` at log level debug, where
// every checkpoint's completion is logged (completeLine).
func startAgent(t *testing.T, bin, config string, args ...string) *cairntest.Proc {
	t.Helper()
	return cairntest.Start(t, nil, bin, append([]string{"run", "-c", config, "--log-level", "debug"}, args...)...)
}

var (
	completeLine = regexp.MustCompile(`msg="checkpoint complete" id=(\d+)`)
	restoreLine  = regexp.MustCompile(`msg="restoring checkpoint" id=(\d+)`)
	finalLine    = regexp.MustCompile(`msg="final checkpoint complete" id=(\d+)`)
)

// TestAgentCrashRestartInPlace runs the real binary: checkpoints complete,
// a SIGKILL loses nothing that was checkpointed, the restart restores the
// newest checkpoint that `cairn checkpoints` lists, and SIGTERM stops with
// a final checkpoint and exit status 0.
func TestAgentCrashRestartInPlace(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	config := filepath.Join(dir, "pipeline.yaml")
	metricsPort, apiPort := freePort(t), freePort(t)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(e2eToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config, []byte(fmt.Sprintf(e2eConfig, filepath.Join(dir, "data"), metricsPort, apiPort, tokenFile, freePort(t))), 0o600); err != nil {
		t.Fatal(err)
	}

	first := startAgent(t, bin, config)
	var last int
	for last < 5 { // more than the 3 retained
		last, _ = strconv.Atoi(first.Await(t, completeLine, 30*time.Second)[1])
	}
	first.Kill()

	out, err := exec.Command(bin, "checkpoints", "--data-dir", filepath.Join(dir, "data")).CombinedOutput()
	if err != nil {
		t.Fatalf("cairn checkpoints: %v\n%s", err, out)
	}
	rows := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(rows) < 2 || !strings.HasPrefix(rows[0], "ID") {
		t.Fatalf("cairn checkpoints printed:\n%s", out)
	}
	newest := strings.Fields(rows[1])[0]
	// A stopped agent's store lists what it retains, newest first: the
	// checkpoints.retained default, 3, not every one it ever completed.
	if n, _ := strconv.Atoi(newest); len(rows) != 1+3 || n < last || strings.Fields(rows[3])[0] != strconv.Itoa(n-2) {
		t.Fatalf("cairn checkpoints of a stopped agent, whose checkpoint %d completed:\n%s\nwant the 3 retained, newest first", last, out)
	}

	second := startAgent(t, bin, config)
	if got := second.Await(t, restoreLine, 30*time.Second)[1]; got != newest {
		t.Fatalf("restored checkpoint %s, but the newest listed is %s", got, newest)
	}
	var before, after int
	fmt.Sscan(newest, &before)
	fmt.Sscan(second.Await(t, completeLine, 30*time.Second)[1], &after)
	if after <= before {
		t.Fatalf("checkpoint id %d after the restore does not follow %d (ids must increase across restarts)", after, before)
	}
	data := filepath.Join(dir, "data")
	if fi, err := os.Stat(filepath.Join(data, "cairn.sock")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("control socket: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	out, err = exec.Command(bin, "status", "--json", "--data-dir", data).Output()
	if err != nil {
		t.Fatalf("cairn status --json: %v", err)
	}
	var st api.Status
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status is not JSON: %v\n%s", err, out)
	}
	if st.State != "running" || st.RestoredFrom == nil || fmt.Sprint(st.RestoredFrom.ID) != newest || st.RestoredFrom.Source != "local" || len(st.Operators) != 3 {
		t.Fatalf("status after the restart:\n%s", out)
	}
	// Its memory, as the kernel and the Go runtime see it.
	procStatus, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", second.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	var vmRSS int64
	fmt.Sscanf(regexp.MustCompile(`VmRSS:\s+\d+`).FindString(string(procStatus))[len("VmRSS:"):], "%d", &vmRSS)
	if m := st.Memory; m.Resident < vmRSS*1024/2 || m.Resident > vmRSS*1024*2 || m.HeapLive <= 0 || m.HeapGoal < m.HeapLive || m.Limit != 200<<20 {
		t.Fatalf("status memory %+v; the kernel says VmRSS %d kB, the config memory_limit 200MiB", m, vmRSS)
	}
	// What it wrote to its disk: at most what the kernel says it did, its
	// checkpoint store synced and written, and no rate a day yet: seconds
	// of a start say nothing of a day.
	st = cairntest.AwaitStatus(t, filepath.Join(data, "cairn.sock"), "two checkpoints written", 10*time.Second, func(st api.Status) bool {
		for _, f := range st.Disk.Files {
			if f.Name == "checkpoints" && f.Syncs >= 2 {
				return true
			}
		}
		return false
	})
	kernel, err := procfs.WriteBytes(second.Pid())
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]api.DiskFile{}
	for _, f := range st.Disk.Files {
		files[f.Name] = f
	}
	if d := st.Disk; d.WrittenBytes <= 0 || d.WrittenBytes > kernel || d.PerDayBytes != 0 || d.PerDaySpanSeconds != 0 || len(files) != 2 ||
		files["checkpoints"].Syncs < 2 || files["checkpoints"].WrittenBytes < 2*4096 || d.Syncs != files["checkpoints"].Syncs+files["ingest"].Syncs {
		t.Fatalf("status disk %+v; the kernel says the agent wrote %d bytes", d, kernel)
	}
	out, err = exec.Command(bin, "status", "--data-dir", data).Output()
	if err != nil || !regexp.MustCompile(`(?m)^memory: [\d.]+ MB resident; heap [\d.]+ MB live, may grow to [\d.]+ MB; limit 200 MiB$`).Match(out) ||
		!regexp.MustCompile(`(?m)^disk: [\d.]+ MB written, \d+ syncs since the start \(ingest [\d.]+ MB, \d+ syncs; checkpoints [\d.]+ MB, \d+ syncs\); a day's rate once the agent has run 10 minutes$`).Match(out) {
		t.Fatalf("cairn status: %v\n%s", err, out)
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"cairn_checkpoints_completed_total ", `cairn_records_in_total{operator="avg",subtask="1"} `, "# TYPE cairn_dead_letters_total counter", `cairn_records_rejected_total{operator="avg",subtask="0"} 0`, `cairn_sink_messages_published_total{sink="out"} `,
		"\nprocess_resident_memory_bytes ", "\ncairn_heap_live_bytes ", "\ncairn_memory_limit_bytes 209715200\n",
		`cairn_disk_written_bytes_total{file="checkpoints"} `, `cairn_disk_syncs_total{file="ingest"} `, "\n# TYPE cairn_disk_written_bytes_per_day gauge\n"} {
		if !strings.Contains(string(metrics), want) {
			t.Fatalf("metrics lack %q:\n%s", want, metrics)
		}
	}
	// A running agent lists its checkpoints through the control API.
	if out, err := exec.Command(bin, "checkpoints", "--data-dir", data).Output(); err != nil || !strings.HasPrefix(string(out), "ID") {
		t.Fatalf("cairn checkpoints on a running agent: %v\n%s", err, out)
	}
	// The TCP control API wants the bearer token.
	apiURL := fmt.Sprintf("http://127.0.0.1:%d/status", apiPort)
	if resp, err := http.Get(apiURL); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status over TCP without a token: %v %v, want 401", resp, err)
	}
	req, _ := http.NewRequest(http.MethodGet, apiURL, nil)
	req.Header.Set("Authorization", "Bearer "+e2eToken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status over TCP with the token: %v %v, want 200", resp, err)
	}
	// The event stream sends a status at a time.
	req, _ = http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/events", apiPort), nil)
	req.Header.Set("Authorization", "Bearer "+e2eToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	events := bufio.NewScanner(resp.Body)
	for n := 0; n < 2; {
		if !events.Scan() {
			t.Fatalf("the event stream ended: %v", events.Err())
		}
		if line := events.Text(); strings.HasPrefix(line, "data: ") {
			var ev api.Status
			if err := json.Unmarshal([]byte(line[len("data: "):]), &ev); err != nil || ev.State == "" {
				t.Fatalf("bad event %q: %v", line, err)
			}
			n++
		}
	}
	resp.Body.Close()
	out, err = exec.Command(bin, "checkpoint", "--data-dir", data).Output()
	var taken int
	if _, serr := fmt.Sscan(string(out), &taken); err != nil || serr != nil || taken <= before {
		t.Fatalf("cairn checkpoint printed %q (%v); want an id above %d", out, err, before)
	}

	second.Signal(syscall.SIGTERM)
	second.Await(t, finalLine, 30*time.Second)
	if err := second.Wait(); err != nil {
		t.Fatalf("after SIGTERM the agent exited with %v, want 0", err)
	}
	err = exec.Command(bin, "status", "--data-dir", data).Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("status with no agent running: %v, want exit status 3", err)
	}
}

// TestSecondAgentOnADataDir starts a second agent on a running agent's
// data directory, with the same embedded broker address: it must exit at
// once naming the first one's pid, before it starts anything (its broker
// would fail on the address first), and leave the first running.
func TestSecondAgentOnADataDir(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	config := filepath.Join(dir, "pipeline.yaml")
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(e2eToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(e2eConfig, data, freePort(t), freePort(t), tokenFile, freePort(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	first := startAgent(t, bin, config)
	first.Await(t, completeLine, 30*time.Second)
	out, err := exec.Command(bin, "run", "-c", config).CombinedOutput()
	var ee *exec.ExitError
	want := fmt.Sprintf("data directory %s is in use by cairn (pid %d)", data, first.Pid())
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), want) || strings.Contains(string(out), "embedded MQTT broker listening") {
		t.Fatalf("a second agent on the data directory: %v, want exit status 1 and %q before anything starts:\n%s", err, want, out)
	}
	cairntest.AwaitStatus(t, filepath.Join(data, "cairn.sock"), "the first agent still running", 10*time.Second, func(st api.Status) bool { return st.State == "running" })
}

// TestDataDirRemovedUnderTheAgent removes, then replaces, the data
// directory of a running agent: each time the agent must say so and exit
// with status 1 within a few checkpoint intervals, not go on checkpointing
// into deleted files.
func TestDataDirRemovedUnderTheAgent(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	for _, c := range []struct {
		name, want string
		mutate     func(data string) error
	}{
		{"removed", "was removed under the running agent", os.RemoveAll},
		{"replaced", "was replaced under the running agent", func(data string) error {
			// Swapped with an empty one in one step (a rename and a mkdir
			// would leave a moment with none, which is "removed").
			if err := os.Mkdir(data+".new", 0o700); err != nil {
				return err
			}
			return unix.Renameat2(unix.AT_FDCWD, data+".new", unix.AT_FDCWD, data, unix.RENAME_EXCHANGE)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			config := filepath.Join(dir, "pipeline.yaml")
			data := filepath.Join(dir, "data")
			text := fmt.Sprintf("agent:\n  data_dir: %s\ncheckpoints:\n  interval: 200ms\nsources:\n  - id: fleet\n    simulator: {devices: 5, rate: 100}\n"+
				"operators:\n  - id: counts\n    type: count\n    inputs: [fleet]\n    key_by: key\n", data)
			if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			p := startAgent(t, bin, config)
			p.Await(t, completeLine, 30*time.Second)
			if err := c.mutate(data); err != nil {
				t.Fatal(err)
			}
			removed := time.Now()
			line := p.Await(t, regexp.MustCompile(`level=ERROR msg="cairn stopped".*data directory: .*`+c.want), 10*time.Second)
			var ee *exec.ExitError
			if err := p.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("the agent exited with %v, want status 1:\n%s", err, p.Log())
			}
			if d := time.Since(removed); d > 5*time.Second {
				t.Fatalf("the agent took %v to notice, with checkpoints every 200ms: %s", d, line[0])
			}
		})
	}
}

// TestStatusWithoutPermission runs `cairn status` as a user who may not
// enter the agent's data directory (0700, the agent's own): it must say
// permission denied and what to do, with exit status 1, not that no agent
// runs (3).
func TestStatusWithoutPermission(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("running a command as another user needs root (CI runs as root)")
	}
	bin := cairntest.Build(t, "cairn")
	dir, err := os.MkdirTemp("", "cairn-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // others may pass, not into data
		t.Fatal(err)
	}
	shared := filepath.Join(dir, "cairn")
	if err := exec.Command("cp", bin, shared).Run(); err != nil {
		t.Fatal(err)
	}
	config, data := filepath.Join(dir, "pipeline.yaml"), filepath.Join(dir, "data")
	text := fmt.Sprintf("agent:\n  data_dir: %s\nsources:\n  - id: fleet\n    simulator: {devices: 5, rate: 10}\n", data)
	if err := os.WriteFile(config, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startAgent(t, shared, config)
	cairntest.AwaitStatus(t, filepath.Join(data, "cairn.sock"), "the agent running", 30*time.Second, func(st api.Status) bool { return st.State == "running" })
	status := exec.Command(shared, "status", "-c", config)
	status.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := status.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "permission denied: run this as the agent's user") {
		t.Fatalf("status as another user: %v, want exit status 1 and permission denied:\n%s", err, out)
	}
	p.Signal(syscall.SIGTERM)
	p.Await(t, finalLine, 30*time.Second)
}

// TestControlGroup runs the agent with --control-group: the socket is the
// group's, mode 0660; while the data directory (0700) keeps the group out
// the agent says so at start, and once the group may search it a member
// runs `cairn status` and a user outside the group is refused by the
// socket's mode.
func TestControlGroup(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("running a command as another user needs root (CI runs as root)")
	}
	const gid = 65534 // nogroup
	bin := cairntest.Build(t, "cairn")
	dir, err := os.MkdirTemp("", "cairn-group-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(dir, "cairn")
	if err := exec.Command("cp", bin, shared).Run(); err != nil {
		t.Fatal(err)
	}
	config, data := filepath.Join(dir, "pipeline.yaml"), filepath.Join(dir, "data")
	text := fmt.Sprintf("agent:\n  data_dir: %s\nsources:\n  - id: fleet\n    simulator: {devices: 5, rate: 10}\n", data)
	if err := os.WriteFile(config, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	p := startAgent(t, shared, config, "--control-group", fmt.Sprint(gid))
	p.Await(t, regexp.MustCompile(`level=WARN msg="members of the control group cannot reach the control socket.*group=65534 dir=`+regexp.QuoteMeta(data)), 30*time.Second)
	socket := filepath.Join(data, "cairn.sock")
	cairntest.AwaitStatus(t, socket, "the agent running", 30*time.Second, func(st api.Status) bool { return st.State == "running" })
	st, err := os.Stat(socket)
	if err != nil {
		t.Fatal(err)
	}
	if sys := st.Sys().(*syscall.Stat_t); st.Mode().Perm() != 0o660 || sys.Gid != gid {
		t.Fatalf("control socket: mode %v, group %d; want 0660 and group %d", st.Mode().Perm(), sys.Gid, gid)
	}
	if err := os.Chown(data, -1, gid); err != nil {
		t.Fatal(err)
	}
	// Others may pass too, so that it is the socket's mode that keeps
	// them out.
	if err := os.Chmod(data, 0o751); err != nil {
		t.Fatal(err)
	}
	statusAs := func(uid, gid uint32) ([]byte, error) {
		status := exec.Command(shared, "status", "-c", config)
		status.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
		return status.CombinedOutput()
	}
	if out, err := statusAs(65533, gid); err != nil || !strings.Contains(string(out), "running") {
		t.Fatalf("status as a member of the control group: %v\n%s", err, out)
	}
	out, err := statusAs(65533, 65533)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "permission denied") {
		t.Fatalf("status as a user outside the control group: %v, want exit status 1 and permission denied:\n%s", err, out)
	}
	p.Signal(syscall.SIGTERM)
	p.Await(t, finalLine, 30*time.Second)
}

// TestDataDirIsNotShared: a data directory in which the checkpoint store
// is a symbolic link (to where its writer, maybe root, should never
// write) is refused, naming the link; one that other users may write is
// used, with a warning that says what to do.
func TestDataDirIsNotShared(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	config, data := filepath.Join(dir, "pipeline.yaml"), filepath.Join(dir, "data")
	text := fmt.Sprintf("agent:\n  data_dir: %s\ncheckpoints:\n  interval: 200ms\nsources:\n  - id: fleet\n    simulator: {devices: 5, rate: 10}\n", data)
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(dir, "elsewhere")
	if err := os.MkdirAll(elsewhere, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(data, "checkpoints")); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "run", "-c", config).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "checkpoints is a symbolic link, which cairn does not follow") {
		t.Fatalf("a data directory with a linked store: %v\n%s", err, out)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) > 0 {
		t.Fatalf("the agent wrote where the link points: %v", ents)
	}

	os.Remove(filepath.Join(data, "checkpoints"))
	if err := os.Chmod(data, 0o777); err != nil {
		t.Fatal(err)
	}
	p := startAgent(t, bin, config)
	p.Await(t, regexp.MustCompile(`level=WARN msg="the data directory may be written by other users.*chmod go-w it" data_dir=`+regexp.QuoteMeta(data)+` mode=-rwxrwxrwx`), 30*time.Second)
	p.Await(t, completeLine, 30*time.Second)
}

// TestLogToAClosedPipe runs the agent with its log into a pipe that is
// closed while it runs, as `cairn run ... 2>&1 | tee log` and Ctrl-C
// leave it: SIGTERM must still end in the final checkpoint, exit status
// 0 and no socket left behind.
func TestLogToAClosedPipe(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	config := filepath.Join(dir, "pipeline.yaml")
	data := filepath.Join(dir, "data")
	text := fmt.Sprintf("agent:\n  data_dir: %s\ncheckpoints:\n  interval: 1h\nsources:\n  - id: fleet\n    simulator: {devices: 5, rate: 100}\n"+
		"operators:\n  - id: counts\n    type: count\n    inputs: [fleet]\n    key_by: key\n", data)
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "-c", config)
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	w.Close()
	sc := bufio.NewScanner(r)
	for sc.Scan() && !strings.Contains(sc.Text(), `msg="pipeline running"`) {
	}
	r.Close() // the reader is gone: the agent's next log line meets a closed pipe
	cairntest.AwaitStatus(t, filepath.Join(data, "cairn.sock"), "the agent running", 10*time.Second, func(st api.Status) bool { return st.State == "running" })
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("with its log pipe closed, the agent ended with %v after SIGTERM, want exit status 0", err)
	}
	if _, err := os.Stat(filepath.Join(data, "cairn.sock")); !os.IsNotExist(err) {
		t.Fatalf("the control socket is left behind: %v", err)
	}
	out, err := exec.Command(bin, "checkpoints", "--data-dir", data).CombinedOutput()
	if rows := strings.Split(strings.TrimSpace(string(out)), "\n"); err != nil || len(rows) != 2 || strings.Fields(rows[1])[0] != "1" {
		t.Fatalf("cairn checkpoints: %v\n%s\nwant the final checkpoint, 1", err, out)
	}
}

func TestValidateReportsPositions(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("sources:\n  - id: a\n    simulator: {devices: 1, rate: 1}\n    colour: red\noperators:\n  - id: b\n    type: spin\n    inputs: [a]\n"), 0o600)
	cmd := exec.Command(bin, "validate", "-c", bad)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("validate of a bad file: %v, want exit status 2", err)
	}
	for _, want := range []string{bad + `:4:5: unknown field "colour"`, bad + `:7:11: operator "b": unknown type "spin"`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("validate output lacks %q:\n%s", want, stderr.String())
		}
	}
	// What cannot run: a typo in an expression over declared fields, a
	// listen address without a host, a broker URL without a scheme, a
	// password file that is not there (beside the pipeline file), a sink
	// topic with a wildcard.
	os.WriteFile(bad, []byte(`agent:
  metrics: 9100
brokers:
  plant:
    url: mqtt.example:1883
    password_file: mqtt.pass
sources:
  - id: readings
    broker: plant
    topics: ["sensors/{device}/t"]
    fields: {humidity: number}
operators:
  - id: damp
    type: filter
    inputs: [readings]
    expr: humidity > 50 && devce == "d1"
sinks:
  - id: out
    input: damp
    broker: plant
    topic: "out/#/{key}"
`), 0o600)
	out, err := exec.Command(bin, "validate", "-c", bad).CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("validate of a file that cannot run: %v, want exit status 2\n%s", err, out)
	}
	for _, want := range []string{
		bad + `:2:12: agent.metrics: "9100" is not host:port: write 127.0.0.1:9100 (this device only) or :9100 (every interface)`,
		bad + `:5:10: broker "plant": URL "mqtt.example:1883" has no scheme: write tcp://mqtt.example:1883 (or ssl:// for TLS)`,
		bad + `:6:20: broker "plant": password_file mqtt.pass (` + filepath.Join(dir, "mqtt.pass") + `, beside the pipeline file): no such file or directory`,
		bad + `:16:28: operator "damp": expr "humidity > 50 && devce == \"d1\"" does not compile: unknown name devce (1:18); its records have key, time, value and the fields device, humidity`,
		bad + `:21:17: sink "out": topic "out/#/{key}" is not a valid MQTT topic: contains the wildcard #`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
	good := filepath.Join("..", "..", "configs", "demo.yaml")
	if out, err := exec.Command(bin, "validate", "-c", good).CombinedOutput(); err != nil {
		t.Fatalf("the demo config does not validate: %v\n%s", err, out)
	}
}

// TestDemoRuns runs configs/demo.yaml as a user would, its broker moved
// by CAIRN_DEMO_PORT, waits for checkpoints to complete, and stops it; its
// log is the agent's own and clean. Its simulated readings run at the
// wall clock: `cairn status` shows every operator's event time seconds
// behind the clock, not the months since a fixed day.
func TestDemoRuns(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dataDir := t.TempDir()
	port := freePort(t)
	p := cairntest.StartEnv(t, nil, []string{fmt.Sprintf("CAIRN_DEMO_PORT=%d", port)}, bin,
		"run", "-c", filepath.Join("..", "..", "configs", "demo.yaml"), "--log-level", "debug", "--data-dir", dataDir)
	for range 3 {
		p.Await(t, completeLine, 60*time.Second)
	}
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("the demo's broker is not on CAIRN_DEMO_PORT %d: %v", port, err)
	}
	conn.Close()
	code, out, errOut := cairntest.Run(t, bin, "status", "--json", "--data-dir", dataDir)
	var st api.Status
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || len(st.Operators) == 0 {
		t.Fatalf("cairn status --json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	for _, op := range st.Operators {
		if op.WatermarkUnixMS == 0 || op.WatermarkLagMS < 0 || op.WatermarkLagMS > time.Minute.Milliseconds() {
			t.Errorf("operator %s: event time %d, %dms behind the clock; want it within a minute of the clock", op.ID, op.WatermarkUnixMS, op.WatermarkLagMS)
		}
	}
	// As a user reads it: "event time behind the clock: fleet 1.2s, ...",
	// each lag in (milli)seconds.
	code, out, errOut = cairntest.Run(t, bin, "status", "--data-dir", dataDir)
	lags := regexp.MustCompile(`(?m)^event time behind the clock: (.*)$`).FindStringSubmatch(out)
	if code != 0 || lags == nil {
		t.Fatalf("cairn status: exit %d, no event time line:\n%s%s", code, out, errOut)
	}
	for lag := range strings.SplitSeq(lags[1], ", ") {
		if !regexp.MustCompile(`^\S+ [0-9.]+(ms|s)$`).MatchString(lag) {
			t.Errorf("cairn status says %q: want an operator's event time seconds behind the clock", lag)
		}
	}
	p.Signal(syscall.SIGTERM)
	p.Await(t, finalLine, 30*time.Second)
	p.Await(t, regexp.MustCompile(`msg="cairn stopped"`), 30*time.Second)
	// Every line is the agent's own structured log, whose level log_level
	// sets: none comes from a part that fell back to another logger. And a
	// healthy run warns of nothing, stopping included.
	for line := range strings.Lines(p.Log()) {
		if !strings.HasPrefix(line, "time=") {
			t.Fatalf("a line not from the agent's logger: %q", line)
		}
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Fatalf("the demo warned:\n%s", p.Log())
		}
	}
}
