// Command debcopyright writes the copyright file of cairn's .deb,
// /usr/share/doc/cairn/copyright, in Debian's machine-readable format
// (copyright-format 1.0, drafted as DEP-5), from what a built binary
// links: its own module, each module `go version -m` lists, and the Go
// standard library. .ci/release runs it for each architecture's binary:
//
//	debcopyright [-root DIR] BINARY >copyright
//
// DIR is the main module's directory (default: the current one). Each
// module's licence files (LICENSE, COPYING and the like, and NOTICE) are
// read from the module cache (`go mod download -json`), Go's from `go
// env GOROOT`, whose version must be the one BINARY was built with. Each
// licence is identified by its text (identify.go); a module whose licence
// files hold no licence known here, or text beyond licences, copyright
// lines and headings that no person has read (reviewed.txt), fails the
// run with a message saying what to do.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

func main() {
	root := flag.String("root", ".", "the main module's directory")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: debcopyright [-root DIR] BINARY >copyright")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	out, err := generate(flag.Arg(0), *root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "debcopyright:", err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}

// A part of the binary: the main module, a module it links, or Go's
// standard library; a Files paragraph of the copyright file.
type part struct {
	module  string   // its path, for reviewed.txt
	files   string   // the paragraph's Files pattern
	comment []string // the paragraph's Comment, line by line
	dir     string   // where its licence files are

	licences  []Found
	copyright []string
}

// generate returns the copyright file of bin.
func generate(bin, root string) ([]byte, error) {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	parts := []*part{{module: info.Main.Path, files: "*", dir: root,
		comment: []string{info.Main.Path + ": cairn itself."}}}
	var download []string // MODULE@VERSION of those in the module cache
	for _, d := range info.Deps {
		p := &part{module: d.Path, files: "vendor/" + d.Path + "/*", comment: []string{d.Path + " " + d.Version}}
		from := d
		if r := d.Replace; r != nil {
			if strings.HasPrefix(r.Path, "./") || strings.HasPrefix(r.Path, "../") {
				p.dir = filepath.Join(root, r.Path)
				p.files = path.Clean(r.Path) + "/*"
				p.comment = append(p.comment, "cairn's own copy of this module, modified: go.mod replaces the module by "+path.Clean(r.Path)+".")
				if _, err := os.Stat(filepath.Join(filepath.Dir(p.dir), "README.md")); err == nil {
					p.comment = append(p.comment, path.Join(path.Dir(path.Clean(r.Path)), "README.md")+" says how it differs.")
				}
			} else {
				from = r
				p.comment = append(p.comment, "replaced (go.mod) by "+r.Path+" "+r.Version+", which the binary links.")
			}
		}
		if p.dir == "" {
			download = append(download, from.Path+"@"+from.Version)
			p.dir = from.Path + "@" + from.Version // until moduleDirs says where
		}
		parts = append(parts, p)
	}
	dirs, err := moduleDirs(download)
	if err != nil {
		return nil, err
	}
	for _, p := range parts {
		if dir, ok := dirs[p.dir]; ok {
			p.dir = dir
		}
	}
	goroot, goversion := goEnv("GOROOT"), goEnv("GOVERSION")
	if goversion != info.GoVersion {
		return nil, fmt.Errorf("%s was built with %s, but the go command here is %s: its standard library's licence is not the one linked", bin, info.GoVersion, goversion)
	}
	parts = append(parts, &part{module: "std", files: "GOROOT/src/*", dir: goroot,
		comment: []string{"The Go standard library and runtime of " + goversion + ", compiled into the binary."}})

	var failed []error
	for _, p := range parts {
		if err := p.read(); err != nil {
			failed = append(failed, err)
		}
	}
	if err := errors.Join(failed...); err != nil {
		return nil, err
	}
	return write(path.Base(info.Main.Path), parts), nil
}

// moduleDirs returns the directories in the module cache of the modules
// named as MODULE@VERSION, downloading those that are not there.
func moduleDirs(modules []string) (map[string]string, error) {
	dirs := make(map[string]string)
	if len(modules) == 0 {
		return dirs, nil
	}
	cmd := exec.Command("go", append([]string{"mod", "download", "-json"}, modules...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var m struct{ Path, Version, Dir, Error string }
		if derr := dec.Decode(&m); derr == io.EOF {
			break
		} else if derr != nil {
			return nil, fmt.Errorf("go mod download -json: %v\n%s", derr, stderr.Bytes())
		}
		if m.Error != "" || m.Dir == "" {
			return nil, fmt.Errorf("go mod download %s@%s: %s", m.Path, m.Version, m.Error)
		}
		dirs[m.Path+"@"+m.Version] = m.Dir
	}
	if err != nil {
		return nil, fmt.Errorf("go mod download: %v\n%s", err, stderr.Bytes())
	}
	return dirs, nil
}

func goEnv(name string) string {
	out, _ := exec.Command("go", "env", name).Output()
	return strings.TrimSpace(string(out))
}

var (
	licenceFile = regexp.MustCompile(`(?i)^(?:licen[cs]e|copying|unlicense)(?:[-._].*)?$`)
	noticeFile  = regexp.MustCompile(`(?i)^notice(?:[-._].*)?$`)
)

// read identifies the licences in p's licence files and gathers its
// copyright statements; NOTICE files go into the comment whole, as
// Apache-2.0 asks of a redistribution.
func (p *part) read() error {
	ents, err := os.ReadDir(p.dir)
	if err != nil {
		return fmt.Errorf("%s: %v", p.module, err)
	}
	var failed []error
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(p.dir, e.Name()))
		if err != nil {
			return err
		}
		text := strings.TrimSpace(strings.ReplaceAll(string(data), "\r\n", "\n"))
		switch {
		case noticeFile.MatchString(e.Name()):
			p.comment = append(p.comment, "", e.Name()+":", "")
			p.comment = append(p.comment, strings.Split(text, "\n")...)
			for _, line := range strings.Split(text, "\n") {
				if copyrightLine.MatchString(line) {
					p.copyright = appendNew(p.copyright, copyrightWords.ReplaceAllString(strings.TrimSpace(line), ""))
				} else if notedCopyright.MatchString(line) {
					p.copyright = appendNew(p.copyright, strings.TrimSpace(line))
				}
			}
		case licenceFile.MatchString(e.Name()):
			id := Identify(text)
			if len(id.Licences) == 0 {
				failed = append(failed, fmt.Errorf("%s: %s holds no licence this tool knows: if it is one a package may ship, add its text to internal/debcopyright/templates and licences (identify.go)", p.module, filepath.Join(p.dir, e.Name())))
				continue
			}
			if len(id.Rest) > 0 {
				sum := sha256.Sum256(data)
				if !reviewedFile(p.module, e.Name(), hex.EncodeToString(sum[:])) {
					failed = append(failed, fmt.Errorf("%s: %s says more than the licences %s and copyright lines:\n\t%s\nRead it; if it does not restrict the licences, add to internal/debcopyright/reviewed.txt the line\n\t%s %s %x WHAT-IT-SAYS",
						p.module, filepath.Join(p.dir, e.Name()), names(id.Licences), strings.Join(id.Rest, "\n\t"), p.module, e.Name(), sum))
					continue
				}
				p.comment = append(p.comment, "", e.Name()+" also says:", "")
				p.comment = append(p.comment, id.Rest...)
			}
			for _, f := range id.Licences {
				p.licences = addFound(p.licences, f)
			}
			for _, c := range id.Copyright {
				p.copyright = appendNew(p.copyright, c)
			}
		}
	}
	if err := errors.Join(failed...); err != nil {
		return err
	}
	if len(p.licences) == 0 {
		return fmt.Errorf("%s: no licence file in %s", p.module, p.dir)
	}
	if len(p.copyright) == 0 {
		p.copyright = sourceCopyright(p.dir)
	}
	if len(p.copyright) == 0 {
		p.copyright = []string{"the authors of " + p.module + " (neither its licence nor its source names them)"}
	}
	return nil
}

