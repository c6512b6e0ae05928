package needs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a T that records how the test would have ended.
type recorder struct{ skipped, failed string }

func (r *recorder) Helper()                   {}
func (r *recorder) Name() string              { return "TestSomething" }
func (r *recorder) Skipf(f string, a ...any)  { r.skipped = f }
func (r *recorder) Fatalf(f string, a ...any) { r.failed = f }

func TestMissing(t *testing.T) {
	skips := filepath.Join(t.TempDir(), "skips")
	t.Setenv("CAIRN_SKIPS", skips)
	t.Setenv("CAIRN_REQUIRE_THING", "")
	var r recorder
	Missing(&r, "thing", "apt-get install thing", "CAIRN_REQUIRE_THING")
	data, err := os.ReadFile(skips)
	if r.skipped == "" || r.failed != "" || err != nil || string(data) != "thing\tCAIRN_REQUIRE_THING\tapt-get install thing\tTestSomething\n" {
		t.Fatalf("not required: skipped %q, failed %q; listed %q (%v)", r.skipped, r.failed, data, err)
	}
	t.Setenv("CAIRN_REQUIRE_THING", "1")
	r = recorder{}
	Missing(&r, "thing", "apt-get install thing", "CAIRN_REQUIRE_THING")
	if r.failed == "" || !strings.Contains(r.failed, "required") {
		t.Fatalf("required: skipped %q, failed %q", r.skipped, r.failed)
	}
}
