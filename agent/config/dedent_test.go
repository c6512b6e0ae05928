package config

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// anyEnv sets every variable a file names, to a value a field of any kind
// takes.
func anyEnv(string) (string, bool) { return "1", true }

// TestDedentedSinkTopic: a sink's last key dedented to the column of the
// list's dashes is at its own line, not at the list's (go-yaml: "line 6:
// did not find expected '-' indicator").
func TestDedentedSinkTopic(t *testing.T) {
	file := "agent:\n  data_dir: d\nbrokers:\n  local:\n    embedded: true\nsinks:\n  - id: out\n    input: s\n    broker: local\n  topic: x\n"
	_, errs := Parse("pipeline.yaml", []byte(file), env(nil))
	want := `pipeline.yaml:10:3: not valid YAML: "topic" is indented less than the sink it seems to belong to (line 7): indent it to column 5`
	if errs.Error() != want {
		t.Errorf("got  %v\nwant %s", errs, want)
	}
}

// TestDedentedAggregate: an operator's last key dedented to the column of
// the file's sections is valid YAML that makes it a section, the operator
// short of it; the error is at the key's own line, alone.
func TestDedentedAggregate(t *testing.T) {
	data, err := os.ReadFile("../../configs/skew.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	op, at := slices.Index(lines, "  - id: drift"), slices.Index(lines, "    aggregate: avg")
	if op < 0 || at < op {
		t.Fatal("configs/skew.yaml has no operator drift with `aggregate: avg`")
	}
	lines[at] = strings.TrimLeft(lines[at], " ")
	_, errs := Parse("skew.yaml", []byte(strings.Join(lines, "\n")), env(nil))
	want := fmt.Sprintf(`skew.yaml:%d:1: "aggregate" is indented less than the operator it seems to belong to (line %d): indent it to column 5`, at+1, op+1)
	if errs.Error() != want {
		t.Errorf("got  %v\nwant %s", errs, want)
	}
}

// TestDedentProperty: in every valid pipeline file the project holds (its
// configs, the examples in its docs, testdata/dedent), dedent one line, by
// a level or to the column of the block around it. If the file is then
// refused, the first error names that line, or it is the line below saying
// that it is deeper than this one (either may be the mistake); if it is
// accepted, it means what the original did (a line that goes on with a
// flow collection, say). The mutations are a seeded sample, the seed
// logged; CAIRN_DEDENT_SEED replays one, CAIRN_DEDENT_ALL=1 tries them all.
func TestDedentProperty(t *testing.T) {
	files := validFiles(t)
	type mutation struct {
		file  string
		lines []string
		line  int // from 1
		to    int // from 0
	}
	var all []mutation
	for _, f := range files {
		lines := strings.Split(f.text, "\n")
		pl := parseLines(lines)
		text := blockText(pl)
		for k, l := range pl {
			if text[k] || l.indent == 0 {
				continue
			}
			for _, to := range dedentTargets(pl, text, k) {
				all = append(all, mutation{f.name, lines, l.n, to})
			}
		}
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CAIRN_DEDENT_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	sample := all
	if os.Getenv("CAIRN_DEDENT_ALL") == "" && len(all) > 200 {
		r := rand.New(rand.NewPCG(seed, seed))
		r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		sample = all[:200]
	}
	t.Logf("%d files, %d dedents, trying %d (CAIRN_DEDENT_SEED=%d)", len(files), len(all), len(sample), seed)
	refused, same := 0, 0
	for _, m := range sample {
		lines := append([]string(nil), m.lines...)
		l := lines[m.line-1]
		lines[m.line-1] = strings.Repeat(" ", m.to) + strings.TrimLeft(l, " ")
		moved := strings.Join(lines, "\n")
		where := fmt.Sprintf("%s, line %d to column %d", m.file, m.line, m.to+1)
		_, errs := Parse(m.file, []byte(moved), anyEnv)
		if len(errs) > 0 {
			refused++
			if e := errs[0]; e.Line != m.line && !(e.Line == nextLine(lines, m.line) && strings.Contains(e.Msg, "more than the one above it")) {
				t.Errorf("%s: refused at another line:\n%s\n%s", where, errs, excerpt(lines, m.line))
			}
			continue
		}
		if !sameMeaning(m.lines, lines) {
			t.Errorf("%s: accepted, and means something else:\n%s", where, excerpt(lines, m.line))
		}
		same++
	}
	t.Logf("refused %d, accepted meaning the same %d", refused, same)
}

// sameMeaning reports whether two files hold the same YAML values.
func sameMeaning(before, after []string) bool {
	var a, b any
	return yaml.Unmarshal([]byte(strings.Join(before, "\n")), &a) == nil && yaml.Unmarshal([]byte(strings.Join(after, "\n")), &b) == nil &&
		reflect.DeepEqual(a, b)
}

// dedentTargets are the columns pl[k] is dedented to: one level less (two
// spaces, one), and the column of the block around it.
func dedentTargets(pl []yamlLine, text []bool, k int) []int {
	l := pl[k]
	var to []int
	add := func(c int) {
		if c >= 0 && c < l.indent && !slices.Contains(to, c) {
			to = append(to, c)
		}
	}
	add(l.indent - 2)
	add(l.indent - 1)
	for j := k - 1; j >= 0; j-- {
		if !text[j] && pl[j].indent < l.indent {
			add(pl[j].indent)
			break
		}
	}
	return to
}

// nextLine returns the number of the first line after n that holds
// something.
func nextLine(lines []string, n int) int {
	for _, l := range parseLines(lines) {
		if l.n > n {
			return l.n
		}
	}
	return 0
}

// excerpt shows the lines around n, n marked.
func excerpt(lines []string, n int) string {
	var b strings.Builder
	for i := max(0, n-5); i < min(len(lines), n+3); i++ {
		mark := "  "
		if i == n-1 {
			mark = "> "
		}
		fmt.Fprintf(&b, "%s%3d|%s\n", mark, i+1, lines[i])
	}
	return b.String()
}

type exampleFile struct{ name, text string }

var yamlFence = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// validFiles returns the pipeline files the project holds that Parse
// accepts, every variable set: configs/, the ```yaml examples of README.md
// and docs/, testdata/dedent.
func validFiles(t *testing.T) []exampleFile {
	var files []exampleFile
	paths, _ := filepath.Glob("../../configs/*.yaml")
	more, _ := filepath.Glob("testdata/dedent/*.yaml")
	for _, p := range append(paths, more...) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, exampleFile{p, string(data)})
	}
	docs, _ := filepath.Glob("../../docs/*.md")
	for _, p := range append(docs, "../../README.md") {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range yamlFence.FindAllStringSubmatch(string(data), -1) {
			files = append(files, exampleFile{fmt.Sprintf("%s#%d", p, i+1), m[1]})
		}
	}
	var valid []exampleFile
	for _, f := range files {
		if _, errs := Parse(f.name, []byte(f.text), anyEnv); len(errs) > 0 {
			if !strings.Contains(f.name, "#") {
				t.Fatalf("%s is not valid:\n%s", f.name, errs)
			}
			continue // a part of a file
		}
		valid = append(valid, f)
	}
	return valid
}
