package cairntest

import (
	"os"
	"os/exec"
	"testing"
)

// TestEmulator: under an emulator (.ci/run runs the tests for linux/arm
// and linux/arm64 through binfmt_misc), Emulator names a program other
// than this test binary that runs it.
func TestEmulator(t *testing.T) {
	emu := Emulator()
	if emu == "" {
		t.Skip("not under an emulator")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if emu == self {
		t.Fatalf("Emulator() is the test binary itself, %s", self)
	}
	if out, err := exec.Command(emu, self, "-test.run=^$").CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", emu, self, err, out)
	}
	t.Logf("under %s", emu)
}
