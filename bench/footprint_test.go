package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

// buildGateway builds cmd/cairn as .ci/release builds what a gateway runs,
// static and stripped (CGO_ENABLED=0, -trimpath, -ldflags='-s -w'), for
// linux/goarch (GOARM=goarm).
func buildGateway(b *testing.B, goarch, goarm string) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "cairn-"+goarch)
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", bin, "../cmd/cairn")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch, "GOARM="+goarm)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("building for linux/%s: %v", goarch, err)
	}
	return bin
}

// BenchmarkFootprint measures the footprint against the targets: the
// stripped binary for linux/amd64, arm (v7) and arm64, and the footprint
// scenario (a real `cairn run`, idle and under a steady load of readings
// over 100,000 keys, through its embedded broker). The figures are sizes
// and high-water marks of a fixed amount of work; each is reported as a
// metric and with its target, and a missed target is logged as such (the
// targets are measured, not asserted: see docs/performance.md, Footprint).
func BenchmarkFootprint(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("the footprint is read from Linux's /proc")
	}
	var host string
	for _, target := range []struct{ arch, arm string }{{"amd64", ""}, {"arm", "7"}, {"arm64", ""}} {
		bin := buildGateway(b, target.arch, target.arm)
		fi, err := os.Stat(bin)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(fi.Size())/1e6, "MB-binary-"+target.arch)
		if fi.Size() > TargetBinaryBytes {
			b.Logf("MISSED: linux/%s%s: the stripped binary is %s, above the target of %s", target.arch, target.arm, mb(fi.Size()), mb(TargetBinaryBytes))
		}
		if target.arch == runtime.GOARCH {
			host = bin
		}
	}
	if host == "" {
		b.Fatalf("no build for this machine's %s to run", runtime.GOARCH)
	}
	for range b.N {
		r, err := Footprint(context.Background(), FootprintConfig{Binary: host, Dir: b.TempDir(), MemoryLimit: FootprintMemoryLimit})
		if err != nil {
			b.Fatal(err)
		}
		if r.IdleRSSBytes <= 0 || r.LoadHWMBytes < r.IdleRSSBytes || r.IdleWorkingSetBytes > r.IdleRSSBytes ||
			r.LoadHeapLiveBytes <= 0 || r.LoadHeapLiveBytes > r.LoadHWMBytes ||
			r.LimitedLoadHeapLiveBytes <= 0 || r.LimitedLoadHeapLiveBytes > r.LimitedLoadHWMBytes {
			b.Fatalf("implausible footprint: idle %d B (%d B touched), load high-water mark %d B, live heap %d B; with %s, %d B and %d B",
				r.IdleRSSBytes, r.IdleWorkingSetBytes, r.LoadHWMBytes, r.LoadHeapLiveBytes, r.MemoryLimit, r.LimitedLoadHWMBytes, r.LimitedLoadHeapLiveBytes)
		}
		var table bytes.Buffer
		Print(&table, r, false)
		b.Logf("\n%s", table.String())
		b.ReportMetric(float64(r.IdleRSSBytes)/1e6, "MB-idle-RSS")
		b.ReportMetric(float64(r.IdleWorkingSetBytes)/1e6, "MB-idle-touched")
		b.ReportMetric(float64(r.LoadHWMBytes)/1e6, "MB-load-HWM")
		b.ReportMetric(float64(r.LoadHeapLiveBytes)/1e6, "MB-load-heap-live")
		b.ReportMetric(float64(r.LimitedLoadHWMBytes)/1e6, "MB-limited-load-HWM")
		b.ReportMetric(r.LimitedVsUnlimitedRateRatio, "limited/unlimited-rate")
		if r.IdleRSSBytes > TargetIdleRSSBytes {
			b.Logf("MISSED: idle: resident memory %s (%s anonymous, %s file-backed; %s of it touched while idle), above the target of %s",
				mb(r.IdleRSSBytes), mb(r.IdleAnonBytes), mb(r.IdleFileBytes), mb(r.IdleWorkingSetBytes), mb(TargetIdleRSSBytes))
		}
		if r.LoadHWMBytes > TargetLoadRSSBytes && r.LimitedLoadHWMBytes > TargetLoadRSSBytes {
			b.Logf("MISSED: under load: resident memory up to %s (largest sample: %s anonymous, %s file-backed; live heap up to %s; largest checkpoint %s), %s with memory_limit %s, above the target of %s",
				mb(r.LoadHWMBytes), mb(r.LoadAnonBytes), mb(r.LoadFileBytes), mb(r.LoadHeapLiveBytes), mb(r.LargestCheckpointBytes),
				mb(r.LimitedLoadHWMBytes), r.MemoryLimit, mb(TargetLoadRSSBytes))
		}
	}
}

// TestReadCPU reads this process's CPU time before and after spinning on
// the CPU for 200 ms of it: the figure must have grown by about as much.
func TestReadCPU(t *testing.T) {
	if emu := cairntest.Emulator(); emu != "" {
		t.Skipf("%s answers /proc/self/stat with no CPU time: readCPU cannot be checked under it", emu)
	}
	before, err := readCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; {
		now, err := readCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now-before >= 200*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readCPU went from %v to %v in a minute of spinning", before, now)
		}
		for i := range 1_000_000 { // spin: CPU time, not a wait
			sink += i
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	after, err := readCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// getrusage counts the same time at a finer grain: /proc's ticks
	// trail it by less than a tick a thread, never exceed it by more.
	rusage := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if after > rusage+50*time.Millisecond || after < rusage/2 {
		t.Fatalf("readCPU says %v, getrusage %v", after, rusage)
	}
}

// sink keeps TestReadCPU's loop from being optimised away.
var sink int
