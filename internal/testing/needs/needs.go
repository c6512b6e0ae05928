// Package needs is how a test asks for a program from outside Go that it
// runs against: mosquitto, tmux, versitygw, dpkg. Where the program is
// missing, the test is skipped, saying what it would take, or fails when
// the program's variable (CAIRN_REQUIRE_MOSQUITTO, ...) is set, as in CI.
// go test's summary shows no skip, so each is also written to the file
// that CAIRN_SKIPS names, from which .ci/test lists the tests that did not
// run after the summary.
package needs

import (
	"fmt"
	"os"
)

// T is the part of testing.TB that Missing uses.
type T interface {
	Helper()
	Name() string
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Missing ends the test t, which needs program, missing: how is how to
// get it, variable the environment variable that makes its absence a
// failure.
func Missing(t T, program, how, variable string) {
	t.Helper()
	if os.Getenv(variable) != "" {
		t.Fatalf("%s is required (%s is set) but missing: %s", program, variable, how)
		return
	}
	if path := os.Getenv("CAIRN_SKIPS"); path != "" {
		if f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
			// One short write: appends from parallel test binaries do not
			// interleave.
			fmt.Fprintf(f, "%s\t%s\t%s\t%s\n", program, variable, how, t.Name())
			f.Close()
		}
	}
	t.Skipf("%s is missing: %s (%s=1 makes this a failure)", program, how, variable)
}
