package cairntest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// measureEnv, set in the environment of the test binary started again,
// makes Main run the command after it and print its peak resident
// memory (measured) instead of running the tests.
const measureEnv = "CAIRNTEST_MEASURE"

// RunMeasured runs cmd (not started) to its end and returns its combined
// output, its exit status and the most memory it held resident, in KiB.
//
// A process's peak, as wait4 reports it, begins at the peak of the
// process that started it (Linux keeps the larger of the two at exec), so
// a command started by a large test process (under -race, hundreds of
// MB) would report that. RunMeasured starts it from a small process
// instead: the test binary started again (Main), which runs cmd and
// reports what wait4 says of it.
func RunMeasured(t testing.TB, cmd *exec.Cmd) (out []byte, code int, rssKiB int64) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	m := exec.Command(self, append([]string{cmd.Path}, cmd.Args[1:]...)...)
	m.Dir, m.Env = cmd.Dir, append(env, measureEnv+"=1")
	out, err = m.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s: %v", cmd, err)
	}
	// The last line is the peak, which measured prints after the command's output.
	text := strings.TrimSuffix(string(out), "\n")
	i := strings.LastIndexByte(text, '\n')
	before, last := text[:max(i, 0)], text[i+1:]
	rss, found := strings.CutPrefix(last, measureEnv+" maxrss_kib=")
	if !found {
		t.Fatalf("%s: no peak reported:\n%s", cmd, out)
	}
	if rssKiB, err = strconv.ParseInt(rss, 10, 64); err != nil {
		t.Fatalf("%s: peak %q: %v", cmd, rss, err)
	}
	if i >= 0 {
		before += "\n"
	}
	return []byte(before), m.ProcessState.ExitCode(), rssKiB
}

// measured runs the command of os.Args[1:] with this process's standard
// streams and environment (but measureEnv), prints its peak resident
// memory as the last line of standard error, and returns its exit status.
func measured() int {
	os.Unsetenv(measureEnv)
	c := exec.Command(os.Args[1], os.Args[2:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := c.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		fmt.Fprintln(os.Stderr, "cairntest:", err)
		return 125
	}
	fmt.Fprintf(os.Stderr, "%s maxrss_kib=%d\n", measureEnv, c.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)
	return c.ProcessState.ExitCode()
}
