package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/internal/testing/needs"
)

// A release architecture: Go's name, the binary's suffix, Debian's name,
// and what the ELF header says.
type releaseArch struct {
	goarch, name, deb string
	machine           elf.Machine
	class             elf.Class
}

var releaseArchs = map[string]releaseArch{
	"arm":   {"arm", "armv7", "armhf", elf.EM_ARM, elf.ELFCLASS32},
	"arm64": {"arm64", "arm64", "arm64", elf.EM_AARCH64, elf.ELFCLASS64},
	"amd64": {"amd64", "amd64", "amd64", elf.EM_X86_64, elf.ELFCLASS64},
}

// requireDpkg skips the test when dpkg-deb or dpkg is missing, unless
// CAIRN_REQUIRE_DPKG is set (as in CI): then it fails (package needs).
func requireDpkg(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"dpkg-deb", "dpkg"} {
		if _, err := exec.LookPath(tool); err != nil {
			needs.Missing(t, tool, "apt-get install dpkg", "CAIRN_REQUIRE_DPKG")
		}
	}
}

// TestRelease runs .ci/release for the architectures CAIRN_RELEASE_ARCHS
// names (by default the one the test runs on, to keep the test suite
// fast, whose binaries it also runs: under qemu, as .ci/run runs it, arm
// or arm64; CI's release step names all three) into a scratch directory
// and checks what it made: the checksums, static stripped binaries of
// cairn and cairn-bench for the right machine, and a .deb per
// architecture whose files, modes, control fields and maintainer scripts
// are as they should be (cairn-bench is not among them), and whose cairn
// says the version and commit it was built from.
func TestRelease(t *testing.T) {
	t.Parallel() // builds in a directory of its own, CPU-bound: beside a test that mostly waits
	requireDpkg(t)
	names := strings.Fields(os.Getenv("CAIRN_RELEASE_ARCHS"))
	if len(names) == 0 {
		if _, ok := releaseArchs[runtime.GOARCH]; !ok {
			t.Skipf("cairn is released for arm, arm64 and amd64, not %s: CAIRN_RELEASE_ARCHS names those to build", runtime.GOARCH)
		}
		names = []string{runtime.GOARCH}
	}
	for _, n := range names {
		if _, ok := releaseArchs[n]; !ok {
			t.Fatalf("CAIRN_RELEASE_ARCHS names %q: arm, arm64 or amd64", n)
		}
	}
	git := func(args ...string) string {
		out, err := exec.Command("git", args...).Output()
		if err != nil {
			t.Skipf("git %s: %v (the release script builds from a git checkout)", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	// The version is cmd/cairn/VERSION's: a release's at the commit
	// tagged with it, else with the commit as build metadata.
	version, commit := strings.TrimSpace(versionFile), git("rev-parse", "HEAD")
	dirty := strings.HasSuffix(git("describe", "--always", "--dirty"), "-dirty")
	if dirty {
		commit += "-dirty"
	}
	if git("tag", "--points-at", "HEAD", "v"+version) == "" || dirty {
		version += "+" + git("rev-parse", "--short=7", "HEAD")
		if dirty {
			version += ".dirty"
		}
	}

	out := t.TempDir()
	// Without a maintainer the release stops before it builds anything.
	release := exec.Command("../../.ci/release", append([]string{"--out", out}, names...)...)
	release.Env = withoutMaintainer(os.Environ())
	if log, err := release.CombinedOutput(); release.ProcessState.ExitCode() != 2 || !strings.Contains(string(log), "who maintains the package?") {
		t.Errorf(".ci/release without a maintainer: %v, want exit status 2 and a question\n%s", err, log)
	}
	if ents, _ := os.ReadDir(out); len(ents) > 0 {
		t.Errorf(".ci/release without a maintainer made %d files", len(ents))
	}
	release = exec.Command("../../.ci/release", append([]string{"--out", out, "--maintainer", testMaintainer}, names...)...)
	release.Env = withoutMaintainer(os.Environ())
	start := time.Now()
	log, err := release.CombinedOutput()
	if err != nil {
		t.Fatalf(".ci/release: %v\n%s", err, log)
	}
	t.Logf(".ci/release %s: %s\n%s", strings.Join(names, " "), time.Since(start).Round(time.Second), log)

	files := checkSums(t, out)
	var want []string
	for _, n := range names {
		want = append(want, "cairn-linux-"+releaseArchs[n].name, "cairn-bench-linux-"+releaseArchs[n].name)
	}
	for _, n := range names {
		a := releaseArchs[n]
		debs, _ := filepath.Glob(filepath.Join(out, "cairn_*_"+a.deb+".deb"))
		if len(debs) != 1 {
			t.Fatalf("%s: .debs %v, want one", n, debs)
		}
		want = append(want, filepath.Base(debs[0]))
		t.Run(n+"/binary", func(t *testing.T) { checkBinary(t, filepath.Join(out, "cairn-linux-"+a.name), a) })
		t.Run(n+"/bench", func(t *testing.T) { checkBench(t, out, a) })
		t.Run(n+"/deb", func(t *testing.T) { checkDeb(t, debs[0], a, version, commit) })
	}
	slices.Sort(want)
	if !slices.Equal(files, want) {
		t.Errorf("SHA256SUMS lists %v, want %v", files, want)
	}
}

// testMaintainer is the Maintainer the test gives the release: a
// reserved domain, as a package built by a test is nobody's.
const testMaintainer = "cairn release test <release-test@cairn.invalid>"

// withoutMaintainer returns env without the variables .ci/release takes
// a maintainer from.
func withoutMaintainer(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return name == "CAIRN_MAINTAINER" || name == "DEBFULLNAME" || name == "DEBEMAIL"
	})
}

// checkSums verifies dir's SHA256SUMS (sha256sum's format) and returns
// the names it lists, sorted; it fails when dir holds another file.
func checkSums(t *testing.T, dir string) []string {
	t.Helper()
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	line := regexp.MustCompile(`^([0-9a-f]{64})  (\S+)$`)
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("SHA256SUMS: line %q is not HASH  NAME", sc.Text())
		}
		data, err := os.ReadFile(filepath.Join(dir, m[2]))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != m[1] {
			t.Errorf("SHA256SUMS: %s does not match", m[2])
		}
		names = append(names, m[2])
	}
	slices.Sort(names)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if _, listed := slices.BinarySearch(names, e.Name()); !listed && e.Name() != "SHA256SUMS" {
			t.Errorf("%s is not in SHA256SUMS", e.Name())
		}
	}
	return names
}

