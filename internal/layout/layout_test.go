package layout

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/cairn-edge/cairn"

var update = flag.Bool("update", false, "write docs/DESIGN.md's package table from the rules")

// rule is a package's row of docs/DESIGN.md section 3: its job, and what it
// may import besides the standard library.
type rule struct {
	pkg string // module-relative
	job string
	// allowed are import path prefixes: module-relative for cairn's own
	// packages, full paths for others. An entry may go on, after a space,
	// with a note for the reader, in parentheses.
	allowed []string
	// noIO forbids the standard library's packages that reach the outside.
	noIO bool
	// tests is what the package's tests may import besides allowed, the
	// package itself and the test helpers (testHelpers).
	tests []string
}

// rules are the packages of the module, in the order of the table of
// docs/DESIGN.md section 3, which TestDesignTable makes from them.
var rules = []rule{
	{pkg: "wire", job: "the one codec of the binary formats: versioned headers, varints, fixed-width integers, length-prefixed bytes, counts bounded by the input; a decoder that never panics and allocates no more than its input"},
	{pkg: "graph", job: "stream elements, operator/source API, keyed state in key groups (encoded in an arena per shard), timers, snapshot encoding, topology builder, built-in operators",
		allowed: []string{"wire", "github.com/DataDog/sketches-go/ddsketch (the quantiles of windows)", "github.com/axiomhq/hyperloglog (their distinct counts)"}},
	{pkg: "graph/exprop", job: "filter and map operators in expr-lang/expr, the keys of key_by, and the one compile of their expressions, typed by what is known of the records' fields, that validation shares",
		allowed: []string{"graph", "github.com/expr-lang/expr", "github.com/zeebo/xxh3 (the hashes of the values a window counts)"}},
	{pkg: "checkpoint", job: "the protocol as **deterministic state machines**: barrier `Handler`, `Coordinator`, manifests and statistics, the `Store` interface, an in-memory store — no goroutines, no `time.Now`: all I/O and time are the runtime's",
		allowed: []string{"graph"}, noIO: true, tests: []string{"github.com/cockroachdb/datadriven"}},
	{pkg: "runtime", job: "executes a topology: a goroutine per subtask, batches over credit-limited channels into each subtask's inbox (a state machine applying the barrier handler's Block/Unblock effects and the capture of channel state, driven alike by the goroutines and the seeded simulation), the coordinator's event loop (asleep until a tick is due), asynchronous and incremental snapshots, snapshots and checkpoints that change nothing stored once, restore of what `localrecovery` chose (decoding, key groups redistributed, fallback past damage); its status: each subtask's counters, alignment and watermark, the acknowledgements of a checkpoint in flight as they come, and every blocking alignment that ended (`Options.OnAligned`)",
		allowed: []string{"graph", "checkpoint", "localrecovery (its candidates and rule of fallback)", "wire"},
		tests:   []string{"bench", "encoding/gob (the reference for channel state of version 1, which the runtime reads without it)"}},
	{pkg: "datadir", job: "the files of the data directory opened without following a link, and refused when they have another name"},
	{pkg: "seglog", job: "an append-only log of checksummed records in segment files: group commit, torn tails cut, damage read past, whole-segment truncation, a page-exact write meter; the ingest log's and the dead letters' (and, read-only, the checkpoint store of the cairn before, to move it)",
		allowed: []string{"datadir"}, tests: []string{"internal/procfs"}},
	{pkg: "localrecovery", job: "local recovery: the checkpoint store in one bbolt file (a transaction per checkpoint: its snapshots in chunks, each checksummed, its completion record, retention), checked when opened and set aside when damaged, the move of earlier stores (the segmented log, the earliest bbolt formats); and what a job restores: the candidates in the agent's order (a savepoint; the local store's checkpoints, newest first; this device's uploads, else `restore_from_device`'s), each blob verified once and the chosen one's held for the runtime, the id counter raised above this device's uploads, fallback only past damage, the refusal of a start that would lose state",
		allowed: []string{"checkpoint", "graph", "datadir", "seglog (to read the earlier store)", "wire", "go.etcd.io/bbolt"},
		tests:   []string{"runtime", "bench", "internal/procfs"}},
	{pkg: "ingest", job: "the durable ingest logs on `seglog`, a log per source subtask, their groups and dead letters, opened in one place (`Open`), and the move of an earlier bbolt log",
		allowed: []string{"seglog", "wire", "go.etcd.io/bbolt (to read the earlier log)"}, tests: []string{"bench"}},
	{pkg: "mqttio", job: "MQTT: the source (on an `ingest` log), the two-phase-commit sink, the topic rules (`CheckTopic`, `TopicTemplate`: `broker` shares them), the publisher of an agent's status and the watcher of a fleet's",
		allowed: []string{"graph", "ingest", "wire", "github.com/eclipse/paho.mqtt.golang", "golang.org/x/net/proxy (paho's)"},
		tests: []string{"checkpoint", "runtime", "localrecovery", "bench", "broker (in an external test, which starts it for the others)", "github.com/cockroachdb/datadriven",
			"github.com/mochi-mqtt/server/v2 (a broker with TLS)", "golang.org/x/net/nettest"}},
	{pkg: "broker", job: "the embedded MQTT server (mochi-mqtt) for the gateway's devices: their users and grants, its limits (`Limits`, enforced by a mochi hook and a listener of its own; the agent's clients on a socket of their own), the share of the sessions whose client is gone; its sessions in memory only",
		allowed: []string{"mqttio (the topic rules, `Quiet`)", "github.com/mochi-mqtt/server/v2"},
		tests:   []string{"github.com/eclipse/paho.mqtt.golang"}},
	{pkg: "remote", job: "upload of completed checkpoints to S3-compatible storage (minio-go) and a read-only store of a device's uploads",
		allowed: []string{"checkpoint", "github.com/minio/minio-go/v7"}, tests: []string{"graph", "runtime", "localrecovery", "bench"}},
	{pkg: "agent", job: "the daemon: builds the graph from a pipeline file, runs it with its stores, control API, reload, metrics, disk wear, the fleet status it publishes (and that `cairn top --fleet` watches), on one processor while the load is light (`procs.go`), systemd notification",
		allowed: []string{"graph", "checkpoint", "runtime", "localrecovery", "datadir", "seglog", "ingest", "mqttio", "broker", "remote", "agent/api", "agent/config", "agent/savepoint", "internal/procfs",
			"github.com/fsnotify/fsnotify", "golang.org/x/sys/unix"},
		tests: []string{"github.com/eclipse/paho.mqtt.golang"}},
	{pkg: "agent/config", job: "pipeline files: yaml.v3 nodes, every error with its position and none showing a value from the environment; `docs/config.md` made from its types; the operator kinds, each defined once: settings, checks, docs and constructor (section 5)",
		allowed: []string{"graph", "graph/exprop", "checkpoint", "mqttio", "broker", "remote", "go.yaml.in/yaml/v3", "github.com/dustin/go-humanize"}},
	{pkg: "agent/api", job: "wire types of the control API and its client, and of the fleet status (`GatewayStatus`, versioned)"},
	{pkg: "agent/savepoint", job: "self-contained savepoint files",
		allowed: []string{"checkpoint", "wire"}},
	{pkg: "tui", job: "`cairn top`: a bubbletea v2 client of the control API; `cairn top --fleet`: every gateway's status, as the agent's watcher hands them in",
		allowed: []string{"agent/api", "charm.land/", "github.com/charmbracelet/"}},
	{pkg: "bench", job: "the scenarios of `cairn-bench`, shared with the `go test -bench` benchmarks",
		allowed: []string{"graph", "checkpoint", "runtime", "localrecovery", "ingest", "mqttio", "broker", "agent/api", "internal/procfs", "internal/testing/loopback", "internal/testing/mosquittotest",
			"github.com/eclipse/paho.mqtt.golang"}, tests: []string{"internal/testing/cairntest"}},
	{pkg: "cmd/cairn", job: "the gateway's binary, `cairn`: it links no test helper (`internal/layout` checks)",
		allowed: []string{"agent", "agent/api", "agent/config", "tui"},
		tests:   []string{"graph", "checkpoint", "ingest", "mqttio", "remote", "internal/procfs", "go.etcd.io/bbolt", "github.com/charmbracelet/x/exp/golden", "github.com/eclipse/paho.mqtt.golang", "github.com/mochi-mqtt/server/v2/packets", "golang.org/x/sys/unix"}},
	{pkg: "cmd/cairn-bench", job: "`cairn-bench`, the benchmarks, a binary of their own (released beside `cairn`, not in the .deb)",
		allowed: []string{"bench"}},
	{pkg: "torture", job: "the crash-torture harness (tests only, build tag `torture`)",
		tests: []string{"agent/api", "github.com/eclipse/paho.mqtt.golang"}},
	{pkg: "internal/procfs", job: "a process's writes and CPU from /proc: the one package of `internal/` the gateway links"},
	{pkg: "internal/layout", job: "the import rules above, enforced, this table made from them, and the documentation's links and the README's length checked"},
	{pkg: "internal/debcopyright", job: "a command of `.ci/release`: the .deb's copyright file from what a binary links, each licence identified by its text"},
	{pkg: "internal/testing/boltcheck", job: "bbolt's check of the store's file, and the damage tests do to it",
		allowed: []string{"go.etcd.io/bbolt"}},
	{pkg: "internal/testing/cairntest", job: "cairn's binaries in tests: built once per test process for the test's machine, run, their logs awaited, a running agent's status awaited; whether an emulator runs the test",
		allowed: []string{"internal/testing/testwait"}},
	{pkg: "internal/testing/fusecut", job: "a file system that loses unsynced writes below bbolt: FUSE, go-fuse",
		allowed: []string{"github.com/hanwen/go-fuse/v2"}},
	{pkg: "internal/testing/loopback", job: "a free address on loopback for a test's server"},
	{pkg: "internal/testing/mosquittotest", job: "a mosquitto for a test, on loopback",
		allowed: []string{"internal/testing/loopback", "internal/testing/needs", "internal/testing/testwait"}},
	{pkg: "internal/testing/mqttraw", job: "MQTT packet by packet over a bare connection, as an attacker sends it",
		allowed: []string{"github.com/mochi-mqtt/server/v2/packets"}},
	{pkg: "internal/testing/needs", job: "a test's program from outside Go: skipped and listed, or required"},
	{pkg: "internal/testing/powercut", job: "a file system (`seglog.FS`) that loses unsynced writes at a power cut",
		allowed: []string{"seglog"}},
	{pkg: "internal/testing/s3test", job: "a versitygw, an S3-compatible server, for a test",
		allowed: []string{"internal/testing/loopback", "internal/testing/needs", "internal/testing/testlog", "internal/testing/testwait", "github.com/minio/minio-go/v7"}},
	{pkg: "internal/testing/sample", job: "the stored samples of the binary formats: bytes an earlier cairn wrote, which tests decode"},
	{pkg: "internal/testing/testlog", job: "a log tests read while it is written"},
	{pkg: "internal/testing/testwait", job: "the one way a test waits: a condition polled, a channel received, with a deadline"},
}

