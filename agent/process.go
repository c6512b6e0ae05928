package agent

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"syscall"
	"time"
)

// processStart is when the process started, as near as the agent can tell
// without /proc: when the Go runtime initialised this package, a few
// milliseconds after the exec.
var processStart = time.Now()

// goVersion is the Go release the binary was built with.
func goVersion() string { return runtime.Version() }

// writeProcessMetrics writes the process_* and go_* metrics under the names
// and meanings of client_golang's process and Go collectors, which
// dashboards know. It reads the Go runtime through runtime/metrics and
// debug.ReadGCStats, neither of which stops the world; a figure the system
// does not give (no /proc) is left out.
func writeProcessMetrics(e exposition) {
	gauge := func(name, help string, v float64) {
		e.family(name, "gauge", help)
		e.sample(name, "", v)
	}
	gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", float64(processStart.UnixMicro())/1e6)
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		e.family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.")
		e.sample("process_cpu_seconds_total", "", time.Duration(ru.Utime.Nano()+ru.Stime.Nano()).Seconds())
	}
	if n, ok := openFDs(); ok {
		gauge("process_open_fds", "Number of open file descriptors.", float64(n))
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		gauge("process_max_fds", "Maximum number of open file descriptors.", float64(rl.Cur))
	}
	if r := resident(); r > 0 {
		gauge("process_resident_memory_bytes", "Resident memory size in bytes.", float64(r))
	}

	e.family("go_info", "gauge", "Information about the Go environment.")
	e.sample("go_info", labels("version", goVersion()), 1)
	s := []metrics.Sample{{Name: "/sched/goroutines:goroutines"}, {Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"}, {Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	gauge("go_goroutines", "Number of goroutines that currently exist.", float64(s[0].Value.Uint64()))
	threads, _ := runtime.ThreadCreateProfile(nil)
	gauge("go_threads", "Number of OS threads created.", float64(threads))
	// As client_golang: the quantiles are of the last (at most 256) pauses,
	// the sum and count of them all.
	gc := debug.GCStats{PauseQuantiles: make([]time.Duration, 5)}
	debug.ReadGCStats(&gc)
	e.family("go_gc_duration_seconds", "summary", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.")
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		e.sample("go_gc_duration_seconds", labels("quantile", q), gc.PauseQuantiles[i].Seconds())
	}
	e.sample("go_gc_duration_seconds_sum", "", gc.PauseTotal.Seconds())
	e.sample("go_gc_duration_seconds_count", "", float64(gc.NumGC))
	// runtime/metrics' classes for the MemStats fields, as client_golang maps them.
	gauge("go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and currently in use.", float64(s[1].Value.Uint64()))
	gauge("go_memstats_heap_inuse_bytes", "Number of heap bytes that are in use.", float64(s[1].Value.Uint64()+s[2].Value.Uint64()))
	gauge("go_memstats_sys_bytes", "Number of bytes obtained from system.", float64(s[3].Value.Uint64()))
}

// openFDs counts the process's open file descriptors, less the one the
// count opens; ok is false where there is no /proc.
func openFDs() (n int, ok bool) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, false
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return 0, false
	}
	return len(names) - 1, true
}
