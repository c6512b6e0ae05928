package main

import (
	"bytes"
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

// TestMain builds the binaries the tests run once (cairntest.Build), and
// removes them after.
func TestMain(m *testing.M) { os.Exit(cairntest.Main(m)) }

// TestBinaryVersion builds the real binary, stamped as .ci/release stamps
// it, and runs it, as a user would.
func TestBinaryVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "cairn")
	const rev = "0123456789abcdef0123456789abcdef01234567"
	build := cairntest.GoBuild("-ldflags",
		"-X main.version=v0.0.0-test -X main.commit="+rev+" -X main.date=2026-12-02T10:11:12Z", "-o", bin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "cairn v0.0.0-test (commit " + rev + ", built 2026-12-02T10:11:12Z, " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")"
	if got := strings.TrimSpace(string(out)); got != want {
		t.Fatalf("cairn version printed\n%q, want\n%q", got, want)
	}
	cmd := exec.Command(bin, "frobnicate")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("unknown command: err = %v, want exit status 2", err)
	}
	if !strings.Contains(stderr.String(), `unknown command "frobnicate"`) {
		t.Fatalf("unknown command: stderr %q", stderr.String())
	}
}

// TestVersionFromBuildInfo builds the binary as go build does, unstamped:
// `cairn version` says what the binary's build information holds, the
// commit included when go build recorded one. It is asked to record one
// whatever GOFLAGS say (-buildvcs=true), and does in a clone, not in a git
// worktree, whose .git is a file.
func TestVersionFromBuildInfo(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "cairn")
	build := cairntest.GoBuild("-buildvcs=true", "-o", bin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatal(err)
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(string(out))
	if want := versionLine("", "", "", info); got != want {
		t.Fatalf("cairn version printed\n%q, want\n%q", got, want)
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && !strings.Contains(got, "commit "+s.Value) {
			t.Fatalf("cairn version printed %q, without the revision %s", got, s.Value)
		}
	}
	t.Logf("%s; module version %s", got, info.Main.Version)
}

func TestVersionLine(t *testing.T) {
	t.Parallel()
	goes := runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	base := strings.TrimSpace(versionFile)
	built := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201090000-0123456789ab+dirty"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-12-01T09:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	for _, c := range []struct {
		name            string
		ver, rev, built string
		info            *debug.BuildInfo
		want            string
	}{
		{"stamped", "0.3.0", "abc", "2026-12-02T10:11:12Z", built,
			"cairn 0.3.0 (commit abc, built 2026-12-02T10:11:12Z, " + goes + ")"},
		{"stamped, untagged", "0.4.0-dev+abc1234", "abc1234", "2026-12-02T10:11:12Z", built,
			"cairn 0.4.0-dev+abc1234 (untagged build, commit abc1234, built 2026-12-02T10:11:12Z, " + goes + ")"},
		{"go build in a clone", "", "", "", built,
			"cairn " + base + "+0123456.dirty (untagged build, commit 0123456789abcdef0123456789abcdef01234567-dirty, committed 2026-12-01T09:00:00Z, " + goes + ")"},
		{"go install", "", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}},
			"cairn 0.3.0 (" + goes + ")"},
		{"go install of a commit", "", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.1-0.20261201090000-0123456789ab"}},
			"cairn " + base + " (untagged build, " + goes + ")"},
		{"go build outside version control", "", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			"cairn " + base + " (untagged build, " + goes + ")"},
		{"no build information", "", "", "", nil,
			"cairn " + base + " (untagged build, " + goes + ")"},
		{"a version stamped alone", "0.3.0", "", "", built,
			"cairn 0.3.0 (commit 0123456789abcdef0123456789abcdef01234567-dirty, committed 2026-12-01T09:00:00Z, " + goes + ")"},
	} {
		if got := versionLine(c.ver, c.rev, c.built, c.info); got != c.want {
			t.Errorf("%s: versionLine = \n%q, want\n%q", c.name, got, c.want)
		}
	}
}

// TestVersionsAgree holds every place that names cairn's version to
// cmd/cairn/VERSION, where it is written once: the README's status, the
// .deb names the README and the docs show (a wildcard, or the file's
// version as a release, or with a commit after it as .ci/release names an
// untagged build; TestRelease holds the script itself), and what a plain
// build of this tree says.
func TestVersionsAgree(t *testing.T) {
	base := strings.TrimSpace(versionFile)
	if !releaseTag.MatchString("v" + base) {
		t.Fatalf("cmd/cairn/VERSION holds %q, not a version such as 0.4.0 or 0.4.0-dev", base)
	}
	release, _, _ := strings.Cut(base, "-")
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "cairn " + base + " ("; !strings.Contains(string(readme), want) {
		t.Errorf("the README's status does not say %q", want)
	}
	docs, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	debName := regexp.MustCompile(`cairn_([^_\s` + "`" + `]+)_(?:armhf|arm64|amd64)\.deb`)
	named := 0
	for _, path := range append(docs, filepath.Join("..", "..", "README.md")) {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range debName.FindAllStringSubmatch(string(text), -1) {
			named++
			if v := m[1]; v != "*" && v != release && !strings.HasPrefix(v, debianVersion(base)+"+") {
				t.Errorf("%s names %s: want cairn_*_, cairn_%s_ or cairn_%s+COMMIT_", filepath.Base(path), m[0], release, debianVersion(base))
			}
		}
	}
	if named == 0 {
		t.Error("no .deb named in the README or the docs: is the pattern still right?")
	}
	code, out, _ := cairntest.Run(t, cairntest.Build(t, "cairn"), "version")
	if !strings.HasPrefix(out, "cairn "+base) || !strings.Contains(out, "(untagged build") || code != 0 {
		t.Errorf("cairn version of a plain build: exit %d, %q; want cairn %s..., an untagged build", code, out, base)
	}
}
