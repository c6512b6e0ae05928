package main

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestTemplatesIdentifyThemselves: each licence's text, under a
// copyright line and a title, is that licence and nothing more.
func TestTemplatesIdentifyThemselves(t *testing.T) {
	for _, l := range licences {
		data, err := templateFiles.ReadFile("templates/" + l.files[0])
		if err != nil {
			t.Fatal(err)
		}
		text := "LICENSE\n\nCopyright (c) 2024-2026 Some One <one@example.org>\n\n" + holes.ReplaceAllString(string(data), "Some One")
		id := Identify(text)
		if len(id.Licences) != 1 || id.Licences[0].Licence.name != l.name || len(id.Rest) > 0 ||
			!slices.Equal(id.Copyright, []string{"2024-2026 Some One <one@example.org>"}) {
			t.Errorf("%s: identified %s, copyright %q, rest %q", l.name, names(id.Licences), id.Copyright, id.Rest)
		}
	}
}

// TestIdentifyCopies: copies as modules ship them, laid out and worded
// otherwise than the templates.
func TestIdentifyCopies(t *testing.T) {
	for file, want := range map[string]string{"isc-go-spew": "ISC", "mpl-2.0-go-cleanhttp": "MPL-2.0"} {
		data, err := os.ReadFile("testdata/" + file)
		if err != nil {
			t.Fatal(err)
		}
		if id := Identify(string(data)); names(id.Licences) != want || len(id.Rest) > 0 {
			t.Errorf("%s: identified %q, rest %q; want %s", file, names(id.Licences), id.Rest, want)
		}
	}
	// Two licences in one file, the BSD one naming its holder, with
	// "Files:" notes between: both found, the notes left over.
	bsd, _ := templateFiles.ReadFile("templates/bsd-3-clause.txt")
	mit, _ := templateFiles.ReadFile("templates/expat.txt")
	id := Identify("Copyright 2012 The Go Authors.\n\n" + holes.ReplaceAllString(string(bsd), "Google LLC") +
		"\n-----\nFiles: snappy/*\n\nCopyright (c) 2016 The filepathx Authors\n\n" + strings.ReplaceAll(string(mit), "\n", " "))
	if names(id.Licences) != "BSD-3-clause and Expat" || !slices.Equal(id.Rest, []string{"Files: snappy/*"}) ||
		!slices.Equal(id.Copyright, []string{"2012 The Go Authors.", "2016 The filepathx Authors"}) {
		t.Errorf("identified %q, copyright %q, rest %q", names(id.Licences), id.Copyright, id.Rest)
	}
	if !strings.Contains(id.Licences[0].Text, "Neither the name of Google LLC nor") {
		t.Errorf("the BSD text found is not the file's own:\n%s", id.Licences[0].Text)
	}
}

// TestChangedLicenceIsNotIdentified: a licence with a word added, or a
// clause gone, is not the licence, and what differs is left over for a
// person to read.
func TestChangedLicenceIsNotIdentified(t *testing.T) {
	mit, _ := templateFiles.ReadFile("templates/expat.txt")
	added := strings.Replace(string(mit), "furnished to do so,", "furnished to do so, for non-commercial use only,", 1)
	if id := Identify(added); len(id.Licences) != 0 || len(id.Rest) == 0 {
		t.Errorf("an Expat text with a restriction: identified %q, rest %q", names(id.Licences), id.Rest)
	}
	bsd, _ := templateFiles.ReadFile("templates/bsd-3-clause.txt")
	text := holes.ReplaceAllString(string(bsd), "X")
	cut := strings.Replace(text, "Redistributions in binary form must reproduce the above\ncopyright notice, this list of conditions and the following disclaimer\nin the documentation and/or other materials provided with the\ndistribution.", "", 1)
	if cut == text {
		t.Fatal("the clause to cut is not in the template")
	}
	if id := Identify(cut); len(id.Licences) != 0 {
		t.Errorf("a BSD text without its second clause: identified %q", names(id.Licences))
	}
}

// TestReviewedNamesItsFiles: each reviewed.txt line names a module, a
// file and a SHA-256, and says what the file says.
func TestReviewedNamesItsFiles(t *testing.T) {
	for line := range strings.Lines(reviewed) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		if f := strings.Fields(line); len(f) < 4 || len(f[2]) != 64 || strings.Trim(f[2], "0123456789abcdef") != "" {
			t.Errorf("reviewed.txt: %q is not MODULE FILE SHA256 WHAT-IT-SAYS", line)
		}
	}
}
