package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"golang.org/x/sys/unix"

	"github.com/cairn-edge/cairn/agent"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/needs"
)

// unitHardening says, for each hardening setting of configs/cairn.service,
// how TestRestrictedRun applies it (sandbox_test.go), or why it does not.
// A setting the unit gains that is not here fails the test: say how the
// sandbox applies it, or why it cannot.
var unitHardening = map[string]string{
	"NoNewPrivileges":         "applied: PR_SET_NO_NEW_PRIVS",
	"CapabilityBoundingSet":   "applied (empty only): every capability dropped from the bounding set",
	"ProtectSystem":           "applied (strict only): the whole tree read-only (mount_setattr, recursive)",
	"ReadWritePaths":          "applied: the data directory writable again",
	"PrivateTmp":              "applied: new tmpfs on /tmp and /var/tmp",
	"PrivateDevices":          "applied: a tmpfs /dev holding null, zero, full, random and urandom alone",
	"ProtectHome":             "applied: empty tmpfs, mode 000, on /home, /root and /run/user",
	"ProtectKernelTunables":   "applied: /sys read-only, /proc/sys gone (ProcSubset=pid)",
	"ProtectKernelModules":    "applied in effect: no capability, module directories read-only",
	"ProtectKernelLogs":       "applied: no /dev/kmsg, no /proc/kmsg (ProcSubset=pid)",
	"ProtectControlGroups":    "applied: /sys/fs/cgroup read-only",
	"ProtectClock":            "applied in effect: no capability, @clock not in the filter",
	"ProtectHostname":         "applied: a UTS namespace of its own",
	"ProtectProc":             "applied (invisible only): /proc mounted hidepid=invisible",
	"ProcSubset":              "applied (pid only): /proc mounted subset=pid",
	"PrivateMounts":           "applied: a mount namespace of its own",
	"RestrictAddressFamilies": "applied: socket() of another family fails with EAFNOSUPPORT (seccomp)",
	"MemoryDenyWriteExecute":  "applied: mmap of writable and executable memory, mprotect to executable fail (seccomp)",
	"SystemCallFilter":        "applied: the unit's groups, expanded by systemd-analyze syscall-filter (seccomp)",
	"SystemCallErrorNumber":   "applied (EPERM only): a call outside the filter fails with EPERM",
	"SystemCallArchitectures": "applied (native only): calls of another architecture (and x32) fail",
	"UMask":                   "applied: umask",
	"User":                    "applied: a user of the test's (65534), not cairn",
	"Group":                   "applied: a group of the test's (65534), also the control group",
	"RestrictNamespaces":      "NOT applied: only the missing capabilities stop new namespaces (an unprivileged user namespace would not be)",
	"RestrictRealtime":        "NOT applied: the agent asks for no realtime scheduling; nothing checks that it does not",
	"RestrictSUIDSGID":        "NOT applied: the agent makes no set-id file; nothing checks that it does not",
	"LockPersonality":         "NOT applied: the agent changes no personality; nothing checks that it does not",
	"RemoveIPC":               "not applicable: what systemd removes when the service stops",
}

// unitService are the unit's [Service] settings that are not hardening.
var unitService = []string{"Type", "NotifyAccess", "ExecStart", "ExecReload", "Restart", "RestartSec", "TimeoutStartSec",
	"TimeoutStopSec", "WatchdogSec", "EnvironmentFile", "StateDirectory", "StateDirectoryMode"}

