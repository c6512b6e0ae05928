package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/needs"
)

// maxExposure is the highest `systemd-analyze security` rating the unit
// may have: 2.5, "OK" on its scale (0 to 10, lower is better).
const maxExposure = 2.5

// readUnit returns configs/cairn.service with ExecStart's binary
// replaced by bin, as the .deb replaces it by /usr/bin/cairn.
func readUnit(t *testing.T, bin string) string {
	t.Helper()
	unit, err := os.ReadFile("../../configs/cairn.service")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(unit), "ExecStart=/usr/local/bin/cairn ", "ExecStart="+bin+" ", 1)
	if s == string(unit) {
		t.Fatal("configs/cairn.service has no line ExecStart=/usr/local/bin/cairn ...")
	}
	return s
}

// TestUnitSecurity checks configs/cairn.service with systemd's own tools,
// offline (no running systemd is needed): `systemd-analyze verify` finds
// nothing to say, and `systemd-analyze security` rates it at most
// maxExposure. It also keeps the lines the agent's behaviour depends on.
func TestUnitSecurity(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		needs.Missing(t, "systemd-analyze", "apt-get install systemd", "CAIRN_REQUIRE_SYSTEMD_ANALYZE")
	}
	// verify checks that ExecStart's binary exists and is executable.
	unit := readUnit(t, cairntest.Build(t, "cairn"))
	for _, line := range []string{"Type=notify", "Restart=on-failure", "WatchdogSec=60", "TimeoutStopSec=30",
		"StateDirectory=cairn", "StateDirectoryMode=0750", "User=cairn", "Group=cairn"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(line) + `$`).MatchString(unit) {
			t.Errorf("the unit has no line %q", line)
		}
	}
	if !regexp.MustCompile(`(?m)^ExecStart=\S+ run -c /etc/cairn/pipeline.yaml --control-group cairn$`).MatchString(unit) {
		t.Error("the unit's ExecStart does not run the pipeline /etc/cairn/pipeline.yaml with --control-group cairn")
	}
	path := filepath.Join(t.TempDir(), "cairn.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}

	out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}

	out, err = exec.Command("systemd-analyze", "security", "--offline=true", path).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for cairn\.service: (\d+\.\d)`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	exposure, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security: %.1f", exposure)
	if exposure > maxExposure {
		t.Errorf("systemd-analyze security rates the unit %.1f, more than %.1f:\n%s", exposure, maxExposure, out)
	}
}
