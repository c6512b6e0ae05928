package main

import (
	"embed"
	"path"
	"regexp"
	"slices"
	"strings"
)

// A licence cairn's release knows: the short name the copyright file
// gives it (Debian's where Debian has one, as copyright-format 1.0 asks:
// Expat, not MIT) and its texts, the templates/ files named in files.
type licence struct {
	name  string
	files []string
	// common is the file of /usr/share/common-licenses that holds its
	// text on every Debian system, "" if none: the copyright file points
	// there rather than repeating the text, as lintian asks.
	common string
	title  string // its full name, for the pointer
}

var licences = []licence{
	{name: "Apache-2.0", files: []string{"apache-2.0.txt", "apache-2.0-appendix.txt", "apache-2.0-notice.txt"},
		common: "Apache-2.0", title: "Apache License, Version 2.0"},
	{name: "MPL-2.0", files: []string{"mpl-2.0.txt"}, common: "MPL-2.0", title: "Mozilla Public License, Version 2.0"},
	{name: "EPL-2.0", files: []string{"epl-2.0.txt"}},
	{name: "BSD-3-clause", files: []string{"bsd-3-clause.txt"}},
	{name: "BSD-2-clause", files: []string{"bsd-2-clause.txt"}},
	{name: "Expat", files: []string{"expat.txt"}},
	{name: "ISC", files: []string{"isc.txt"}},
}

//go:embed templates
var templateFiles embed.FS

// A template is one licence text as words; a hole ("" here, {{...}} in
// its file) stands for 1 to maxHole words that differ from one copy to
// another: a holder's name, "http" or "https".
type template struct {
	licence *licence
	words   []string
}

const maxHole = 12

// templates are the texts of licences, longest first: where two could
// match the same words, the longer one takes them.
var templates = func() []template {
	var ts []template
	for i := range licences {
		for _, f := range licences[i].files {
			data, err := templateFiles.ReadFile(path.Join("templates", f))
			if err != nil {
				panic(err)
			}
			var words []string
			for j, part := range holes.Split(string(data), -1) {
				if j > 0 {
					words = append(words, "")
				}
				for _, w := range tokenize(part) {
					words = append(words, w.word)
				}
			}
			ts = append(ts, template{&licences[i], words})
		}
	}
	slices.SortStableFunc(ts, func(a, b template) int { return len(b.words) - len(a.words) })
	return ts
}()

var holes = regexp.MustCompile(`\{\{[^}]*\}\}`)

// A word of a text, lower-cased, and the line it is on (from 0).
type word struct {
	word string
	line int
}

var (
	wordRE = regexp.MustCompile(`[\p{L}\p{N}]+`)
	// A list's marker, "1.", "(a)", "iv)", is no word: copies number
	// and letter their clauses differently.
	marker = regexp.MustCompile(`^(?:\d{1,2}|[a-z]|[ivx]{1,4})[.)]`)
)

// tokenize splits text into words: letters and digits, lower-cased;
// punctuation, layout and list markers are not words.
func tokenize(text string) []word {
	var ws []word
	for n, line := range strings.Split(text, "\n") {
		for _, loc := range wordRE.FindAllStringIndex(line, -1) {
			w := strings.ToLower(line[loc[0]:loc[1]])
			start := loc[0] == 0 || strings.ContainsRune(" \t(", rune(line[loc[0]-1]))
			if start && marker.MatchString(strings.ToLower(line[loc[0]:])) {
				continue
			}
			ws = append(ws, word{w, n})
		}
	}
	return ws
}

// A Found is a licence found in a file: its text there, the lines it
// spans, as they are; "" for a licence whose text Debian has (common).
type Found struct {
	Licence *licence
	Text    string
	words   string // of Text: copies that differ in layout alone have the same
}

// An Identified licence file: the licences found in it, the copyright
// statements around them, and what else it says, line by line: nothing,
// but for headings such as "MIT License", in a file this tool can
// vouch for alone.
type Identified struct {
	Licences  []Found
	Copyright []string
	Rest      []string
}

// titles are lines that name a licence, as copies put above its text.
var titles = map[string]bool{
	"license": true, "licence": true, "mit": true, "mit license": true, "the mit license": true, "the mit license mit": true,
	"expat license": true, "bsd 2 clause license": true, "bsd 3 clause license": true, "the bsd 3 clause license": true,
	"isc license": true, "apache license": true, "all rights reserved": true,
}

