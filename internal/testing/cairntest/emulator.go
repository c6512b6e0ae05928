package cairntest

import (
	"os"
	"sync"
)

// Emulator returns the program that really runs this process when that
// is not the process's own binary: an emulator, such as the qemu-user
// that binfmt_misc starts for a binary of another machine (.ci/run runs
// the tests so for linux/arm and linux/arm64). It returns "" when the
// process runs natively. The binaries Build and GoBuild make are for
// the same machine, and run as this process does.
//
// What an emulated process measures of itself or of its children in
// /proc (resident memory, CPU time) is the emulator's too, and qemu-user
// does not apply a seccomp filter or every system call: a test skips
// what it cannot check under one, saying so.
func Emulator() string {
	emulator.once.Do(func() {
		// qemu-user answers a readlink of /proc/self/exe with the
		// emulated binary, which os.Executable reads; it does not rewrite
		// a readlink relative to the directory, the kernel's answer.
		self, err := os.Executable()
		if err != nil {
			return
		}
		proc, err := os.OpenRoot("/proc/self")
		if err != nil {
			return
		}
		defer proc.Close()
		if exe, err := proc.Readlink("exe"); err == nil && exe != self {
			emulator.name = exe
		}
	})
	return emulator.name
}

var emulator struct {
	once sync.Once
	name string
}
