package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sandboxVar, when set, makes the test binary a launcher rather than a
// test: it applies what sandbox (JSON) asks, as systemd applies a unit's
// hardening, and executes the agent under it (TestRestrictedRun).
const sandboxVar = "CAIRN_TEST_SANDBOX"

// sandbox is what the launcher applies before it executes Bin with Args:
// the equivalents, without systemd, of configs/cairn.service's lines
// that a process running as root can apply to itself.
type sandbox struct {
	Bin  string
	Args []string
	// ReadWrite are the directories left writable (ReadWritePaths=),
	// Keep those that are kept reachable under the new /tmp: the
	// binary's and the pipeline file's.
	ReadWrite, Keep []string
	UID, GID        int
	// Allow are the numbers of the system calls allowed
	// (SystemCallFilter=); others fail with EPERM. Socket, Mmap and
	// Mprotect are those whose arguments are checked (socket; mmap and
	// mmap2; mprotect and pkey_mprotect, where the architecture has them).
	Allow, Mmap, Mprotect []uint32
	Socket                uint32
	// Families are the address families socket() may open
	// (RestrictAddressFamilies=); another fails with EAFNOSUPPORT.
	Families []uint32
}

func init() {
	if spec := os.Getenv(sandboxVar); spec != "" {
		err := runSandboxed(spec)
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(111)
	}
}

// runSandboxed applies spec and executes its binary; it returns only on
// failure. Everything is done on one OS thread, whose mount namespace,
// capabilities and system call filter the executed program inherits.
func runSandboxed(spec string) error {
	var s sandbox
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		return err
	}
	runtime.LockOSThread()
	// PrivateMounts=, ProtectHostname=: namespaces of its own.
	if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_NEWUTS); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	// What is hidden below but must stay reachable: held open.
	held := make(map[string]int)
	for _, p := range slices.Concat(s.ReadWrite, s.Keep, []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}) {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", p, err)
		}
		held[p] = fd
	}
	restore := func(p string, dir bool) error {
		if dir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		} else if err := os.WriteFile(p, nil, 0o644); err != nil {
			return err
		}
		return unix.Mount(fmt.Sprintf("/proc/self/fd/%d", held[p]), p, "", unix.MS_BIND, "")
	}
	// ProtectSystem=strict: the whole tree read-only.
	if err := unix.MountSetattr(-1, "/", unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("mount_setattr / read-only: %w", err)
	}
	// PrivateTmp=: new, empty /tmp and /var/tmp; ProtectHome=: empty,
	// inaccessible /home, /root and /run/user.
	for _, d := range []struct{ path, opts string }{{"/tmp", "mode=1777"}, {"/var/tmp", "mode=1777"},
		{"/home", "mode=000"}, {"/root", "mode=000"}, {"/run/user", "mode=000"}} {
		if _, err := os.Stat(d.path); err != nil {
			continue
		}
		if err := unix.Mount("tmpfs", d.path, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, d.opts); err != nil {
			return fmt.Errorf("mount a tmpfs on %s: %w", d.path, err)
		}
	}
	for _, p := range s.Keep {
		if err := restore(p, true); err != nil {
			return fmt.Errorf("keep %s: %w", p, err)
		}
	}
	// ReadWritePaths=: writable again.
	for _, p := range s.ReadWrite {
		if err := restore(p, true); err != nil {
			return fmt.Errorf("keep %s: %w", p, err)
		}
		if err := unix.MountSetattr(-1, p, 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("make %s writable: %w", p, err)
		}
	}
	// PrivateDevices=: a /dev of the pseudo devices alone.
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=755"); err != nil {
		return fmt.Errorf("mount a tmpfs on /dev: %w", err)
	}
	for _, dev := range []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"} {
		if err := restore(dev, false); err != nil {
			return fmt.Errorf("%s: %w", dev, err)
		}
	}
	// ProtectProc=invisible, ProcSubset=pid: a /proc of its own
	// processes, without /proc/sys and the kernel's other files.
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "hidepid=invisible,subset=pid"); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	// CapabilityBoundingSet= (empty), User=, Group=, NoNewPrivileges=,
	// UMask=.
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	if err := unix.Setgroups(nil); err != nil {
		return err
	}
	if err := unix.Setresgid(s.GID, s.GID, s.GID); err != nil {
		return err
	}
	if err := unix.Setresuid(s.UID, s.UID, s.UID); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	unix.Umask(0o077)
	// SystemCallFilter=, SystemCallErrorNumber=EPERM,
	// SystemCallArchitectures=native, RestrictAddressFamilies=,
	// MemoryDenyWriteExecute=.
	prog := seccompFilter(s)
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, sandboxVar+"=") })
	return unix.Exec(s.Bin, append([]string{filepath.Base(s.Bin)}, s.Args...), env)
}

// nativeArch is the AUDIT_ARCH_ value of the architecture the test runs on.
var nativeArch = map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64, "arm": unix.AUDIT_ARCH_ARM}[runtime.GOARCH]

// seccompFilter is a classic BPF program for seccomp: system calls of
// another architecture (and, on amd64, the x32 ABI) fail; socket() of a
// family not in Families fails with EAFNOSUPPORT;
// mmap() of memory both writable and executable and mprotect() to
// executable fail; the calls in allow are allowed; any other fails with
// EPERM. A system call's arguments are 64-bit words from offset 16,
// little-endian on every architecture cairn runs on.
func seccompFilter(s sandbox) []unix.SockFilter {
	const (
		ld    = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		and   = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
		ok    = unix.SECCOMP_RET_ALLOW
		eperm = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	)
	arg := func(i uint32) uint32 { return 16 + 8*i }
	st := func(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
	}
	p := []unix.SockFilter{
		st(ld, 4, 0, 0), // arch
		st(jeq, nativeArch, 1, 0),
		st(ret, eperm, 0, 0),
		st(ld, 0, 0, 0), // nr
	}
	if runtime.GOARCH == "amd64" {
		p = append(p, st(jge, 0x40000000, 0, 1), st(ret, eperm, 0, 0))
	}
	// when appends a block for system call nr, which returns; the
	// others skip it with the number still loaded.
	when := func(nr uint32, block ...unix.SockFilter) {
		p = append(p, st(jeq, nr, 0, uint8(len(block))))
		p = append(p, block...)
	}
	socket := []unix.SockFilter{st(ld, arg(0), 0, 0)}
	for i, f := range s.Families {
		socket = append(socket, st(jeq, f, uint8(len(s.Families)-i), 0))
	}
	when(s.Socket, append(socket,
		st(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EAFNOSUPPORT), 0, 0),
		st(ret, ok, 0, 0))...)
	for _, nr := range slices.Concat(s.Mmap, s.Mprotect) {
		bits := uint32(unix.PROT_WRITE | unix.PROT_EXEC)
		if slices.Contains(s.Mprotect, nr) {
			bits = unix.PROT_EXEC
		}
		when(nr,
			st(ld, arg(2), 0, 0),
			st(and, bits, 0, 0),
			st(jeq, bits, 0, 1),
			st(ret, eperm, 0, 0),
			st(ret, ok, 0, 0))
	}
	for _, nr := range s.Allow {
		when(nr, st(ret, ok, 0, 0))
	}
	return append(p, st(ret, eperm, 0, 0))
}
