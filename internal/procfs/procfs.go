// Package procfs reads what Linux tells of a process in /proc: the bytes
// its writes made the kernel write back, and the CPU time it used. The
// benchmarks measure the agent with them, and tests check the agent's own
// counts against them.
package procfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Self stands for the calling process.
const Self = 0

func path(pid int, file string) string {
	if pid == Self {
		return "/proc/self/" + file
	}
	return fmt.Sprintf("/proc/%d/%s", pid, file)
}

// WriteBytes is write_bytes of /proc/PID/io: the bytes of the pages the
// process dirtied in files, as the kernel accounts them when it writes
// them back (a page dirtied again after it was written back counts again).
func WriteBytes(pid int) (int64, error) {
	data, err := os.ReadFile(path(pid, "io"))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "write_bytes: "); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("%s has no write_bytes", path(pid, "io"))
}

// userHZ is the unit of /proc/PID/stat's times: 100 a second on every
// Linux architecture cairn runs on.
const userHZ = 100

// CPU is the user and system time the process used, all its threads, to
// the 10 ms the kernel counts in.
func CPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(path(pid, "stat"))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from its end.
	s := string(data)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0, fmt.Errorf("%s: %q", path(pid, "stat"), s)
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("%s: %q", path(pid, "stat"), s)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%s: %q", path(pid, "stat"), s)
	}
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}

// Memory is the process's resident set now and at its peak (VmRSS and
// VmHWM of /proc/PID/status), in bytes.
func Memory(pid int) (resident, peak int64, err error) {
	data, err := os.ReadFile(path(pid, "status"))
	if err != nil {
		return 0, 0, err
	}
	kb := func(name string) (int64, error) {
		for line := range strings.Lines(string(data)) {
			if v, ok := strings.CutPrefix(line, name+":"); ok {
				n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				return n << 10, err
			}
		}
		return 0, fmt.Errorf("%s has no %s", path(pid, "status"), name)
	}
	if resident, err = kb("VmRSS"); err != nil {
		return 0, 0, err
	}
	peak, err = kb("VmHWM")
	return resident, peak, err
}