// checkBinary checks that bin is a statically linked Linux executable
// for a's machine, without symbols or DWARF, built without cgo, with
// -trimpath and, for arm, for ARMv7.
func checkBinary(t *testing.T, bin string, a releaseArch) {
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != a.machine || f.Class != a.class || f.Type != elf.ET_EXEC || f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		t.Errorf("ELF %v %v %v %v, want %v %v an executable", f.Machine, f.Class, f.Type, f.OSABI, a.machine, a.class)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("has a %v program header: not statically linked", p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("needs libraries %v", libs)
	}
	// -ldflags "-s -w", which the build information does not record
	// under -trimpath.
	if f.Section(".symtab") != nil {
		t.Error("has a symbol table: not stripped (-s)")
	}
	for _, s := range f.Sections {
		if strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_") {
			t.Errorf("has DWARF section %s (no -w)", s.Name)
		}
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := make(map[string]string)
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	want := map[string]string{"GOOS": "linux", "GOARCH": a.goarch, "CGO_ENABLED": "0", "-trimpath": "true"}
	if a.goarch == "arm" {
		want["GOARM"] = "7"
	}
	for k, v := range want {
		if settings[k] != v {
			t.Errorf("built with %s=%q, want %q", k, settings[k], v)
		}
	}
}

// checkBench checks the cairn-bench of a's in dir, a binary as the
// agent's is, and, when this machine can run it, that it runs.
func checkBench(t *testing.T, dir string, a releaseArch) {
	bin := filepath.Join(dir, "cairn-bench-linux-"+a.name)
	checkBinary(t, bin, a)
	if a.goarch != runtime.GOARCH {
		return
	}
	if out, err := exec.Command(bin, "-h").Output(); err != nil || !strings.HasPrefix(string(out), "usage: cairn-bench ") {
		t.Errorf("cairn-bench -h: %v\n%s", err, out)
	}
}

