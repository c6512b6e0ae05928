// Package sample keeps the stored samples of cairn's binary formats: files
// of bytes that a cairn wrote, which every later cairn must read. A test
// decodes its package's samples and checks what they hold; where the
// format is still written as it was, it checks too that the encoder writes
// the same bytes. A sample is never rewritten: a format whose bytes change
// gets a new version, whose sample is added beside the old one.
package sample

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

var write = flag.Bool("write-samples", false, "write the stored samples that are missing, from the code under test")

// Bytes returns the sample stored at path (testdata/<name>). When there is
// none and the test runs with -write-samples, it stores what encode
// returns first; without the flag, a missing sample fails the test.
func Bytes(t testing.TB, path string, encode func() []byte) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		return data
	case !errors.Is(err, fs.ErrNotExist):
		t.Fatal(err)
	case !*write || encode == nil:
		t.Fatalf("no stored sample %s: write it once with go test -write-samples, from the code whose format it keeps", path)
	}
	data = encode()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote the sample %s", path)
	return data
}
