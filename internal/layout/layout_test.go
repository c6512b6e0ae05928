package layout

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/cairn-edge/cairn"

// rule says what a package may import besides the standard library.
type rule struct {
	// allowed are import path prefixes (module-relative for cairn's own
	// packages, full paths for others).
	allowed []string
	// noIO forbids the standard library's packages that reach the outside.
	noIO bool
}

// rules is the table of docs/DESIGN.md section 3;
// TestRulesFollowTheDesign keeps the two in step.
var rules = map[string]rule{
	"wire":            {},
	"graph":           {allowed: []string{"wire"}},
	"graph/exprop":    {allowed: []string{"graph", "github.com/expr-lang/expr"}},
	"checkpoint":      {allowed: []string{"graph"}, noIO: true},
	"runtime":         {allowed: []string{"graph", "checkpoint", "localrecovery", "wire"}},
	"localrecovery":   {allowed: []string{"checkpoint", "graph", "datadir", "seglog", "wire", "go.etcd.io/bbolt"}},
	"remote":          {allowed: []string{"checkpoint", "graph", "github.com/minio/minio-go/v7"}},
	"datadir":         {},
	"seglog":          {allowed: []string{"datadir"}},
	"ingest":          {allowed: []string{"seglog", "wire", "go.etcd.io/bbolt"}},
	"mqttio":          {allowed: []string{"graph", "ingest", "wire", "github.com/eclipse/paho.mqtt.golang", "golang.org/x/net/proxy", "github.com/mochi-mqtt/server"}},
	"agent":           {allowed: []string{"graph", "checkpoint", "runtime", "localrecovery", "datadir", "seglog", "ingest", "mqttio", "remote", "internal/procfs", "agent/api", "agent/config", "agent/savepoint", "github.com/", "go.etcd.io/", "go.yaml.in/yaml/v3", "golang.org/x/"}},
	"agent/config":    {allowed: []string{"graph", "checkpoint", "mqttio", "remote", "go.yaml.in/yaml/v3", "github.com/dustin/go-humanize"}},
	"agent/api":       {},
	"agent/savepoint": {allowed: []string{"checkpoint", "wire"}},
	"tui":             {allowed: []string{"agent/api", "charm.land/", "github.com/charmbracelet/"}},
	"bench":           {allowed: []string{"graph", "checkpoint", "runtime", "localrecovery", "ingest", "mqttio", "agent/api", "internal/loopback", "internal/mosquittotest", "internal/procfs", "github.com/eclipse/paho.mqtt.golang"}},
	"cmd/cairn":       {allowed: []string{"agent", "tui"}},
	"cmd/cairn-bench": {allowed: []string{"bench"}},
}

var ioPackages = []string{"os", "net", "syscall", "plugin", "unsafe"}

// forbidden are standard library packages no cairn package imports, and
// why.
var forbidden = map[string]string{
	"encoding/gob": "binary formats are package wire's",
}

func TestPackageDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		r, ok := rules[pkg]
		if !ok {
			if !strings.HasPrefix(pkg, "internal/") {
				t.Errorf("package %s is not in docs/DESIGN.md's layout table; add a rule for it", pkg)
			}
			continue
		}
		seen++
		for _, imp := range fields[1:] {
			if msg := check(r, imp); msg != "" {
				t.Errorf("%s imports %s: %s", pkg, imp, msg)
			}
		}
	}
	if seen < len(rules) {
		t.Fatalf("checked %d packages, want the %d of the layout", seen, len(rules))
	}
}

// gatewayInternal are the packages of internal/ that the gateway's binary
// may link: the product's. The others are for tests and benchmarks.
var gatewayInternal = []string{"internal/procfs"}

// TestGatewayLinksNoTestHelper: the gateway's binary, cmd/cairn, links
// neither the benchmarks nor a helper made for tests, not even through
// another package (docs/DESIGN.md section 3).
func TestGatewayLinksNoTestHelper(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", module+"/cmd/cairn").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for pkg := range strings.Lines(string(out)) {
		rel, own := strings.CutPrefix(strings.TrimSpace(pkg), module+"/")
		if !own {
			continue
		}
		if rel == "bench" || strings.HasPrefix(rel, "internal/") && !slices.Contains(gatewayInternal, rel) {
			t.Errorf("cmd/cairn links %s, which is for tests and benchmarks", rel)
		}
	}
}

func check(r rule, imp string) string {
	own := strings.HasPrefix(imp, module+"/")
	std := !own && !strings.Contains(strings.Split(imp, "/")[0], ".")
	if why, ok := forbidden[imp]; ok {
		return why + " (docs/DESIGN.md section 3)"
	}
	if std {
		if r.noIO {
			for _, bad := range ioPackages {
				if imp == bad || strings.HasPrefix(imp, bad+"/") {
					return "this package does no I/O"
				}
			}
		}
		return ""
	}
	rel := imp
	if own {
		rel = strings.TrimPrefix(imp, module+"/")
	}
	for _, a := range r.allowed {
		if rel == a || strings.HasPrefix(rel, strings.TrimSuffix(a, "/")+"/") || strings.HasSuffix(a, "/") && strings.HasPrefix(rel, a) {
			return ""
		}
	}
	return "not allowed by docs/DESIGN.md section 3"
}

// TestRulesFollowTheDesign: every package with a rule is in the table of
// docs/DESIGN.md section 3, and every package of the table has a rule,
// but the torture harness, the internal helpers and third_party's
// modules (copies of others', built in by a replace directive).
func TestRulesFollowTheDesign(t *testing.T) {
	doc, err := os.ReadFile("../../docs/DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "## 3. Packages")
	section, _, _ = strings.Cut(section, "\n## ")
	inTable := map[string]bool{}
	for line := range strings.Lines(section) {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			name, _, _ = strings.Cut(name, "`")
			inTable[name] = true
		}
	}
	for pkg := range rules {
		if !inTable[pkg] {
			t.Errorf("package %s has a rule but is not in docs/DESIGN.md's table", pkg)
		}
	}
	for pkg := range inTable {
		if _, ok := rules[pkg]; !ok && pkg != "torture" && !strings.HasPrefix(pkg, "internal/") && !strings.HasPrefix(pkg, "third_party/") {
			t.Errorf("docs/DESIGN.md's table names %s, which has no rule here", pkg)
		}
	}
}
