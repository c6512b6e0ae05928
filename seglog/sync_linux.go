package seglog

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data and the metadata needed to read it (its size),
// but not its times: one journal write fewer than fsync on most file
// systems.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
