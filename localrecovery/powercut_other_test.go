//go:build !(linux && (amd64 || arm64))

package localrecovery_test

import (
	"runtime"
	"testing"
)

// TestPowerCut (powercut_test.go) runs the store through a FUSE file
// system, internal/testing/fusecut, which go-fuse builds for 64-bit Linux
// only: here it is said to be skipped, not left out unseen.
func TestPowerCut(t *testing.T) {
	t.Skipf("the power-cut test's FUSE file system (internal/testing/fusecut, go-fuse) does not build for %s/%s", runtime.GOOS, runtime.GOARCH)
}
