package config

import (
	"fmt"
	"regexp"
	"strings"
)

// A file that is no valid YAML gets go-yaml's error: a line that is often
// not the one at fault (where the block it broke began) and words of the
// parser's (did not find expected key). syntaxError says, of the usual
// mistakes in a file written by hand, which line and column are wrong and
// what to do, in words of its own: a tab that indents, a line indented
// less than the block it belongs to (dedented's), a line indented between
// the levels around it or deeper than a line that opens no block,
// a string begun and not ended, a topic with {key} in a {...} mapping, a
// value with ": " in it. Where it finds none of them, go-yaml's own error
// stands.

// yamlLine is a line of a file as syntaxError reads it.
type yamlLine struct {
	n      int    // from 1
	indent int    // spaces before the content
	text   string // the content, without a comment
}

// syntaxError explains yamlErr, go-yaml's error about the file of lines,
// at the line and column at fault; ok is false where it finds no fault it
// knows. fits is dedented's.
func syntaxError(lines []string, yamlErr string, fits func([]string, int) bool) (p Pos, msg string, ok bool) {
	for i, l := range lines {
		lead := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if j := strings.IndexByte(lead, '\t'); j >= 0 {
			return Pos{i + 1, j + 1}, "a tab indents this line: YAML indents with spaces only", true
		}
	}
	if p, msg, ok := dedented(lines, fits); ok {
		return p, msg, true
	}
	if p, msg, ok := misindented(lines); ok {
		return p, msg, true
	}
	switch {
	case strings.Contains(yamlErr, "unexpected end of stream") || strings.Contains(yamlErr, "found unexpected end"):
		if p, ok := unclosedQuote(lines); ok {
			return p, "a quoted string begins here and is not closed on its line", true
		}
	case strings.Contains(yamlErr, "did not find expected ',' or '}'"):
		for i, l := range lines {
			if m := flowBrace.FindStringIndex(l); m != nil {
				at := m[0] + strings.LastIndex(l[m[0]:m[1]], "/{") + 1 // the {name}
				return Pos{i + 1, at + 1}, "a {name} in a value inside a {...} mapping is read as a mapping: write the value in quotes, as topic: \"out/{key}\"", true
			}
		}
	case strings.Contains(yamlErr, "mapping values are not allowed"):
		for i, l := range lines {
			if m := colonInValue.FindStringSubmatchIndex(stripComment(l)); m != nil {
				return Pos{i + 1, m[2] + 1}, "\": \" inside a value: write the value in quotes", true
			}
		}
	}
	return Pos{}, "", false
}

var (
	// flowBrace is a {...} mapping holding a value with {name} in it.
	flowBrace = regexp.MustCompile(`\{[^{}]*:[^{}]*/\{[A-Za-z_][A-Za-z0-9_]*\}`)
	// colonInValue is a plain value with ": " in it.
	colonInValue = regexp.MustCompile(`^\s*(?:- )?[A-Za-z_][A-Za-z0-9_]*: +([^'"\s{\[][^#]*?: )`)
)

// misindented finds a line indented between the levels of the blocks
// around it, or deeper than a line above that opens no block.
func misindented(lines []string) (Pos, string, bool) {
	type level struct {
		indent int
		item   bool // the level of a list's items ("- ")
	}
	var open []level // the levels a line may have, innermost last
	opens := true    // the line above opens a block: the next may be deeper
	pl := parseLines(lines)
	text := blockText(pl)
	for i, l := range pl {
		if text[i] {
			continue
		}
		top := -1
		if len(open) > 0 {
			top = open[len(open)-1].indent
		}
		item := isItem(l.text)
		switch {
		case l.indent > top:
			if top >= 0 && !opens {
				return Pos{l.n, l.indent + 1}, fmt.Sprintf("this line is indented more than the one above it (to column %d, not %d), which opens no block: "+
					"align it with that line, or give the line above no value", l.indent+1, top+1), true
			}
			open = append(open, level{l.indent, item})
		case l.indent < top:
			var inner level
			for len(open) > 0 && open[len(open)-1].indent > l.indent {
				inner, open = open[len(open)-1], open[:len(open)-1]
			}
			if len(open) == 0 || open[len(open)-1].indent != l.indent {
				outer := 1
				if len(open) > 0 {
					outer = open[len(open)-1].indent + 1
				}
				if item && inner.item {
					return Pos{l.n, l.indent + 1}, fmt.Sprintf("this item is indented less than the list it belongs to: "+
						"its items above start at column %d (the block around the list at column %d)", inner.indent+1, outer), true
				}
				return Pos{l.n, l.indent + 1}, fmt.Sprintf("this line is indented to column %d, between the block above it (column %d) "+
					"and the one around that (column %d): align it with one of them", l.indent+1, inner.indent+1, outer), true
			}
		}
		rest := l.text
		if item {
			rest = strings.TrimSpace(strings.TrimPrefix(rest, "-"))
			if rest != "" {
				// The item's mapping, if it holds one, goes on at the
				// column of its first key.
				open = append(open, level{l.indent + len(l.text) - len(strings.TrimLeft(l.text[1:], " ")), false})
			}
		}
		// A block scalar's text or a flow collection's next lines
		// (blockText's) may be deeper, and are not read.
		opens = rest == "" || strings.HasSuffix(rest, ":")
	}
	return Pos{}, "", false
}

// parseLines returns the lines that hold something, comments and
// document markers left out.
func parseLines(lines []string) []yamlLine {
	var out []yamlLine
	for i, l := range lines {
		text := strings.TrimRight(stripComment(l), " ")
		trimmed := strings.TrimLeft(text, " ")
		if trimmed == "" || trimmed == "---" || trimmed == "..." {
			continue
		}
		out = append(out, yamlLine{n: i + 1, indent: len(text) - len(trimmed), text: trimmed})
	}
	return out
}

// stripComment drops a comment from l: a # at its start or after a space,
// outside quotes.
func stripComment(l string) string {
	var quote byte
	for i := 0; i < len(l); i++ {
		switch c := l[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			if i == 0 || l[i-1] == ' ' || l[i-1] == ':' || l[i-1] == '[' || l[i-1] == '{' || l[i-1] == ',' {
				quote = c
			}
		case c == '#' && (i == 0 || l[i-1] == ' '):
			return l[:i]
		}
	}
	return l
}

// unclosedQuote finds a value that begins with a quote its line does not
// close.
func unclosedQuote(lines []string) (Pos, bool) {
	for i, l := range lines {
		for _, q := range []string{`: '`, `: "`, `- '`, `- "`} {
			j := strings.Index(l, q)
			if j < 0 {
				continue
			}
			start := j + len(q) - 1
			if !strings.Contains(l[start+1:], q[len(q)-1:]) {
				return Pos{i + 1, start + 1}, true
			}
		}
	}
	return Pos{}, false
}