// TestRestrictedRun runs the agent under configs/cairn.service's
// hardening as far as a test can apply it without systemd (unitHardening
// says how far), so that a hardening line that would break the agent is
// seen here: started by the sandbox launcher (sandbox_test.go) as root,
// in mount and UTS namespaces of its own with the file system read-only
// but for its data directory, new /tmp, /dev and /proc, no capability,
// the user and group 65534, the unit's system call filter and address
// families, no writable executable memory, its umask; with the control
// socket given to its group (--control-group) and a notify socket. It
// must report READY=1, give the socket to the group, take checkpoints,
// publish to its embedded broker, apply a change of its file, stop
// cleanly on SIGTERM, and restore the final checkpoint when it starts
// again under the same restrictions.
func TestRestrictedRun(t *testing.T) {
	if os.Geteuid() != 0 {
		needs.Missing(t, "root", "run the tests as root, as CI does", "CAIRN_REQUIRE_MOUNT")
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		needs.Missing(t, "systemd-analyze", "apt-get install systemd", "CAIRN_REQUIRE_SYSTEMD_ANALYZE")
	}
	settings := unitSettings(t, readUnit(t, "/usr/bin/cairn"))
	for key, values := range settings {
		if _, ok := unitHardening[key]; !ok && !slices.Contains(unitService, key) {
			t.Errorf("the unit sets %s=%s, which TestRestrictedRun neither applies nor says why not (unitHardening)", key, values)
		}
	}
	for key, want := range map[string]string{"CapabilityBoundingSet": "", "ProtectSystem": "strict", "ProtectProc": "invisible",
		"ProcSubset": "pid", "SystemCallErrorNumber": "EPERM", "SystemCallArchitectures": "native", "UMask": "0077"} {
		if got := settings[key]; !slices.Equal(got, []string{want}) {
			t.Errorf("the unit sets %s=%q; the sandbox applies %s=%s alone", key, got, key, want)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	const id = 65534 // nobody, nogroup
	bin := cairntest.Build(t, "cairn")
	// The binary and the pipeline file in a directory the agent's user
	// can reach; the data directory its own, 0750 as StateDirectoryMode.
	dir := t.TempDir()
	keep, data := filepath.Join(dir, "bin"), filepath.Join(dir, "data")
	for _, d := range []string{dir, keep} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o755)
	}
	if err := os.Mkdir(data, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(data, id, id); err != nil {
		t.Fatal(err)
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(keep, "cairn"), exe, 0o755); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	file := filepath.Join(keep, "pipeline.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(reloadConfig, data, port, "200ms")), 0o644); err != nil {
		t.Fatal(err)
	}

	s := sandbox{Bin: filepath.Join(keep, "cairn"), Args: []string{"run", "-c", file, "--log-level", "debug", "--control-group", strconv.Itoa(id)},
		ReadWrite: []string{data}, Keep: []string{keep}, UID: id, GID: id}
	s.Allow, s.Socket, s.Mmap, s.Mprotect = systemCalls(t, settings["SystemCallFilter"])
	umask, _ := strconv.ParseUint(settings["UMask"][0], 8, 32)
	if umask != 0o077 {
		t.Fatalf("UMask=%s", settings["UMask"][0])
	}
	for _, f := range strings.Fields(strings.Join(settings["RestrictAddressFamilies"], " ")) {
		if n, ok := map[string]uint32{"AF_UNIX": unix.AF_UNIX, "AF_INET": unix.AF_INET, "AF_INET6": unix.AF_INET6, "AF_NETLINK": unix.AF_NETLINK}[f]; ok {
			s.Families = append(s.Families, n)
		} else {
			t.Fatalf("RestrictAddressFamilies names %s, which the test does not know", f)
		}
	}
	spec, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if emu := cairntest.Emulator(); emu != "" {
		// The unit is read and its filter expanded for this architecture
		// above; the agent cannot be run under it.
		t.Skipf("under %s, which implements no mount_setattr (ENOSYS) and refuses a seccomp filter (EINVAL: the host's "+
			"kernel sees the emulator's system calls, not this architecture's): the sandbox is applied natively only", emu)
	}
	notify := listenNotify(t, fmt.Sprintf("@cairn-test-restricted-%d", os.Getpid()))
	t.Setenv("NOTIFY_SOCKET", notify.name)
	t.Setenv("WATCHDOG_USEC", "1000000")
	t.Setenv("WATCHDOG_PID", "")
	t.Setenv(sandboxVar, string(spec))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	p := cairntest.Start(t, nil, self)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the agent's log:\n%s", p.Log())
		}
	})
	if ready := notify.awaitReady(t, p, 60*time.Second); !strings.HasPrefix(ready["STATUS"], "running ") {
		t.Fatalf("READY=1 came with STATUS %q\n%s", ready["STATUS"], p.Log())
	}
	if strings.Contains(p.Log(), "sandbox:") {
		t.Fatalf("the sandbox failed:\n%s", p.Log())
	}
	var st unix.Stat_t
	if err := unix.Stat(agent.SocketPath(data), &st); err != nil || st.Gid != id || st.Mode&0o777 != 0o660 || st.Uid != id {
		t.Errorf("the control socket: %v, owner %d:%d, mode %o; want %d:%d, 0660", err, st.Uid, st.Gid, st.Mode&0o777, id, id)
	}
	outputs := make(chan string, 100)
	c := paho.NewClient(paho.NewClientOptions().AddBroker(fmt.Sprintf("tcp://127.0.0.1:%d", port)).SetClientID("restricted-watcher"))
	if tok := c.Connect(); tok.Wait() && tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	defer c.Disconnect(100)
	c.Subscribe("e2e/counts/#", 1, func(_ paho.Client, m paho.Message) {
		select {
		case outputs <- m.Topic():
		default:
		}
	}).Wait()
	for range 3 {
		p.Await(t, completeLine, 30*time.Second)
	}
	select {
	case <-outputs:
	case <-time.After(30 * time.Second):
		t.Fatalf("no output published in 30 s\n%s", p.Log())
	}
	notify.await(t, "WATCHDOG", 30*time.Second)
	// A change, saved as editors save: a new file renamed over the old,
	// readable by the agent's user.
	if err := os.WriteFile(file+".new", []byte(fmt.Sprintf(reloadConfig, data, port, "300ms")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".new", file); err != nil {
		t.Fatal(err)
	}
	notify.await(t, "RELOADING", 30*time.Second)
	notify.await(t, "READY", 30*time.Second)
	// The reload's, written before READY; the notification may still
	// overtake the line on its way through the output's pipe.
	p.Await(t, finalLine, 30*time.Second)
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatalf("under the unit's restrictions: %v\n%s", err, p.Log())
	}
	final := p.Await(t, finalLine, 0)
	if bad := regexp.MustCompile(`level=(WARN|ERROR).*(permission denied|operation not permitted|read-only file system|address family)`).FindString(p.Log()); bad != "" {
		t.Errorf("the agent met its restrictions: %s", bad)
	}

	// Again, under the same restrictions: it restores what it wrote.
	p = cairntest.Start(t, nil, self)
	if got := p.Await(t, restoreLine, 60*time.Second)[1]; got != final[1] {
		t.Errorf("restored checkpoint %s, want the final one, %s\n%s", got, final[1], p.Log())
	}
	notify.awaitReady(t, p, 60*time.Second)
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatalf("under the unit's restrictions: %v\n%s", err, p.Log())
	}
}

