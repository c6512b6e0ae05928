package main

import (
	"bytes"
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
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
		{"stamped", "v0.3.0", "abc", "2026-12-02T10:11:12Z", built,
			"cairn v0.3.0 (commit abc, built 2026-12-02T10:11:12Z, " + goes + ")"},
		{"go build in a clone", "", "", "", built,
			"cairn v0.0.0-20261201090000-0123456789ab+dirty (commit 0123456789abcdef0123456789abcdef01234567-dirty, committed 2026-12-01T09:00:00Z, " + goes + ")"},
		{"go install", "", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}},
			"cairn v0.3.0 (" + goes + ")"},
		{"go build outside version control", "", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			"cairn devel (" + goes + ")"},
		{"no build information", "", "", "", nil,
			"cairn devel (" + goes + ")"},
		{"a version stamped alone", "v0.3.0", "", "", built,
			"cairn v0.3.0 (commit 0123456789abcdef0123456789abcdef01234567-dirty, committed 2026-12-01T09:00:00Z, " + goes + ")"},
	} {
		if got := versionLine(c.ver, c.rev, c.built, c.info); got != c.want {
			t.Errorf("%s: versionLine = \n%q, want\n%q", c.name, got, c.want)
		}
	}
}
