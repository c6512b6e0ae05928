package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A line indented less than the block it belongs to is reported by
// go-yaml, if at all, where that block began (did not find expected '-'
// indicator), or is valid YAML that puts its key in the mapping around
// the block (an unknown field there, a missing one in the block). dedented
// finds such a line by trying the fix: it indents a line to the column of
// a sibling above it and reads the file again, and the first line (in
// file order) for which that makes a file whose values are all in their
// places is the one at fault.

// maxRefits bounds the readings of a file that dedented tries, each a
// parse of the whole file: a pipeline file is a few KB, and holds far
// fewer places for a line to go back to.
const maxRefits = 64

// dedented returns the error for the first line of lines that is
// indented less than the block it belongs to, if there is one: a line
// which, indented to the column of a line above it in that block (or,
// where the line above it opens a block left empty, of a line below),
// makes a file that fits. fits reads a changed file; key is
// the line whose key must be read as a field there (0: an item, no key).
func dedented(lines []string, fits func(lines []string, key int) bool) (Pos, string, bool) {
	pl := parseLines(lines)
	text := blockText(pl)
	tries := 0
	for k := 1; k < len(pl); k++ {
		if text[k] {
			continue
		}
		l := pl[k]
		key := l.n
		if isItem(l.text) {
			key = 0
		}
		for _, col := range siblingColumns(pl, text, k) {
			if tries == maxRefits {
				return Pos{}, "", false
			}
			tries++
			moved := slices.Clone(lines)
			moved[l.n-1] = strings.Repeat(" ", col-l.indent) + lines[l.n-1]
			if fits(moved, key) {
				return Pos{l.n, l.indent + 1}, dedentedMsg(pl, text, k, col), true
			}
		}
	}
	return Pos{}, "", false
}

// siblingColumns returns the columns that pl[k] may have been dedented
// from, nearest first: those of the lines above it, back to one
// indented no more than it (of a key for a key, of an item for an item),
// and, where the line above opens a block left empty, those of the lines
// below it in that block.
func siblingColumns(pl []yamlLine, text []bool, k int) []int {
	l := pl[k]
	item := isItem(l.text)
	var cols []int
	add := func(c int) {
		if c > l.indent && !slices.Contains(cols, c) {
			cols = append(cols, c)
		}
	}
	above := -1
	for j := k - 1; j >= 0; j-- {
		if text[j] {
			continue
		}
		if above < 0 {
			above = j
		}
		p := pl[j]
		switch {
		case isItem(p.text) && item:
			add(p.indent)
		case isItem(p.text):
			if c, ok := itemKeyColumn(p); ok {
				add(c)
			}
		case !item:
			add(p.indent)
		}
		if p.indent <= l.indent {
			break
		}
	}
	if above >= 0 && opensBlock(pl[above]) {
		// The first line of the block: its siblings are below it. Where
		// it is deeper than the line above, and so a block of its own,
		// a single line below deeper still may as well be indented too
		// far: that takes two. An only child goes one level in, or, an
		// item, to its key's column.
		a := pl[above]
		var below []int
		for j := k + 1; j < len(pl); j++ {
			switch {
			case text[j]:
			case pl[j].indent > a.indent || pl[j].indent == a.indent && item && isItem(pl[j].text) && !isItem(a.text):
				below = append(below, pl[j].indent)
				continue
			}
			break
		}
		if a.indent >= l.indent || len(below) > 1 {
			for _, c := range below {
				add(c)
			}
		}
		if a.indent >= l.indent {
			if item && !isItem(a.text) {
				add(a.indent)
			}
			add(a.indent + 2)
		}
	}
	return cols
}

// dedentedMsg says that pl[k] belongs, at column col (from 0), to the
// block above it: the list an item belongs to, or the list item or
// mapping a key does.
func dedentedMsg(pl []yamlLine, text []bool, k, col int) string {
	l := pl[k]
	b := opener(pl, text, k, col)
	if isItem(l.text) {
		return fmt.Sprintf("this item is indented less than the list of %q it seems to belong to (line %d): indent it to column %d",
			keyOf(pl[b].text), pl[b].n, col+1)
	}
	block := fmt.Sprintf("the %q mapping", keyOf(pl[b].text))
	if isItem(pl[b].text) {
		block = itemOf(pl, text, b)
	}
	return fmt.Sprintf("%q is indented less than %s it seems to belong to (line %d): indent it to column %d",
		keyOf(l.text), block, pl[b].n, col+1)
}

