package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// buildGateway builds cmd/cairn as a gateway runs it, static and stripped
// (CGO_ENABLED=0, -ldflags='-s -w'), for linux/goarch (GOARM=goarm).
func buildGateway(t *testing.T, goarch, goarm string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cairn-"+goarch)
	cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", bin, "../cmd/cairn")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch, "GOARM="+goarm)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("building for linux/%s: %v", goarch, err)
	}
	return bin
}

// TestFootprintTargets checks the footprint targets: the stripped binary
// for linux/amd64, arm (v7) and arm64 against TargetBinaryBytes, and the
// footprint scenario (a real `cairn run`, idle and under a steady load of
// readings over 100,000 keys, through its embedded broker) against the
// memory targets. The figures are sizes and high-water marks of a fixed
// amount of work, not times, so a slow machine does not fail it.
func TestFootprintTargets(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the footprint is read from Linux's /proc")
	}
	var host string
	for _, target := range []struct{ arch, arm string }{{"amd64", ""}, {"arm", "7"}, {"arm64", ""}} {
		bin := buildGateway(t, target.arch, target.arm)
		fi, err := os.Stat(bin)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("linux/%s%s stripped binary: %s", target.arch, target.arm, mb(fi.Size()))
		if fi.Size() > TargetBinaryBytes {
			t.Errorf("linux/%s%s: the stripped binary is %s, above the target of %s", target.arch, target.arm, mb(fi.Size()), mb(TargetBinaryBytes))
		}
		if target.arch == runtime.GOARCH {
			host = bin
		}
	}
	if host == "" {
		t.Fatalf("no build for this machine's %s to run", runtime.GOARCH)
	}
	r, err := Footprint(context.Background(), FootprintConfig{Binary: host, Stripped: true, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	Print(&table, r, false)
	t.Logf("\n%s", table.String())
	if r.IdleRSSBytes > TargetIdleRSSBytes {
		t.Errorf("idle: resident memory %s (%s anonymous, %s file-backed), above the target of %s",
			mb(r.IdleRSSBytes), mb(r.IdleAnonBytes), mb(r.IdleFileBytes), mb(TargetIdleRSSBytes))
	}
	if r.LoadHWMBytes > TargetLoadRSSBytes {
		t.Errorf("under load: resident memory up to %s (largest sample: %s anonymous, %s file-backed; largest checkpoint %s), above the target of %s",
			mb(r.LoadHWMBytes), mb(r.LoadAnonBytes), mb(r.LoadFileBytes), mb(r.LargestCheckpointBytes), mb(TargetLoadRSSBytes))
	}
}