// Identify finds the licences in the text of a licence file.
func Identify(text string) Identified {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	lines := strings.Split(text, "\n")
	ws := tokenize(text)
	covered := make([]bool, len(ws))
	type span struct {
		l          *licence
		start, end int // in ws
	}
	var spans []span
	for _, t := range templates {
		for i := 0; i < len(ws); i++ {
			if covered[i] || ws[i].word != t.words[0] {
				continue
			}
			if end := match(ws, covered, i, t.words); end > 0 {
				spans = append(spans, span{t.licence, i, end})
				for j := i; j < end; j++ {
					covered[j] = true
				}
				i = end - 1
			}
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var id Identified
	for _, s := range spans {
		f := Found{Licence: s.l}
		if s.l.common == "" { // else the copyright file points to the text Debian has
			f.Text = cut(lines, ws[s.start].line, ws[s.end-1].line)
			for _, w := range ws[s.start:s.end] {
				f.words += w.word + " "
			}
		}
		id.Licences = addFound(id.Licences, f)
	}
	// What no licence covers, line by line.
	rest := make(map[int][]string)
	var order []int
	for i, w := range ws {
		if covered[i] {
			continue
		}
		if _, ok := rest[w.line]; !ok {
			order = append(order, w.line)
		}
		rest[w.line] = append(rest[w.line], w.word)
	}
	for _, n := range order {
		line := strings.TrimSpace(lines[n])
		words := strings.Join(rest[n], " ")
		switch {
		case placeholder.MatchString(line): // the Apache appendix's "Copyright [yyyy] [name of copyright owner]"
		case copyrightLine.MatchString(line):
			id.Copyright = append(id.Copyright, copyrightWords.ReplaceAllString(line, ""))
		case titles[words]:
		default:
			id.Rest = append(id.Rest, line)
		}
	}
	return id
}

var (
	// copyrightLine is a line that begins with a copyright statement:
	// "Copyright" with a year or a sign, or a sign alone.
	copyrightLine = regexp.MustCompile(`(?i)^[#*\s]*(?:copyright\s*:?\s*(?:\(c\)|©|\d)|\(c\)|©)`)
	// copyrightWords are the words a copyright statement begins with.
	copyrightWords = regexp.MustCompile(`(?i)^[#*\s]*(?:copyright\b|\(c\)|©)(?:\s*(?:\(c\)|©|:))*\s*`)
)

// placeholder is a copyright line a licence's template leaves to fill.
var placeholder = regexp.MustCompile(`(?i)^copyright [\[{<]yyyy[\]}>] [\[{<]name of copyright owner[\]}>]$`)

// match returns where template words ends in ws from i, or 0 if the
// words from i are not the template's.
func match(ws []word, covered []bool, i int, words []string) int {
	if len(words) == 0 {
		return i
	}
	if words[0] == "" { // a hole: the shortest filling for which the rest matches
		for n := 1; n <= maxHole && i+n <= len(ws); n++ {
			if covered[i+n-1] {
				return 0
			}
			if end := match(ws, covered, i+n, words[1:]); end > 0 {
				return end
			}
		}
		return 0
	}
	if i >= len(ws) || covered[i] || ws[i].word != words[0] {
		return 0
	}
	return match(ws, covered, i+1, words[1:])
}

// cut returns lines from to last, without the indentation they share
// and trailing spaces.
func cut(lines []string, from, last int) string {
	part := slices.Clone(lines[from : last+1])
	indent := -1
	for i, l := range part {
		part[i] = strings.TrimRight(strings.ReplaceAll(l, "\t", "    "), " ")
		if part[i] != "" {
			n := len(part[i]) - len(strings.TrimLeft(part[i], " "))
			if indent < 0 || n < indent {
				indent = n
			}
		}
	}
	for i, l := range part {
		if l != "" {
			part[i] = l[indent:]
		}
	}
	return strings.Join(part, "\n")
}

// addFound adds f to fs unless fs has a copy of the same words.
func addFound(fs []Found, f Found) []Found {
	if slices.ContainsFunc(fs, func(g Found) bool { return g.Licence == f.Licence && g.words == f.words }) {
		return fs
	}
	return append(fs, f)
}
