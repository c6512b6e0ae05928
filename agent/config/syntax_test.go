package config

import (
	"strings"
	"testing"
)

// TestSyntaxErrorsAtTheirLine: the usual mistakes in a file written by
// hand are reported at the line and column at fault, in words that say
// what to do; go-yaml puts most of them at the line where the block they
// broke began.
func TestSyntaxErrorsAtTheirLine(t *testing.T) {
	for _, c := range []struct{ name, file, want string }{
		{"an item dedented", "sources:\n  - id: t\n    topics:\n      - a/b\n     - c/d\n    key: k\n",
			"x.yaml:5:6: not valid YAML: this item is indented less than the list of \"topics\" it seems to belong to (line 3): indent it to column 7"},
		{"a key between two levels", "agent:\n  data_dir: d\n log_level: info\n",
			"x.yaml:3:2: not valid YAML: \"log_level\" is indented less than the \"agent\" mapping it seems to belong to (line 1): indent it to column 3"},
		{"a key deeper than its sibling", "agent:\n  data_dir: d\n   log_level: info\n",
			"x.yaml:3:4: not valid YAML: this line is indented more than the one above it (to column 4, not 3), which opens no block"},
		{"a key deeper in a list item", "sources:\n  - id: t\n     broker: b\n",
			"x.yaml:3:6: not valid YAML: this line is indented more than the one above it (to column 6, not 5), which opens no block"},
		{"a tab", "agent:\n  data_dir: d\n\tlog_level: info\n",
			"x.yaml:3:1: not valid YAML: a tab indents this line: YAML indents with spaces only"},
		{"a tab after spaces", "sources:\n  - id: t\n  \t  broker: b\n",
			"x.yaml:3:3: not valid YAML: a tab indents this line"},
		{"a quote not closed", "agent:\n  data_dir: 'unterminated\n  log_level: info\n",
			"x.yaml:2:13: not valid YAML: a quoted string begins here and is not closed on its line"},
		{"{key} in a flow mapping", "sinks:\n  - {id: x, input: s, broker: b, topic: out/{key}}\n",
			"x.yaml:2:45: not valid YAML: a {name} in a value inside a {...} mapping is read as a mapping: write the value in quotes"},
		{"': ' in a value", "agent:\n  data_dir: c: d\n",
			"x.yaml:2:13: not valid YAML: \": \" inside a value: write the value in quotes"},
	} {
		_, errs := Parse("x.yaml", []byte(c.file), env(nil))
		if len(errs) != 1 || !strings.HasPrefix(errs.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %s", c.name, errs, c.want)
		}
	}
	// A file of valid YAML with comments, block scalars and flow lists is
	// nothing syntaxError finds fault with.
	valid := "# a comment\nagent:\n  data_dir: d # here\nsources:\n  - id: s\n    topics: [a/b, 'c/d']\n    simulator:\n      devices: 1\n" +
		"notes: |\n      any text\n    at any: depth\n"
	if _, msg, ok := syntaxError(strings.Split(valid, "\n"), "whatever", (&decoder{}).fitsLike(&Config{})); ok {
		t.Errorf("a valid file found at fault: %s", msg)
	}
}