// elsewhere are the table's rows of code outside the module's packages,
// which go list does not list: checked by no rule here.
var elsewhere = [][2]string{
	{"third_party/expr", "expr-lang/expr v1.17.8 without Go-method lookups, for the binary's size (`third_party/README.md`): a module of its own, built in by a replace directive"},
	{"third_party/sketches-go", "DataDog/sketches-go v1.4.8 (DDSketch) without protobuf, for the binary's size (`third_party/README.md`): a module of its own, built in by a replace directive"},
}

var ioPackages = []string{"os", "net", "syscall", "plugin", "unsafe"}

// forbidden are standard library packages no cairn package imports, and
// why; a package's tests may, where its rule's tests name them.
var forbidden = map[string]string{
	"encoding/gob": "binary formats are package wire's",
}

// testHelpers are what every package's tests may import besides their
// rule's: the helpers of internal/testing.
const testHelpers = "internal/testing/"

// belowInternal are the only cairn packages outside internal/ that a
// package under internal/ may import: the file layer, whose rules let it
// import nothing of cairn's but each other (powercut implements
// seglog.FS). Nothing under internal/ depends on wire, graph or what is
// built on them, so any package's tests may use any helper.
var belowInternal = []string{"datadir", "seglog"}

// listed is a package as go list reports it.
type listed struct {
	ImportPath                         string
	Imports, TestImports, XTestImports []string
}

