package config

import (
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dustin/go-humanize"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/graph/exprop"
)

var update = flag.Bool("update", false, "write docs/config.md from the definitions")

// referenceFile is docs/config.md, from this package's directory.
const referenceFile = "../../docs/config.md"

// regenerate is how docs/config.md is made again.
const regenerate = "go test ./agent/config -run TestConfigReference -update"

// TestConfigReference checks that docs/config.md is what the definitions
// of a pipeline file make of it: the fields of Config and of the types it
// holds, with their doc comments, `default` tags and the values the
// validator takes; with -update, it writes it.
func TestConfigReference(t *testing.T) {
	got, err := reference()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(referenceFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(referenceFile)
	if err != nil {
		t.Fatalf("%v; write it: %s", err, regenerate)
	}
	if !bytes.Equal(got, want) {
		g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		i := 0
		for i < len(g) && i < len(w) && g[i] == w[i] {
			i++
		}
		line := func(lines []string) string {
			if i < len(lines) {
				return lines[i]
			}
			return "(the end)"
		}
		t.Fatalf("docs/config.md differs from what the definitions in agent/config make of it, first at line %d:\n"+
			"  file: %s\n  made: %s\nEdit the doc comments, tags and tables in agent/config, not docs/config.md; then: %s",
			i+1, line(w), line(g), regenerate)
	}
}

// enums are the words a field may say, by the field's path in the
// reference: the lists the validator checks against.
func enums() map[string][]string {
	var levels, kinds, types []string
	for _, l := range logLevels {
		levels = append(levels, l.name)
	}
	for _, k := range windowKinds {
		kinds = append(kinds, k.name)
	}
	for _, k := range operatorKinds {
		types = append(types, k.name)
	}
	var modes, aggregates, fieldTypes []string
	for m := checkpoint.Mode(0); ; m++ {
		if _, err := checkpoint.ParseMode(m.String()); err != nil {
			break
		}
		modes = append(modes, m.String())
	}
	for a := graph.Aggregate(0); ; a++ {
		if _, err := graph.ParseAggregate(a.String()); err != nil {
			break
		}
		aggregates = append(aggregates, a.String())
	}
	// As exprop.ParseType names them, any last.
	for t := exprop.Any + 1; t <= exprop.List; t++ {
		fieldTypes = append(fieldTypes, t.String())
	}
	fieldTypes = append(fieldTypes, exprop.Any.String())
	return map[string][]string{
		"agent.log_level":         levels,
		"agent.log_format":        logFormats,
		"checkpoints.mode":        modes,
		"sources[].format":        sourceFormats,
		"sources[].fields":        fieldTypes,
		"operators[].type":        types,
		"operators[].aggregate":   aggregates,
		"operators[].on_error":    onErrors,
		"operators[].window.kind": kinds,
		"operators[].window.time": windowTimes,
		"sinks[].output.time":     outputTimes,
	}
}

// fieldDocs returns the doc comments of the fields of the package's
// struct types, by "Type.Field", each on one line.
func fieldDocs() (map[string]string, error) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		return nil, err
	}
	docs := make(map[string]string)
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			if st, ok := spec.Type.(*ast.StructType); ok {
				for _, field := range st.Fields.List {
					for _, id := range field.Names {
						docs[spec.Name.Name+"."+id.Name] = strings.Join(strings.Fields(field.Doc.Text()), " ")
					}
				}
			}
			return false
		})
	}
	return docs, nil
}

// A section is a mapping of the file: the top level, or a struct under it.
type section struct {
	path string // "agent", "brokers.<name>", "sources[]"; "" for the top
	doc  string
	typ  reflect.Type
}