// unitSettings returns the [Service] settings of unit, each key's values
// in order.
func unitSettings(t *testing.T, unit string) map[string][]string {
	t.Helper()
	settings := make(map[string][]string)
	section := ""
	sc := bufio.NewScanner(strings.NewReader(unit))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("the unit's line %q is not KEY=VALUE", line)
			}
			settings[k] = append(settings[k], v)
		}
	}
	return settings
}

// systemCalls returns the numbers, on this architecture, of the system
// calls the unit's SystemCallFilter= lines allow (each line's groups
// expanded by systemd-analyze syscall-filter, a line starting with ~
// taking them away), and those of socket, mmap and mprotect (with their
// variants) whose arguments the sandbox checks. The numbers are those of
// golang.org/x/sys/unix's table for the architecture.
func systemCalls(t *testing.T, filters []string) (allow []uint32, socket uint32, mmap, mprotect []uint32) {
	t.Helper()
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "golang.org/x/sys").Output()
	if err != nil {
		t.Fatalf("go list -m golang.org/x/sys: %v", err)
	}
	table, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "unix", "zsysnum_linux_"+runtime.GOARCH+".go"))
	if err != nil {
		t.Fatal(err)
	}
	numbers := make(map[string]uint32)
	for _, m := range regexp.MustCompile(`(?m)^\s*SYS_(\w+)\s*=\s*(\d+)`).FindAllStringSubmatch(string(table), -1) {
		n, _ := strconv.ParseUint(m[2], 10, 32)
		numbers[strings.ToLower(m[1])] = uint32(n)
	}
	var expand func(name string, into map[string]bool)
	expand = func(name string, into map[string]bool) {
		if !strings.HasPrefix(name, "@") {
			into[name] = true
			return
		}
		out, err := exec.Command("systemd-analyze", "syscall-filter", name).Output()
		if err != nil {
			t.Fatalf("systemd-analyze syscall-filter %s: %v", name, err)
		}
		for _, line := range strings.Split(string(out), "\n")[1:] {
			if line = strings.TrimSpace(line); line != "" && line[0] != '#' {
				expand(line, into)
			}
		}
	}
	allowed := make(map[string]bool)
	for _, f := range filters {
		names := make(map[string]bool)
		for _, n := range strings.Fields(strings.TrimPrefix(f, "~")) {
			expand(n, names)
		}
		for n := range names {
			if strings.HasPrefix(f, "~") {
				delete(allowed, n)
			} else {
				allowed[n] = true
			}
		}
	}
	for n := range allowed {
		if nr, ok := numbers[n]; ok {
			allow = append(allow, nr)
		}
	}
	slices.Sort(allow)
	if len(allow) < 100 {
		t.Fatalf("the unit's SystemCallFilter %q allows %d system calls of %s's", filters, len(allow), runtime.GOARCH)
	}
	for _, n := range []string{"mmap", "mmap2"} {
		if nr, ok := numbers[n]; ok {
			mmap = append(mmap, nr)
		}
	}
	for _, n := range []string{"mprotect", "pkey_mprotect"} {
		if nr, ok := numbers[n]; ok {
			mprotect = append(mprotect, nr)
		}
	}
	return allow, numbers["socket"], mmap, mprotect
}