// opener returns the index of the line above pl[k] that opens the block
// pl[k] belongs to at column col: the nearest indented less.
func opener(pl []yamlLine, text []bool, k, col int) int {
	for j := k - 1; j >= 0; j-- {
		if !text[j] && pl[j].indent < col {
			return j
		}
	}
	return 0
}

// itemOf names the list item pl[b]: "the source", "the operator" or "the
// sink" in a pipeline's lists, else by the key of its list.
func itemOf(pl []yamlLine, text []bool, b int) string {
	for j := b - 1; j >= 0; j-- {
		if text[j] || pl[j].indent > pl[b].indent || isItem(pl[j].text) {
			continue
		}
		switch key := keyOf(pl[j].text); key {
		case "sources", "operators", "sinks":
			return "the " + strings.TrimSuffix(key, "s")
		default:
			return fmt.Sprintf("the item of %q", key)
		}
	}
	return "the list item"
}

// keyOf returns the key of a line's mapping entry ("topic" of
// "topic: x", "id" of "- id: x"), or its text where it holds none.
func keyOf(text string) string {
	text = strings.TrimSpace(strings.TrimPrefix(text, "-"))
	if k, _, ok := strings.Cut(text, ":"); ok {
		return strings.Trim(k, `"' `)
	}
	return text
}

// isItem reports whether a line's text is a list item ("- ").
func isItem(text string) bool { return text == "-" || strings.HasPrefix(text, "- ") }

// itemKeyColumn returns the column (from 0) of the first key of a list
// item's mapping that begins on the item's line ("- id: x").
func itemKeyColumn(l yamlLine) (int, bool) {
	rest := strings.TrimLeft(l.text[1:], " ")
	if rest == "" || !strings.Contains(rest, ":") {
		return 0, false
	}
	return l.indent + len(l.text) - len(rest), true
}

// opensBlock reports whether a line ends with a key or a dash that
// has its value on the lines below.
func opensBlock(l yamlLine) bool {
	return l.text == "-" || strings.HasSuffix(l.text, ":")
}

// blockText marks the lines of pl that hold any indentation: the text
// of a block scalar (a value begun with | or >), and the lines that go on
// with a flow collection ([...] or {...}) begun above.
func blockText(pl []yamlLine) []bool {
	text := make([]bool, len(pl))
	scalar := -1 // the indent of the block scalar's key
	depth := 0   // of the flow collections open
	for i, l := range pl {
		if scalar >= 0 && l.indent > scalar {
			text[i] = true
			continue
		}
		scalar = -1
		text[i] = depth > 0
		depth = max(0, depth+flowDepth(l.text))
		for _, s := range []string{": |", ": >", ": |-", ": >-", ": |+", ": >+"} {
			if strings.HasSuffix(l.text, s) {
				scalar = l.indent
			}
		}
	}
	return text
}

// flowDepth returns how many more flow collections a line's text opens
// than it closes, outside quotes.
func flowDepth(text string) int {
	depth := 0
	var quote byte
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			if i == 0 || strings.IndexByte(" :[{,", text[i-1]) >= 0 {
				quote = c
			}
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
		}
	}
	return depth
}

// fitsLike returns dedented's fits for the files, not YAML, read into
// values like v: a changed file fits when it is YAML whose values are all
// in their places (no shapef error). It asks nothing of the key of the
// line changed: that the change makes the file YAML is the evidence.
func (d *decoder) fitsLike(v any) func([]string, int) bool {
	return func(lines []string, _ int) bool {
		var root yaml.Node
		if yaml.Unmarshal([]byte(strings.Join(lines, "\n")), &root) != nil || len(root.Content) == 0 {
			return false
		}
		t := &decoder{file: d.file, lookup: anyValue, lines: lines, at: make(positions), env: make(fromEnv)}
		t.decode(root.Content[0], reflect.New(reflect.TypeOf(v).Elem()).Elem())
		return t.shape == 0
	}
}

// anyValue is an environment in which every variable is set.
func anyValue(string) (string, bool) { return "", true }