// checkDeb checks a .deb of a's: its control fields and scripts, its
// files and their modes, its unit, and the version its cairn says (when
// this machine can run it).
func checkDeb(t *testing.T, deb string, a releaseArch, version, commit string) {
	fields := make(map[string]string)
	for _, line := range strings.Split(dpkgDeb(t, "--field", deb), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, " ") {
			fields[k] = v
		}
	}
	debVersion := fields["Version"]
	if debVersion != debianVersion(version) || filepath.Base(deb) != "cairn_"+debVersion+"_"+a.deb+".deb" {
		t.Errorf("Version %q of %s, for cairn %s: want %s", debVersion, filepath.Base(deb), version, debianVersion(version))
	}
	for k, v := range map[string]string{"Package": "cairn", "Architecture": a.deb, "Section": "net", "Priority": "optional"} {
		if fields[k] != v {
			t.Errorf("control: %s is %q, want %q", k, fields[k], v)
		}
	}
	if fields["Maintainer"] != testMaintainer {
		t.Errorf("control: Maintainer is %q, want %q as given", fields["Maintainer"], testMaintainer)
	}
	for _, k := range []string{"Installed-Size", "Description"} {
		if fields[k] == "" {
			t.Errorf("control: no %s", k)
		}
	}
	if got := dpkgDeb(t, "--info", deb, "conffiles"); got != "/etc/cairn/pipeline.yaml\n" {
		t.Errorf("conffiles %q, want /etc/cairn/pipeline.yaml", got)
	}
	// dpkg-deb --info marks executable control files with a *.
	scripts := make(map[string]bool)
	for _, line := range strings.Split(dpkgDeb(t, "--info", deb), "\n") {
		if f := strings.Fields(line); len(f) >= 5 && f[1] == "bytes," && f[3] == "lines" {
			name, executable := f[4], false
			if name == "*" {
				name, executable = f[5], true
			}
			scripts[name] = executable
		}
	}
	if want := map[string]bool{"control": false, "conffiles": false, "md5sums": false, "postinst": true, "prerm": true, "postrm": true}; !maps.Equal(scripts, want) {
		t.Errorf("control files (name: executable) %v, want %v", scripts, want)
	}

	contents := make(map[string]string)
	for _, line := range strings.Split(strings.TrimSpace(dpkgDeb(t, "--contents", deb)), "\n") {
		f := strings.Fields(line)
		if len(f) != 6 || f[1] != "root/root" {
			t.Errorf("--contents: %q is not a file of root's", line)
			continue
		}
		contents[f[5]] = f[0]
	}
	const dir, file, program = "drwxr-xr-x", "-rw-r--r--", "-rwxr-xr-x"
	want := map[string]string{
		"./":                                               dir,
		"./etc/":                                           dir,
		"./etc/cairn/":                                     dir,
		"./etc/cairn/pipeline.yaml":                        file,
		"./usr/":                                           dir,
		"./usr/bin/":                                       dir,
		"./usr/bin/cairn":                                  program,
		"./usr/lib/":                                       dir,
		"./usr/lib/systemd/":                               dir,
		"./usr/lib/systemd/system/":                        dir,
		"./usr/lib/systemd/system/cairn.service":           file,
		"./usr/lib/sysusers.d/":                            dir,
		"./usr/lib/sysusers.d/cairn.conf":                  file,
		"./usr/lib/tmpfiles.d/":                            dir,
		"./usr/lib/tmpfiles.d/cairn.conf":                  file,
		"./usr/share/":                                     dir,
		"./usr/share/doc/":                                 dir,
		"./usr/share/doc/cairn/":                           dir,
		"./usr/share/doc/cairn/changelog.gz":               file,
		"./usr/share/doc/cairn/copyright":                  file,
		"./usr/share/lintian/":                             dir,
		"./usr/share/lintian/overrides/":                   dir,
		"./usr/share/lintian/overrides/cairn":              file,
		"./usr/share/bash-completion/":                     dir,
		"./usr/share/bash-completion/completions/":         dir,
		"./usr/share/bash-completion/completions/cairn":    file,
		"./usr/share/zsh/":                                 dir,
		"./usr/share/zsh/vendor-completions/":              dir,
		"./usr/share/zsh/vendor-completions/_cairn":        file,
		"./usr/share/fish/":                                dir,
		"./usr/share/fish/vendor_completions.d/":           dir,
		"./usr/share/fish/vendor_completions.d/cairn.fish": file,
	}
	if !maps.Equal(contents, want) {
		t.Errorf("--contents (path: mode)\n%v, want\n%v", contents, want)
	}

	root := t.TempDir()
	if out, err := exec.Command("dpkg", "-x", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg -x: %v\n%s", err, out)
	}
	read := func(path string) string {
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	unit := read("usr/lib/systemd/system/cairn.service")
	for _, line := range []string{"ExecStart=/usr/bin/cairn run -c /etc/cairn/pipeline.yaml --control-group cairn",
		"User=cairn", "Group=cairn", "StateDirectory=cairn", "StateDirectoryMode=0750", "NoNewPrivileges=true", "ProtectSystem=strict"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(line) + `$`).MatchString(unit) {
			t.Errorf("the unit has no line %q:\n%s", line, unit)
		}
	}
	if got := read("usr/lib/sysusers.d/cairn.conf"); !regexp.MustCompile(`(?m)^u cairn - "[^"]+" /var/lib/cairn$`).MatchString(got) {
		t.Errorf("sysusers.d entry:\n%s", got)
	}
	if got := read("usr/lib/tmpfiles.d/cairn.conf"); !regexp.MustCompile(`(?m)^d /var/lib/cairn 0750 cairn cairn -$`).MatchString(got) {
		t.Errorf("tmpfiles.d entry:\n%s", got)
	}
	if gateway, err := os.ReadFile("../../configs/gateway.yaml"); err != nil || read("etc/cairn/pipeline.yaml") != string(gateway) {
		t.Errorf("/etc/cairn/pipeline.yaml is not configs/gateway.yaml (%v)", err)
	}
	for _, c := range []struct{ shell, path string }{{"bash", "usr/share/bash-completion/completions/cairn"},
		{"zsh", "usr/share/zsh/vendor-completions/_cairn"}, {"fish", "usr/share/fish/vendor_completions.d/cairn.fish"}} {
		var want strings.Builder
		if code := run([]string{"completion", c.shell}, &want, io.Discard); code != 0 || read(c.path) != want.String() {
			t.Errorf("%s is not `cairn completion %s` (exit status %d)", c.path, c.shell, code)
		}
	}
	if changelog := gunzip(t, filepath.Join(root, "usr/share/doc/cairn/changelog.gz")); !strings.Contains(changelog, "\n -- "+testMaintainer+"  ") {
		t.Errorf("the changelog is not signed by %q:\n%s", testMaintainer, changelog)
	}
	checkCopyright(t, read("usr/share/doc/cairn/copyright"), filepath.Join(root, "usr/bin/cairn"))
	checkMaintainerScripts(t, deb)
	if a.goarch != runtime.GOARCH {
		return
	}
	out, err := exec.Command(filepath.Join(root, "usr/bin/cairn"), "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	untagged := ""
	if strings.Contains(version, "+") {
		untagged = "untagged build, "
	}
	if want := "cairn " + version + " (" + untagged + "commit " + commit + ", built "; !strings.HasPrefix(string(out), want) {
		t.Errorf("cairn version printed %q, want it to begin %q", out, want)
	}
}

