// Package savepoint reads and writes savepoints: self-contained, versioned,
// checksummed files holding one completed checkpoint — its manifest and
// every subtask snapshot it needs — keyed by operator id, in a format
// independent of the checkpoint store's layout. A savepoint moves state
// between agents, devices and pipeline versions.
//
// Layout, in package wire's fields: the header of magic "CAIRNSP" and
// version 1; the JSON manifest, length-prefixed; for each state handle of
// the manifest in order (each subtask's Base chain, then its State), the
// snapshot's bytes, length-prefixed; then the CRC-32C of everything
// before it, 4 bytes big-endian.
package savepoint

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/wire"
)

const (
	magic   = "CAIRNSP"
	version = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// handles lists a manifest's state handles in file order.
func handles(m *checkpoint.Manifest) []checkpoint.StateHandle {
	var out []checkpoint.StateHandle
	for _, a := range m.Subtasks {
		out = append(out, a.Base...)
		out = append(out, a.State)
	}
	return out
}

// MaxNameLen is the longest savepoint name, in bytes: well within every
// file system's limit on a file name.
const MaxNameLen = 128

// ErrBadName is wrapped by the errors of CheckName.
var ErrBadName = errors.New("not a savepoint name")

// CheckName returns why name cannot name a savepoint file, nil if it can.
// A savepoint name is a plain file name, written in a savepoints directory
// and nowhere else: 1 to MaxNameLen of the characters A–Z, a–z, 0–9, ".",
// "_" and "-", not starting with a dot (no ".", "..", or hidden file), and
// not of FileName's form, which names the savepoints the agent numbers
// itself and deletes past its retention (Prune).
func CheckName(name string) error {
	var why string
	switch {
	case name == "":
		why = "it is empty"
	case strings.ContainsAny(name, `/\`):
		why = "give a name, not a path (no \"/\"): the savepoint is written under that name in the savepoints directory of the agent's data directory; copy it elsewhere afterwards if it should be kept there"
	case len(name) > MaxNameLen:
		why = fmt.Sprintf("it is %d bytes long, longer than %d", len(name), MaxNameLen)
	case name[0] == '.':
		why = "it starts with a dot"
	case strings.ContainsFunc(name, func(r rune) bool { return !nameRune(r) }):
		why = "it may hold only the letters A-Z and a-z, the digits 0-9, \".\", \"_\" and \"-\""
	case numbered(name):
		why = "names of the form savepoint-ID.cairn are the agent's own, deleted past agent.retained_savepoints; choose another"
	default:
		return nil
	}
	return fmt.Errorf("%.64q is %w: %s", name, ErrBadName, why)
}

func nameRune(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-'
}

// ErrTaken is wrapped by the errors of Target and WriteIn about a name
// whose entry exists and is not to be replaced.
var ErrTaken = errors.New("the name is taken")

// Target returns the path of the savepoint name in dir, or why WriteIn
// would refuse it now: name is not a savepoint name (ErrBadName), or an
// entry of that name exists (ErrTaken) and replace is false or the entry
// is not a savepoint file — a symbolic link, a directory or any other
// file is never replaced.
func Target(dir, name string, replace bool) (string, error) {
	if err := CheckName(name); err != nil {
		return "", err
	}
	return target(dir, name, replace)
}

// target is Target for a name already checked, or the agent's own.
func target(dir, name string, replace bool) (string, error) {
	path := filepath.Join(dir, name)
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return path, nil
	case err != nil:
		return "", err
	case !st.Mode().IsRegular():
		return "", fmt.Errorf("savepoint %s: %w by a %s, not a savepoint file, which is never replaced; choose another name", path, ErrTaken, kind(st.Mode()))
	case !isSavepoint(path):
		return "", fmt.Errorf("savepoint %s: %w by a file that is not a savepoint, which is never replaced; choose another name", path, ErrTaken)
	case !replace:
		return "", fmt.Errorf("savepoint %s: %w by an earlier savepoint; ask to replace it (force=1, or --force) or choose another name", path, ErrTaken)
	}
	return path, nil
}

// kind names an entry that is not a regular file.
func kind(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "symbolic link"
	case m.IsDir():
		return "directory"
	}
	return "special file"
}

// isSavepoint reports whether the file at path begins as a savepoint.
func isSavepoint(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(magic)+1)
	if _, err := io.ReadFull(f, head); err != nil {
		return false
	}
	d := wire.NewDecoder(head)
	return d.Header(magic) == version && d.Err() == nil
}

// WriteIn saves checkpoint m, reading its state from store, as the
// savepoint name in dir (made, mode 0700, if missing), if Target allows
// it, and returns its path; name "" is FileName(m.ID), the agent's own
// numbering. The file is written aside, as a hidden temporary file in
// dir, synced, and only then given its name: by a hard link, which fails
// if the name was taken meanwhile, or, replacing a savepoint, by a rename
// over it. Neither follows a link at the name, so nothing outside dir is
// written.
func WriteIn(dir, name string, replace bool, m *checkpoint.Manifest, store checkpoint.Store) (string, error) {
	if name == "" {
		name = FileName(m.ID)
	} else if err := CheckName(name); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path, err := target(dir, name, replace)
	if err != nil {
		return "", err
	}
	tmp, err := writeAside(dir, m, store)
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp)
	if _, serr := os.Lstat(path); replace && serr == nil {
		err = os.Rename(tmp, path)
	} else if err = os.Link(tmp, path); errors.Is(err, fs.ErrExist) {
		err = fmt.Errorf("savepoint %s: %w: an entry of that name appeared while the savepoint was written", path, ErrTaken)
	}
	if err != nil {
		return "", err
	}
	return path, syncDir(dir)
}

// writeAside writes checkpoint m, its state read from store, to a new
// hidden file in dir, synced, and returns its path.
func writeAside(dir string, m *checkpoint.Manifest, store checkpoint.Store) (string, error) {
	tmp, err := os.CreateTemp(dir, ".savepoint-*")
	if err != nil {
		return "", err
	}
	err = encode(tmp, m, store)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return tmp.Name(), nil
}

// encode writes checkpoint m, its state read from store, to f in the
// savepoint format.
func encode(f io.Writer, m *checkpoint.Manifest, store checkpoint.Store) error {
	sum := crc32.New(castagnoli)
	w := bufio.NewWriter(io.MultiWriter(f, sum))
	js, err := json.Marshal(m)
	if err != nil {
		return err
	}
	var head wire.Encoder
	head.Header(magic, version)
	head.Bytes(js)
	w.Write(head)
	for _, h := range handles(m) {
		data, err := store.ReadState(h)
		if err != nil {
			return fmt.Errorf("savepoint of checkpoint %d: %w", m.ID, err)
		}
		var length wire.Encoder // of the snapshot, which is written as it is, not copied
		length.Uvarint(uint64(len(data)))
		w.Write(length)
		w.Write(data)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	var trailer wire.Encoder
	trailer.Uint32BE(sum.Sum32())
	_, err = f.Write(trailer)
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ErrCorrupt is wrapped by errors about a damaged savepoint file.
var ErrCorrupt = errors.New("savepoint file is damaged")

// Savepoint is a savepoint read into memory. It is a checkpoint.Store that
// serves the savepoint's state for a restore; it stores nothing new.
type Savepoint struct {
	Manifest *checkpoint.Manifest
	mu       sync.Mutex
	state    map[string][]byte
}

// Read reads and verifies the savepoint at path. The snapshots it serves
// are parts of the file's bytes, read whole.
func Read(path string) (*Savepoint, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := wire.NewDecoder(data)
	if v := d.Header(magic); d.Err() != nil || v != version || len(data) < len(magic)+1+4 {
		return nil, fmt.Errorf("%w: %s is not a cairn savepoint (version %d)", ErrCorrupt, path, version)
	}
	body, trailer := data[:len(data)-4], wire.NewDecoder(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != trailer.Uint32BE() {
		return nil, fmt.Errorf("%w: %s fails its checksum", ErrCorrupt, path)
	}
	d = wire.NewDecoder(body[len(magic)+1:])
	js := d.Bytes()
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: manifest: %v", ErrCorrupt, path, err)
	}
	sp := &Savepoint{Manifest: new(checkpoint.Manifest), state: make(map[string][]byte)}
	if err := json.Unmarshal(js, sp.Manifest); err != nil {
		return nil, fmt.Errorf("%w: %s: manifest: %v", ErrCorrupt, path, err)
	}
	for _, h := range handles(sp.Manifest) {
		sp.state[h.Key] = d.Bytes()
		if err := d.Err(); err != nil {
			return nil, fmt.Errorf("%w: %s: state %s: %v", ErrCorrupt, path, h.Key, err)
		}
	}
	if err := d.End(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	return sp, nil
}

// ReadState implements checkpoint.Store, verifying the snapshot.
func (s *Savepoint) ReadState(h checkpoint.StateHandle) ([]byte, error) {
	s.mu.Lock()
	data, ok := s.state[h.Key]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: %s is not in the savepoint", checkpoint.ErrCorrupt, h.Key)
	}
	return data, checkpoint.Verify(h, data)
}

// The rest of checkpoint.Store: a savepoint is read-only.

var errReadOnly = errors.New("a savepoint is read-only")

func (s *Savepoint) LastID() (uint64, error) { return s.Manifest.ID, nil }
func (s *Savepoint) SaveLastID(uint64) error { return errReadOnly }
func (s *Savepoint) PutState(uint64, checkpoint.TaskID, iter.Seq[[]byte]) (checkpoint.StateHandle, error) {
	return checkpoint.StateHandle{}, errReadOnly
}
func (s *Savepoint) Complete(*checkpoint.Manifest) error { return errReadOnly }
func (s *Savepoint) Discard(uint64) error                { return errReadOnly }
func (s *Savepoint) Completed() ([]*checkpoint.Manifest, error) {
	return []*checkpoint.Manifest{s.Manifest}, nil
}

// FileName is the name of checkpoint id's savepoint file in a savepoints
// directory.
func FileName(id uint64) string { return fmt.Sprintf("savepoint-%d.cairn", id) }

// numberedID is the checkpoint id of name if it is FileName's.
func numberedID(name string) (uint64, bool) {
	var id uint64
	n, _ := fmt.Sscanf(name, "savepoint-%d.cairn", &id)
	return id, n == 1 && name == FileName(id)
}

// numbered reports whether name is of FileName's form.
func numbered(name string) bool {
	_, ok := numberedID(name)
	return ok
}

// Prune deletes the savepoint files (FileName) in dir but the keep newest,
// by checkpoint id, and returns the paths it deleted. Other files are left
// alone.
func Prune(dir string, keep int) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var ids []uint64
	for _, e := range ents {
		if id, ok := numberedID(e.Name()); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var removed []string
	for _, id := range ids[:max(0, len(ids)-keep)] {
		path := filepath.Join(dir, FileName(id))
		if err := os.Remove(path); err != nil {
			return removed, err
		}
		removed = append(removed, path)
	}
	return removed, nil
}
