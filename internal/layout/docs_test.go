package layout

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// readmeMaxLines is how long the README may be: a front door a gateway
// engineer reads in ten minutes (issue 27). What does not fit goes to a
// page of docs/.
const readmeMaxLines = 300

// TestReadmeIsShort fails when README.md grows past readmeMaxLines.
func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to a page of docs/ and link it", n, readmeMaxLines)
	}
}

// TestDocLinks checks every relative link of README.md and docs/*.md: the
// file it names must exist, and its #anchor, if any, must be a heading of
// that file. Links to http(s) and mailto are not followed.
func TestDocLinks(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	anchors := map[string]map[string]bool{} // by cleaned path
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := headingAnchors(string(b))
		anchors[path] = a
		return a, nil
	}
	checked := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(file, "../../")
		for _, l := range mdLinks(string(b)) {
			target := l.target
			if i := strings.Index(target, "://"); i >= 0 || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(target, "#")
			full := file
			if path != "" {
				full = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				if _, err := os.Stat(full); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", name, l.line, target, path)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(full, ".md") {
				continue
			}
			a, err := anchorsOf(filepath.Clean(full))
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", name, l.line, target, err)
				continue
			}
			if !a[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading whose anchor is #%s", name, l.line, target, cmpOr(path, name), anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: is the link pattern broken?")
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

type mdLink struct {
	line   int
	target string
}

var (
	// inlineLink is [text](target) or [text](target "title"); text holds
	// no ']' once code spans are gone.
	inlineLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// refLink is a reference definition: [name]: target
	refLink   = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+(\S+)`)
	codeSpan  = regexp.MustCompile("`+[^`]*`+")
	headingRe = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	mdLinkRe  = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag   = regexp.MustCompile(`<[^>]*>`)
)

// mdLinks returns the links of a Markdown text outside code blocks and
// code spans.
func mdLinks(text string) []mdLink {
	var links []mdLink
	forEachLine(text, func(n int, line string) {
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			links = append(links, mdLink{n, strings.Trim(m[1], "<>")})
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			links = append(links, mdLink{n, strings.Trim(m[1], "<>")})
		}
	})
	return links
}

// forEachLine calls f with each line (numbered from 1) that is not in a
// fenced code block.
func forEachLine(text string, f func(n int, line string)) {
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]+" ") == "" {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			c := trimmed[:1]
			fence = trimmed[:len(trimmed)-len(strings.TrimLeft(trimmed, c))]
			continue
		}
		f(i+1, line)
	}
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown text.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	forEachLine(text, func(_ int, line string) {
		m := headingRe.FindStringSubmatch(line)
		if m == nil {
			return
		}
		slug := githubSlug(m[2])
		if n := seen[slug]; n > 0 {
			anchors[slug+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	})
	return anchors
}

// githubSlug is the anchor GitHub makes of a heading's text: the text as
// shown (links by their text, no HTML tags outside code), in lower case, without
// punctuation but '-' and '_', spaces made '-'.
func githubSlug(heading string) string {
	heading = mdLinkRe.ReplaceAllString(heading, "$1")
	// HTML tags vanish, but not in code spans, whose text is shown as
	// written: the odd parts between backticks.
	parts := strings.Split(heading, "`")
	for i := 0; i < len(parts); i += 2 {
		parts[i] = htmlTag.ReplaceAllString(parts[i], "")
	}
	heading = strings.Join(parts, "")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestGithubSlug pins the slug rules against headings of these docs.
func TestGithubSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Remote checkpoints (S3-compatible storage)":               "remote-checkpoints-s3-compatible-storage",
		"What in /var/lib/cairn is state":                          "what-in-varlibcairn-is-state",
		"`brokers.<name>.limits`":                                  "brokersnamelimits",
		"3. Packages":                                              "3-packages",
		"The broker's window, learned":                             "the-brokers-window-learned",
		"What CI runs: `.ci/run`":                                  "what-ci-runs-cirun",
		"Unaligned checkpoints, the alignment timeout, savepoints": "unaligned-checkpoints-the-alignment-timeout-savepoints",
		"`sources[].simulator`":                                    "sourcessimulator",
		"Watch it: `cairn top`":                                    "watch-it-cairn-top",
		"See [the unit](#the-unit) now":                            "see-the-unit-now",
		"a_b  c":                                                   "a_b--c",
	} {
		if got := githubSlug(heading); got != want {
			t.Errorf("githubSlug(%q) = %q, want %q", heading, got, want)
		}
	}
	a := headingAnchors("# A\n```\n# B\n```\n## A\n")
	if !a["a"] || !a["a-1"] || a["b"] {
		t.Errorf("headingAnchors: %v, want a and a-1 (not b, in a code block)", a)
	}
}