// reference returns docs/config.md as the definitions make it, or what
// keeps it from being complete: a field without a doc comment, say.
func reference() ([]byte, error) {
	docs, err := fieldDocs()
	if err != nil {
		return nil, err
	}
	values := enums()
	seen := make(map[string]bool)      // the fields' paths
	needs := make(map[string][]string) // operator field → the kinds that need it
	for _, k := range operatorKinds {
		for _, n := range k.needs {
			needs[n] = append(needs[n], "`"+k.name+"`")
		}
	}
	var problems []string
	var b strings.Builder
	b.WriteString(referenceIntro)
	sections := []section{{typ: reflect.TypeOf(Config{})}}
	for len(sections) > 0 {
		s := sections[0]
		sections = sections[1:]
		if s.path != "" {
			fmt.Fprintf(&b, "\n## `%s`\n\n%s\n", s.path, s.doc)
		}
		b.WriteString("\n| Field | Type | Default | Description |\n|---|---|---|---|\n")
		var children []section
		for _, f := range fileFields(s.typ) {
			name, required := f.name, f.required
			path := name
			if s.path != "" {
				path = s.path + "." + name
			}
			doc := docs[f.owner.Name()+"."+f.Name]
			if doc == "" {
				problems = append(problems, fmt.Sprintf("%s (%s.%s) has no doc comment", path, f.owner.Name(), f.Name))
			}
			if s.typ == reflect.TypeOf(Operator{}) && needs[name] != nil {
				doc += " For " + strings.Join(needs[name], ", ") + "."
			}
			seen[path] = true
			typ, child := describe(f.Type, values[path])
			if child != nil {
				childPath := path
				switch f.Type.Kind() {
				case reflect.Slice:
					childPath += "[]"
				case reflect.Map:
					childPath += ".<name>"
				}
				children = append(children, section{path: childPath, doc: doc, typ: child})
				typ = fmt.Sprintf("%s: see [`%s`](#%s)", typ, childPath, anchor(childPath))
			}
			def := "—"
			if v, ok := f.Tag.Lookup("default"); ok {
				def = "`" + v + "`"
				if only := f.Tag.Get("defaultif"); only != "" {
					cond, _ := s.typ.FieldByName(only)
					n, _, _ := strings.Cut(cond.Tag.Get("yaml"), ",")
					def += " (" + n + ")"
				}
			} else if required {
				def = "required"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", path, typ, def, strings.ReplaceAll(doc, "|", `\|`))
		}
		if s.typ == reflect.TypeOf(Operator{}) {
			b.WriteString(operatorKindsTable())
		}
		sections = append(children, sections...)
	}
	for path := range values {
		if !seen[path] {
			problems = append(problems, fmt.Sprintf("enums names %s, which is no field", path))
		}
	}
	for need := range needs {
		if !seen["operators[]."+need] {
			problems = append(problems, fmt.Sprintf("an operator kind needs %s, which is no field of an operator", need))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return nil, fmt.Errorf("docs/config.md cannot be made:\n%s", strings.Join(problems, "\n"))
	}
	return []byte(b.String()), nil
}

// describe returns how the reference names a field's type t, the words it
// may say if they are few, and the struct it holds, if any.
func describe(t reflect.Type, words []string) (string, reflect.Type) {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	oneOf := func(what string) string {
		if words == nil {
			return what
		}
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "`" + w + "`"
		}
		return "one of " + strings.Join(quoted, ", ")
	}
	switch {
	case t == durationType:
		return "duration", nil
	case t == stringsType:
		return "string, or list of strings", nil
	case t.Kind() == reflect.Struct:
		return "mapping", t
	case t.Kind() == reflect.Slice:
		elem, child := describe(t.Elem(), nil)
		if child != nil {
			return "list of mappings", child
		}
		return "list of " + elem + "s", nil
	case t.Kind() == reflect.Map:
		elem, child := describe(t.Elem(), words)
		if child != nil {
			return "mapping of mappings, by name", child
		}
		return "mapping of names to " + elem, nil
	case t.Kind() == reflect.String:
		return oneOf("string"), nil
	case t.Kind() == reflect.Bool:
		return "boolean", nil
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int64:
		return "integer", nil
	case t.Kind() == reflect.Float64:
		return "number", nil
	}
	panic(fmt.Sprintf("config reference: no name for type %s", t))
}

// anchor returns the fragment of the link to a heading `text` on GitHub.
func anchor(text string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return -1
	}, strings.ToLower(text))
}

