package layout

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// developerDocs are the pages of docs/ written for cairn's developers:
// the design with its invariants, and the tests. Every other page is a
// user's, written for the engineer who runs a gateway.
var developerDocs = map[string]bool{"DESIGN.md": true, "testing.md": true}

// developerWords are what a user's page does not name: where a reader
// needs them, the page links to DESIGN.md or testing.md, which do.
// A word marked prose is looked for only outside code blocks and code
// spans.
var developerWords = []struct {
	re    *regexp.Regexp
	what  string
	prose bool
}{
	{regexp.MustCompile(`\bTest[A-Z]\w*`), "a test function (name it in docs/testing.md)", false},
	{regexp.MustCompile(`\bI(?:[1-9]|10)\b|\binvariants? I?\d`), "an invariant number (say what it promises; the numbers are DESIGN.md's)", false},
	{regexp.MustCompile(`[\w.-]+/[\w.-]+#\d+|\b(?i:issues?|PR|pull request)\s+#?\d+|/(?:issues?|pull)/\d+`), "an issue reference (history lives in commit messages)", false},
	{regexp.MustCompile(`(?:^|[\s(])#\d{2,}\b`), "an issue reference (history lives in commit messages)", true},
	{regexp.MustCompile("(?:^|[\\s(`])[\\w./-]+\\.(?:c|h|cc|cpp)\\b"), "another project's source file", false},
}

// htmlComment is a comment for the file's editors, which a reader of the
// page does not see (config.md's says how it is generated).
var htmlComment = regexp.MustCompile(`(?s)<!--.*?-->`)

// TestUserDocsAreForUsers fails when a user's page of docs/ names what
// belongs to the developers' pages: test functions, invariant numbers,
// issue references or other projects' source files. A bare #N in prose
// is taken for an issue; checkpoint ids (#46) appear in code and screen
// captures, which the rule for it skips.
func TestUserDocsAreForUsers(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, file := range files {
		if developerDocs[filepath.Base(file)] {
			continue
		}
		checked++
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := htmlComment.ReplaceAllStringFunc(string(b), func(c string) string {
			return strings.Repeat("\n", strings.Count(c, "\n")) // keep line numbers
		})
		name := strings.TrimPrefix(file, "../../")
		prose := map[int]string{} // line number → the line without code spans
		forEachLine(text, func(n int, line string) { prose[n] = codeSpan.ReplaceAllString(line, "") })
		for i, line := range strings.Split(text, "\n") {
			for _, w := range developerWords {
				l := line
				if w.prose {
					l = prose[i+1]
				}
				if m := w.re.FindString(l); m != "" {
					t.Errorf("%s:%d: %q names %s", name, i+1, strings.TrimSpace(m), w.what)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no user doc found under docs/")
	}
}

// TestUserDocsRuleCatches pins developerWords against lines it must and
// must not flag.
func TestUserDocsRuleCatches(t *testing.T) {
	flag := []string{
		"the pipeline `TestFleetTopInTmux` runs",
		"refuses to start (invariant I9 of DESIGN.md)",
		"**Ids only go up** (I6)",
		"a data race in paho, eclipse-paho/paho.mqtt.golang#703",
		"moved to one bbolt file (issue 26)",
		"see go.dev/issue/75804",
		"fixed in #2306, later",
		"every 6 seconds (`src/keepalive.c`)",
	}
	keep := []string{
		"`restored local #46 · lag 0`",
		"`waited 1.1s for score/0 · #41 · ended 1.9s ago`",
		"checkpoints (default 10) and I/O",
		"go test ./runtime -run Simulation",
		"a status every 10 s; see the test command in testing.md",
		"the file etc.conf and e.g. this",
	}
	hit := func(line string) bool {
		for _, w := range developerWords {
			l := line
			if w.prose {
				l = codeSpan.ReplaceAllString(line, "")
			}
			if w.re.MatchString(l) {
				return true
			}
		}
		return false
	}
	for _, l := range flag {
		if !hit(l) {
			t.Errorf("not flagged: %q", l)
		}
	}
	for _, l := range keep {
		if hit(l) {
			t.Errorf("flagged: %q", l)
		}
	}
}

// testNameRe is a Go test function's name as the docs cite it; a name
// qualified by a package (x/net's nettest.TestConn) is another module's.
var testNameRe = regexp.MustCompile(`(?:^|[^.\w])(Test[A-Z]\w*)`)

// TestDocsNameRealTests fails when README.md, DESIGN.md or testing.md
// names a test function that no _test.go file of the module declares: a
// promise that links to its test must link to one that runs.
func TestDocsNameRealTests(t *testing.T) {
	// declared starts with the fields of `go list` that look like test
	// names, which DESIGN.md cites for the import rules.
	declared := map[string]bool{"TestImports": true, "TestGoFiles": true}
	decl := regexp.MustCompile(`(?m)^func (Test[A-Z]\w*)\(`)
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "third_party" || strings.HasPrefix(d.Name(), ".") && path != "../..") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			declared[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cited := 0
	for _, file := range []string{"../../README.md", "../../docs/DESIGN.md", "../../docs/testing.md"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(b), "\n") {
			for _, m := range testNameRe.FindAllStringSubmatch(line, -1) {
				name := m[1]
				cited++
				if !declared[name] {
					t.Errorf("%s:%d: names %s, which no test file declares", strings.TrimPrefix(file, "../../"), n+1, name)
				}
			}
		}
	}
	if cited == 0 {
		t.Fatal("no test named in README.md, DESIGN.md or testing.md: is the pattern broken?")
	}
}