// notedCopyright is a line of a NOTICE file with a copyright sign.
var notedCopyright = regexp.MustCompile(`(?i)\(c\)\s*\d|©`)

// sourceCopyright returns the copyright statements of the Go files in
// dir, for a module whose licence names no holder.
func sourceCopyright(dir string) []string {
	var out []string
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			line := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "//"))
			if strings.HasPrefix(line, "package ") {
				break
			}
			if copyrightLine.MatchString(line) {
				out = appendNew(out, copyrightWords.ReplaceAllString(line, ""))
			}
		}
	}
	return out
}

func appendNew(list []string, s string) []string {
	if s == "" || slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// names lists the licences of fs, as a License field's first line does.
func names(fs []Found) string {
	var ns []string
	for _, f := range fs {
		if !slices.Contains(ns, f.Licence.name) {
			ns = append(ns, f.Licence.name)
		}
	}
	return strings.Join(ns, " and ")
}

//go:embed reviewed.txt
var reviewed string

// reviewedFile reports whether reviewed.txt lists module's licence file
// name with this SHA-256: a person read what it says beyond its licences
// and found that it does not restrict them.
func reviewedFile(module, name, sum string) bool {
	for line := range strings.Lines(reviewed) {
		f := strings.Fields(line)
		if len(f) >= 3 && !strings.HasPrefix(f[0], "#") && f[0] == module && f[1] == name && f[2] == sum {
			return true
		}
	}
	return false
}