// debianVersion is the Debian version of a cairn version, as .ci/release
// makes it: a pre-release sorts before its release (0.4.0-dev+4143d22:
// 0.4.0~dev+4143d22).
func debianVersion(version string) string {
	core, meta, ok := strings.Cut(version, "+")
	if release, pre, ok := strings.Cut(core, "-"); ok {
		core = release + "~" + pre
	}
	if ok {
		core += "+" + meta
	}
	return core
}

// checkMaintainerScripts runs the .deb's maintainer scripts as dpkg would,
// with PATH holding only stand-ins that log their arguments (or nothing at
// all): they must succeed without systemd, as in a chroot, and, with
// systemd's tools, make the user, the data directory and the unit's state.
func checkMaintainerScripts(t *testing.T, deb string) {
	scripts := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "--control", deb, scripts).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --control: %v\n%s", err, out)
	}
	// run runs the scripts as an installation, an upgrade, a removal and
	// a purge would, with stand-ins for the tools named: each logs "name
	// args" and exits 0, but getent, which finds no user. It returns
	// their log.
	run := func(tools ...string) string {
		path, logFile := t.TempDir(), filepath.Join(t.TempDir(), "log")
		for _, n := range tools {
			status := "0"
			if n == "getent" {
				status = "2"
			}
			script := "#!/bin/sh\necho \"" + n + " $*\" >>\"$LOG\"\nexit " + status + "\n"
			if err := os.WriteFile(filepath.Join(path, n), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, step := range [][]string{{"postinst", "configure"}, {"postinst", "configure", "0.1.0"},
			{"prerm", "upgrade", "0.2.0"}, {"prerm", "remove"}, {"postrm", "remove"}, {"postrm", "purge"}} {
			cmd := exec.Command("/bin/sh", append([]string{filepath.Join(scripts, step[0])}, step[1:]...)...)
			cmd.Env = []string{"PATH=" + path, "LOG=" + logFile, "DPKG_MAINTSCRIPT_PACKAGE=cairn"}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s with only %v: %v\n%s", strings.Join(step, " "), tools, err, out)
			}
		}
		b, _ := os.ReadFile(logFile)
		return string(b)
	}
	run()
	got := run("systemd-sysusers", "systemd-tmpfiles", "deb-systemd-helper", "deb-systemd-invoke", "systemctl", "getent", "useradd")
	for _, want := range []string{"systemd-sysusers cairn.conf", "systemd-tmpfiles --create cairn.conf",
		"deb-systemd-helper update-state cairn.service", "deb-systemd-helper purge cairn.service"} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("with systemd's tools the scripts did not run %q; they ran:\n%s", want, got)
		}
	}
	got = run("getent", "useradd")
	if !strings.Contains(got, "useradd --system --user-group --home-dir /var/lib/cairn") {
		t.Errorf("without systemd-sysusers the postinst did not run useradd; the scripts ran:\n%s", got)
	}
}