// operatorKindsTable returns the reference's table of operator kinds.
func operatorKindsTable() string {
	var b strings.Builder
	b.WriteString("\n### Operator types\n\n" +
		"What an operator needs besides `id`, `type` and `inputs`, and what it does. A keyed type keeps its state by key: it needs `key_by`. " +
		"The records of a type marked *passes fields* carry the payload fields of those it reads, and expressions after it may name them; " +
		"the others make records of their own, without payload fields unless what they do says otherwise.\n\n" +
		"| Type | Needs | Fields | What it does |\n|---|---|---|---|\n")
	for _, k := range operatorKinds {
		var needs []string
		if k.keyed {
			needs = append(needs, "`key_by`")
		}
		for _, n := range k.needs {
			needs = append(needs, "`"+n+"`")
		}
		fields := "none"
		if k.keepsFields {
			fields = "passes fields"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", k.name, cmp.Or(strings.Join(needs, ", "), "—"), fields, k.doc)
	}
	return b.String()
}

// referenceIntro is the start of docs/config.md.
var referenceIntro = `<!-- Made by ` + "`" + regenerate + "`" + ` from the definitions in agent/config: edit those, not this file. -->

# Pipeline files: the reference

A pipeline file is YAML. ` + "`cairn validate -c FILE`" + ` checks one and prints every problem as ` + "`FILE:LINE:COL: message`" + `;
` + "`cairn run`" + ` refuses to start on one with problems, and a reload keeps the running pipeline. Unknown fields and wrong types
are problems, and so is what would fail once the agent runs, as far as the file tells: an expression over fields its records
lack, an address that is no host:port, a named file that cannot be read, a topic no broker takes, a window in event time over a
source without time. [pipelines.md](pipelines.md) shows
how the parts of a file fit; ` + "`configs/`" + ` has whole files.

- A line indented less than the block it belongs to is reported at its own line, with the column to indent it to, not
  where YAML finds the block broken or the key out of place.
- ` + "`${VAR}`" + ` in a value is the environment variable VAR; an unset one is a problem. ` + "`${VAR:-default}`" + ` is VAR, or
  ` + "`default`" + ` (up to the first ` + "`}`" + `) when VAR is unset or empty: ` + "`listen: 127.0.0.1:${CAIRN_DEMO_PORT:-18830}`" + `. An error
  never shows a value that takes something from the environment, only the text the file writes, for it is often a secret.
- A duration is written as ` + "`500ms`, `10s`, `1m30s` or `2h`" + `; a size as ` + "`64KiB`, `32MiB` or `48MB`" + `.
- A field left out (or given as ` + "`null`" + `) takes its default. A value the file writes is the value that runs, ` + "`0`" + ` and
  ` + "`\"\"`" + ` too; where one cannot run, the error says what to write instead.
- A field that takes one of a few words (` + "`json`, `tumbling`, `dead-letter`" + `) takes it in any case.
- A relative path, in ` + "`agent.data_dir`" + ` and every ` + "`*_file`" + `, is taken beside the pipeline file, not in the working
  directory. A file that holds a secret, every ` + "`*_file`" + ` but ` + "`ca_file`" + ` and ` + "`cert_file`" + `, is a problem if its group or
  other users may read it: ` + "`chmod go-r`" + ` it.
- A pipeline file holds at most ` + humanize.IBytes(MaxFileBytes) + `, lists and mappings of at most ` + humanize.Comma(maxEntries) + ` entries, strings of at most ` + humanize.Comma(maxStringBytes) + ` bytes
  (MQTT's limit) and ` + humanize.Comma(maxValues) + ` values, an alias (` + "`*name`" + `) counted as what it repeats ([security.md](security.md#pipeline-files)).

The top level:
`

// TestOperatorKinds checks what operatorKinds says an operator of each
// kind needs against what the validator asks of one: an operator with it
// all is accepted, and built, one without key_by refused if the kind is
// keyed, and one without any of its needs refused.
func TestOperatorKinds(t *testing.T) {
	// Values of what the types need, by type and field or by field.
	samples := map[string]string{"filter.expr": "expr: value > 1", "map.expr": "expr: value * 2",
		"window": "window: {kind: tumbling, size: 1s}", "aggregate": "aggregate: avg", "ttl": "ttl: 1m", "high": "high: 2", "low": "low: 1",
		"within": "within: {before: 1s, after: 1s}"}
	file := func(fields []string) []byte {
		return []byte("sources:\n  - {id: a, simulator: {devices: 1, rate: 1}}\n  - {id: b, simulator: {devices: 1, rate: 1}}\n" +
			"operators:\n  - {" + strings.Join(fields, ", ") + "}\n")
	}
	for _, typ := range operatorKinds {
		all := []string{"id: op", "type: " + typ.name, "inputs: [a, b]"}
		if typ.keyed {
			all = append(all, "key_by: key")
		}
		for _, n := range typ.needs {
			s, ok := samples[typ.name+"."+n]
			if !ok {
				s, ok = samples[n]
			}
			if !ok {
				t.Fatalf("no sample value of %s, which %s needs", n, typ.name)
			}
			all = append(all, s)
		}
		c, errs := Parse("op.yaml", file(all), env(nil))
		switch {
		case len(errs) > 0:
			t.Errorf("%s with what operatorKinds says it needs: %v", typ.name, errs)
		case typ.build == nil:
			t.Errorf("%s has no build", typ.name)
		default:
			if newOp, err := c.Operators[0].Build(Hooks{}); err != nil || newOp(0) == nil {
				t.Errorf("%s with what operatorKinds says it needs is not built: %v", typ.name, err)
			}
		}
		for i, field := range all[3:] {
			without := slices.Delete(slices.Clone(all), 3+i, 4+i)
			if _, errs := Parse("op.yaml", file(without), env(nil)); len(errs) == 0 {
				t.Errorf("%s without %q is accepted, yet operatorKinds says it needs it", typ.name, field)
			}
		}
	}
}