// goList lists the module's packages, the torture harness's build tag on.
func goList(t *testing.T) []listed {
	t.Helper()
	out, err := exec.Command("go", "list", "-tags", "torture", "-json=ImportPath,Imports,TestImports,XTestImports", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func ruleOf(pkg string) (rule, bool) {
	i := slices.IndexFunc(rules, func(r rule) bool { return r.pkg == pkg })
	if i < 0 {
		return rule{}, false
	}
	return rules[i], true
}

// TestPackageDependencies checks every package's imports, and its tests',
// against its rule.
func TestPackageDependencies(t *testing.T) {
	seen := 0
	for _, p := range goList(t) {
		pkg := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		r, ok := ruleOf(pkg)
		if !ok {
			t.Errorf("package %s has no rule in internal/layout, which makes docs/DESIGN.md's table: add one", pkg)
			continue
		}
		seen++
		for _, imp := range p.Imports {
			if msg := check(r, imp, false); msg != "" {
				t.Errorf("%s imports %s: %s", pkg, imp, msg)
			}
		}
		for _, imp := range append(p.TestImports, p.XTestImports...) {
			if msg := check(r, imp, true); msg != "" {
				t.Errorf("%s's tests import %s: %s", pkg, imp, msg)
			}
		}
	}
	if seen < len(rules) {
		t.Fatalf("checked %d packages, want the %d of the layout", seen, len(rules))
	}
}

// TestInternalImportsNothingAbove: a package under internal/, and its
// tests, import of cairn's packages only others under internal/ and
// belowInternal, whose rules let them import nothing else of cairn's.
func TestInternalImportsNothingAbove(t *testing.T) {
	for _, r := range rules {
		internal := strings.HasPrefix(r.pkg, "internal/")
		if !internal && !slices.Contains(belowInternal, r.pkg) {
			continue
		}
		may := r.allowed
		if internal {
			may = slices.Concat(r.allowed, r.tests)
		}
		for _, a := range may {
			path, _, _ := strings.Cut(a, " ")
			if own := !strings.Contains(strings.Split(path, "/")[0], "."); !own || strings.HasPrefix(path, "encoding/") {
				continue
			}
			if !slices.Contains(belowInternal, path) && !(internal && strings.HasPrefix(path, "internal/")) {
				t.Errorf("%s may import %s, above internal/ (docs/DESIGN.md section 3)", r.pkg, path)
			}
		}
	}
}

// gatewayInternal are the packages of internal/ that the gateway's binary
// may link: the product's. The others are for tests and benchmarks, and
// the repository's tools.
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

// check says why r does not let its package (or, if test, its tests)
// import imp; "" if it does.
func check(r rule, imp string, test bool) string {
	own := strings.HasPrefix(imp, module+"/")
	std := !own && !strings.Contains(strings.Split(imp, "/")[0], ".")
	allowed := r.allowed
	if test {
		allowed = slices.Concat(allowed, r.tests, []string{r.pkg, testHelpers})
	}
	if why, ok := forbidden[imp]; ok && !(test && permits(allowed, imp)) {
		return why + " (docs/DESIGN.md section 3)"
	}
	if std {
		if r.noIO && !test {
			for _, bad := range ioPackages {
				if imp == bad || strings.HasPrefix(imp, bad+"/") {
					return "this package does no I/O"
				}
			}
		}
		return ""
	}
	if permits(allowed, strings.TrimPrefix(imp, module+"/")) {
		return ""
	}
	return "not allowed by docs/DESIGN.md section 3"
}

// permits says whether one of allowed is path or a prefix of it.
func permits(allowed []string, path string) bool {
	for _, a := range allowed {
		a, _, _ = strings.Cut(a, " ")
		if path == a || strings.HasPrefix(path, strings.TrimSuffix(a, "/")+"/") {
			return true
		}
	}
	return false
}

// designFile is docs/DESIGN.md, from this package's directory; the table
// is between these two lines of it.
const (
	designFile  = "../../docs/DESIGN.md"
	tableStart  = "<!-- made by internal/layout from its rules: " + regenerate + " -->"
	tableEnd    = "<!-- end of the table made by internal/layout -->"
	regenerate  = "go test ./internal/layout -run TestDesignTable -update"
	tableHeader = "| package | job | may import |\n|---|---|---|\n"
)

// table is the package table of docs/DESIGN.md section 3, made from the
// rules.
func table() string {
	var b strings.Builder
	b.WriteString(tableHeader)
	for _, r := range rules {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.pkg, r.job, mayImport(r))
	}
	for _, e := range elsewhere {
		fmt.Fprintf(&b, "| `%s` | %s | — |\n", e[0], e[1])
	}
	var forbid []string
	for imp, why := range forbidden {
		forbid = append(forbid, fmt.Sprintf("`%s` (%s)", imp, why))
	}
	slices.Sort(forbid)
	fmt.Fprintf(&b, "\nEvery package may import the standard library but %s; every package's tests may also import the test helpers, `%s…`. "+
		"A package under `internal/` imports, of cairn's, only packages under `internal/` and %s, which import nothing else of cairn's.\n",
		strings.Join(forbid, ", "), testHelpers, names(belowInternal, " and "))
	return b.String()
}

// mayImport is the table's last column for r.
func mayImport(r rule) string {
	s := "std lib"
	if len(r.allowed) > 0 {
		s = names(r.allowed, ", ")
	}
	if r.noIO {
		s += " — no " + names(ioPackages, ", ")
	}
	if len(r.tests) > 0 {
		s += "; its tests also " + names(r.tests, ", ")
	}
	if len(r.allowed) == 0 && len(r.tests) > 0 {
		s = "— (tests only); its tests " + names(r.tests, ", ")
	}
	return s
}

// names shows import paths, each with its note, joined by sep.
func names(paths []string, sep string) string {
	var out []string
	for _, p := range paths {
		path, note, _ := strings.Cut(p, " ")
		if strings.HasSuffix(path, "/") {
			path += "…"
		}
		out = append(out, strings.TrimSpace("`"+path+"` "+note))
	}
	return strings.Join(out, sep)
}

// TestDesignTable checks that docs/DESIGN.md's package table is what the
// rules make of it; with -update, it writes it.
func TestDesignTable(t *testing.T) {
	doc, err := os.ReadFile(designFile)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := strings.Cut(string(doc), tableStart+"\n")
	current, after, ok2 := strings.Cut(rest, tableEnd)
	if !ok || !ok2 {
		t.Fatalf("docs/DESIGN.md lacks the lines around its package table:\n%s\n%s", tableStart, tableEnd)
	}
	made := table()
	if *update {
		if err := os.WriteFile(designFile, []byte(before+tableStart+"\n"+made+tableEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if current != made {
		c, m := strings.Split(current, "\n"), strings.Split(made, "\n")
		i := 0
		for i < len(c) && i < len(m) && c[i] == m[i] {
			i++
		}
		line := func(lines []string) string {
			if i < len(lines) {
				return lines[i]
			}
			return "(the end)"
		}
		t.Fatalf("docs/DESIGN.md's package table differs from what internal/layout's rules make of it, at its line %d:\n"+
			"  file: %s\n  made: %s\nEdit the rules in internal/layout, not the table; then: %s", i+1, line(c), line(m), regenerate)
	}
}