// dpkgDeb runs dpkg-deb with args and returns its output.
func dpkgDeb(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("dpkg-deb", args...).Output()
	if err != nil {
		t.Fatalf("dpkg-deb %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

func gunzip(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// parseDEP5 parses a copyright file in Debian's machine-readable format
// (copyright-format 1.0): paragraphs of fields, separated by empty lines;
// a field's further lines begin with a space, " ." standing for an empty
// one. A value is its lines joined by newlines.
func parseDEP5(text string) ([]map[string]string, error) {
	var paras []map[string]string
	var para map[string]string
	var last string
	for n, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		switch {
		case strings.TrimSpace(line) == "":
			para = nil
		case line[0] == ' ' || line[0] == '\t':
			if para == nil {
				return nil, fmt.Errorf("line %d continues no field", n+1)
			}
			cont := strings.TrimSpace(line)
			if cont == "." {
				cont = ""
			}
			para[last] += "\n" + cont
		default:
			name, value, ok := strings.Cut(line, ":")
			if !ok || name == "" || strings.ContainsAny(name, " \t") {
				return nil, fmt.Errorf("line %d is no field: %q", n+1, line)
			}
			if para == nil {
				para = make(map[string]string)
				paras = append(paras, para)
			}
			if _, dup := para[name]; dup {
				return nil, fmt.Errorf("line %d: a second %s field in one paragraph", n+1, name)
			}
			para[name], last = strings.TrimSpace(value), name
		}
	}
	return paras, nil
}

// checkCopyright checks the .deb's copyright file: it parses as
// copyright-format 1.0; each Files paragraph has its Copyright and
// License; each licence it cites has its text, in the paragraph or in a
// stand-alone License paragraph (or Debian's copy, in
// /usr/share/common-licenses), and no stand-alone paragraph is unused or
// doubled; cairn is Apache-2.0; and every module `go version -m` lists
// for bin, and Go's standard library, has its paragraph.
func checkCopyright(t *testing.T, text, bin string) {
	paras, err := parseDEP5(text)
	if err != nil {
		t.Fatalf("the copyright file does not parse: %v", err)
	}
	if len(paras) == 0 || paras[0]["Format"] != "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" {
		t.Fatalf("the copyright file's header has no Format of copyright-format 1.0")
	}
	standalone := make(map[string]string) // short name → text
	cited := make(map[string]bool)
	var files []map[string]string
	for _, p := range paras[1:] {
		if _, ok := p["Files"]; !ok {
			name, licence, _ := strings.Cut(p["License"], "\n")
			if _, dup := standalone[name]; dup || name == "" {
				t.Errorf("stand-alone License paragraph %q is doubled or unnamed", name)
			}
			standalone[name] = licence
			continue
		}
		files = append(files, p)
	}
	// hasText reports whether licence is a text, or names Debian's copy.
	hasText := func(licence string) bool {
		if m := regexp.MustCompile(`/usr/share/common-licenses/([\w.+-]+)`).FindStringSubmatch(licence); m != nil {
			_, errDir := os.Stat("/usr/share/common-licenses")
			_, err := os.Stat("/usr/share/common-licenses/" + m[1])
			return err == nil || errDir != nil // checked where there is a Debian to check against
		}
		return len(strings.Fields(licence)) >= 50
	}
	byComment := make(map[string]map[string]string) // first line of Comment → paragraph
	for _, p := range files {
		if p["Copyright"] == "" || p["License"] == "" {
			t.Errorf("Files: %s has no Copyright or License", p["Files"])
		}
		expr, licence, _ := strings.Cut(p["License"], "\n")
		for _, name := range regexp.MustCompile(`\s+(?:and|or)\s+|,\s*`).Split(expr, -1) {
			cited[name] = true
			if text, ok := standalone[name]; licence == "" && (!ok || !hasText(text)) {
				t.Errorf("Files: %s cites %s, which has no text", p["Files"], name)
			}
		}
		if licence != "" && !hasText(licence) {
			t.Errorf("Files: %s gives the text of %s, but it is too short to be one: %q", p["Files"], expr, licence)
		}
		first, _, _ := strings.Cut(p["Comment"], "\n")
		byComment[first] = p
	}
	for name := range standalone {
		if !cited[name] {
			t.Errorf("stand-alone License paragraph %s is cited by no Files paragraph", name)
		}
	}

	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if p := files[0]; p["Files"] != "*" || p["License"] != "Apache-2.0" {
		t.Errorf("the first Files paragraph is %q, %q; want cairn's, *, Apache-2.0", p["Files"], p["License"])
	}
	for _, d := range info.Deps {
		p := byComment[d.Path+" "+d.Version]
		switch {
		case p == nil:
			t.Errorf("the binary links %s %s, which the copyright file does not name", d.Path, d.Version)
		case d.Replace != nil && strings.HasPrefix(d.Replace.Path, "./"):
			if want := strings.TrimPrefix(d.Replace.Path, "./") + "/*"; p["Files"] != want || !strings.Contains(p["Comment"], "modified") {
				t.Errorf("%s is replaced by cairn's copy, but its paragraph has Files: %s and does not say it is modified", d.Path, p["Files"])
			}
		case p["Files"] != "vendor/"+d.Path+"/*":
			t.Errorf("%s: Files %q, want its path in a vendor directory", d.Path, p["Files"])
		}
	}
	std := false
	for _, p := range files {
		std = std || strings.Contains(p["Comment"], "Go standard library") && strings.Contains(p["Comment"], info.GoVersion+",") && p["License"] == "BSD-3-clause"
	}
	if !std {
		t.Errorf("the copyright file has no BSD-3-clause paragraph for the standard library of %s", info.GoVersion)
	}
}
