package main

import (
	"fmt"
	"slices"
	"strings"
)

// format is the copyright file's format, as its first field names it.
const format = "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"

// write returns the copyright file of parts: a header, a Files paragraph
// for each part, and a stand-alone License paragraph for each licence.
// Where the copies of a licence differ in their words (BSD's clause 3
// names its holder), the most common text is the stand-alone paragraph's
// and a Files paragraph whose copy differs holds its own text, as
// copyright-format 1.0 allows: one short name, one text.
func write(name string, parts []*part) []byte {
	var b strings.Builder
	field(&b, "Format", format)
	field(&b, "Upstream-Name", name)
	field(&b, "Comment", "/usr/bin/"+name+" is one statically linked Go binary: "+name+"'s own code, the Go modules it links "+
		"and Go's standard library and runtime, each in a paragraph below, with its version as `go version -m /usr/bin/"+name+"` lists it. "+
		"A module's files are named as `go mod vendor` would place them. Made by internal/debcopyright from the binary and the licence files of what it links.")

	// The copy of each licence that its stand-alone paragraph holds: the
	// words most copies have, the first of those copies' text.
	counts := make(map[string]map[string]int) // licence → words → copies
	var order []*licence
	for _, p := range parts {
		for _, f := range p.licences {
			if counts[f.Licence.name] == nil {
				counts[f.Licence.name] = make(map[string]int)
				order = append(order, f.Licence)
			}
			counts[f.Licence.name][f.words]++
		}
	}
	standalone := make(map[string]Found)
	for _, p := range parts {
		for _, f := range p.licences {
			if s, ok := standalone[f.Licence.name]; !ok || counts[f.Licence.name][f.words] > counts[f.Licence.name][s.words] {
				standalone[f.Licence.name] = f
			}
		}
	}

	for _, p := range parts {
		b.WriteString("\n")
		field(&b, "Files", p.files)
		field(&b, "Copyright", strings.Join(p.copyright, "\n"))
		own := slices.ContainsFunc(p.licences, func(f Found) bool { return f.words != standalone[f.Licence.name].words })
		lic := names(p.licences)
		if own {
			var texts []string
			for _, f := range p.licences {
				texts = append(texts, text(f))
			}
			lic += "\n" + strings.Join(texts, "\n\n")
		}
		field(&b, "License", lic)
		field(&b, "Comment", strings.Join(p.comment, "\n"))
	}
	for _, l := range order {
		b.WriteString("\n")
		field(&b, "License", l.name+"\n"+text(standalone[l.name]))
	}
	return []byte(b.String())
}

// text is a licence's text for the copyright file: a pointer to Debian's
// copy, where Debian has one, else the text.
func text(f Found) string {
	if f.Licence.common != "" {
		return fmt.Sprintf("On Debian systems, the complete text of the %s can be found in\n\"/usr/share/common-licenses/%s\".", f.Licence.title, f.Licence.common)
	}
	return f.Text
}

// field writes a field: its first line after the name, each further line
// indented by a space, an empty one as " .".
func field(b *strings.Builder, name, value string) {
	first, rest, _ := strings.Cut(value, "\n")
	fmt.Fprintf(b, "%s: %s\n", name, first)
	if rest == "" {
		return
	}
	for _, line := range strings.Split(rest, "\n") {
		if strings.TrimSpace(line) == "" {
			line = "."
		}
		fmt.Fprintf(b, " %s\n", line)
	}
}
