package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"github.com/dustin/go-humanize"
	"go.yaml.in/yaml/v3"
)

// The bounds on a pipeline file, so that reading one, whatever it holds,
// costs `cairn validate` and the agent bounded memory and time: a gateway's
// pipeline is a few KB, and no bound here comes near one
// (docs/security.md says how they were chosen). Each is a problem at the
// position where the file crosses it, and stops the reading of what is
// beyond it.
const (
	// MaxFileBytes is the most a pipeline file may hold. A reader reads
	// at most one byte more, so that a larger file costs no more.
	MaxFileBytes = 256 << 10
	// maxEntries is the most entries a list or a mapping may hold.
	maxEntries = 10_000
	// maxStringBytes is the most bytes a string may hold, ${VAR}s
	// substituted: MQTT's limit for its strings (a client id, a user
	// name, a password, a topic), and far above any other string's.
	maxStringBytes = 65_535
	// maxValues is the most values (scalars, lists, mappings) the file
	// may hold, each alias (*name) counted as what it repeats.
	maxValues = 100_000
	// maxScalarBytes is the most bytes the file's scalars may hold
	// together, each alias counted as what it repeats and each ${VAR}
	// substituted: four times MaxFileBytes, which a file without them
	// cannot reach.
	maxScalarBytes = 4 * MaxFileBytes
)

// readFile reads the pipeline file at path: at most one byte more than
// MaxFileBytes, which Parse then refuses.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
}

// tooLarge is the problem with data if it is over MaxFileBytes, at the
// first byte beyond it.
func tooLarge(file string, data []byte) (Error, bool) {
	if len(data) <= MaxFileBytes {
		return Error{}, false
	}
	before := data[:MaxFileBytes]
	line := 1 + bytes.Count(before, []byte("\n"))
	col := 1 + utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:])
	return Error{File: file, Pos: Pos{line, col}, Msg: fmt.Sprintf("the file goes on beyond %s bytes (%s), the most a pipeline file may hold", humanize.Comma(MaxFileBytes), humanize.IBytes(MaxFileBytes))}, true
}

// spend counts values, and size bytes of a scalar's, of the file at n
// against its bounds (maxValues, maxScalarBytes); false once they are
// crossed, after a problem at the node that crossed them: decoding then
// stops.
func (d *decoder) spend(n *yaml.Node, values, size int) bool {
	if d.exhausted {
		return false
	}
	d.values += values
	d.scalarBytes += size
	switch {
	case d.values > maxValues:
		d.errorf(n, "the file holds more than %s values (each alias, *name, counted as what it repeats), the most a pipeline file may hold: the rest is not read", humanize.Comma(maxValues))
	case d.scalarBytes > maxScalarBytes:
		d.errorf(n, "the file's values hold more than %s bytes (%s) with each alias (*name) counted as what it repeats and each ${VAR} substituted, the most a pipeline file may hold: the rest is not read",
			humanize.Comma(maxScalarBytes), humanize.IBytes(maxScalarBytes))
	default:
		return true
	}
	d.exhausted = true
	return false
}

// entries returns the items of the list or mapping n that are read, each
// 1 node of a list or 2 (a key and its value) of a mapping: all, or the
// first maxEntries, after a problem at the first beyond them.
func (d *decoder) entries(n *yaml.Node, per int) []*yaml.Node {
	if len(n.Content) <= maxEntries*per {
		return n.Content
	}
	what := "list"
	if per == 2 {
		what = "mapping"
	}
	d.errorf(n.Content[maxEntries*per], "a %s of %s entries, more than %s, the most a pipeline file's may hold: the rest is not read",
		what, humanize.Comma(int64(len(n.Content)/per)), humanize.Comma(maxEntries))
	return n.Content[:maxEntries*per]
}

// overlong reports a problem if s, the string n gave, is over
// maxStringBytes; it does not show s, which may be from the environment.
func (d *decoder) overlong(n *yaml.Node, s string) bool {
	if len(s) <= maxStringBytes {
		return false
	}
	d.errorf(n, "a string of %s bytes, more than %s, the most a pipeline file's may hold (and MQTT's limit for its strings: client ids, user names, passwords, topics)",
		humanize.Comma(int64(len(s))), humanize.Comma(maxStringBytes))
	return true
}
