package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

// TestValidateDedentedLine: `cairn validate` names the line a user
// dedented, not the line where the block it broke began, for a dedent
// that is no valid YAML (a sink's topic at the column of the list's
// dashes) and one that is (an operator's aggregate at the column of the
// sections), and exits 2.
func TestValidateDedentedLine(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	head := "agent:\n  data_dir: d\nbrokers:\n  local:\n    embedded: true\n"
	for _, c := range []struct{ name, file, want string }{
		{"topic", head + "sinks:\n  - id: out\n    input: s\n    broker: local\n  topic: x\n",
			`:10:3: not valid YAML: "topic" is indented less than the sink it seems to belong to (line 7): indent it to column 5`},
		{"aggregate", head + "sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\noperators:\n  - id: avg\n    type: window\n" +
			"    inputs: [s]\n    window: {kind: tumbling, size: 1s}\naggregate: avg\nsinks:\n  - id: out\n    input: avg\n    broker: local\n    topic: x\n",
			`:14:1: "aggregate" is indented less than the operator it seems to belong to (line 10): indent it to column 5`},
	} {
		file := filepath.Join(dir, c.name+".yaml")
		if err := os.WriteFile(file, []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		out, code := runCairn(t, bin, "validate", file)
		if want := file + c.want; code != 2 || strings.TrimSpace(out) != want {
			t.Errorf("%s: cairn validate exits %d:\n%s\nwant 2 and only\n%s", c.name, code, out, want)
		}
	}
}
