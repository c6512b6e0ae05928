// Package cairntest runs cairn's own binaries in tests: it builds them
// once per test process, for the machine the test runs on, beside each
// other as a release ships them (Build), starts them and reads their logs
// line by line (Start, Proc), and waits on a running agent's status
// (AwaitStatus); it tells a test that an emulator runs it (Emulator). The
// tests of cmd/cairn, cmd/cairn-bench and torture share it.
package cairntest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

// built is what Build built, in the directory Main made.
var built struct {
	mu   sync.Mutex
	dir  string
	bins map[string]bool
}

// Main runs a package's tests and then removes the binaries Build built:
// a package whose tests call Build runs it from TestMain, as
// os.Exit(cairntest.Main(m)). Started again by RunMeasured, it runs the
// command it was given instead.
func Main(m *testing.M) int {
	if os.Getenv(measureEnv) != "" {
		return measured() // RunMeasured started the binary again
	}
	dir, err := os.MkdirTemp("", "cairntest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cairntest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	built.dir, built.bins = dir, make(map[string]bool)
	return m.Run()
}

// Build builds the command ./cmd/name of this module, as go build does
// by default for the machine the test runs on (GoBuild), once per test
// process, and returns the binary's path. The binaries are beside each
// other, named as their commands.
func Build(t testing.TB, name string) string {
	t.Helper()
	built.mu.Lock()
	defer built.mu.Unlock()
	if built.dir == "" {
		t.Fatal("cairntest.Build: the package's TestMain does not run cairntest.Main")
	}
	bin := filepath.Join(built.dir, name)
	if built.bins[name] {
		return bin
	}
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	build := GoBuild("-o", bin, "./cmd/"+name)
	build.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/%s: %v\n%s", name, err, out)
	}
	built.bins[name] = true
	return bin
}

// GoBuild returns the command `go build args...` for the machine the test
// binary was built for: its GOOS, GOARCH and GOARM, and its CGO_ENABLED
// (as its build information says), not the go tool's own. Natively that
// is what go build does by default; a test binary cross-compiled for
// linux/arm and run under qemu (.ci/run) gets binaries for linux/arm too,
// to run as it is run.
func GoBuild(args ...string) *exec.Cmd {
	cmd := exec.Command("go", append([]string{"build"}, args...)...)
	cmd.Env = append(os.Environ(), "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "GOARM", "CGO_ENABLED":
				cmd.Env = append(cmd.Env, s.Key+"="+s.Value)
			}
		}
	}
	return cmd
}
