// Package powercut is a file system in memory that stands in for a power
// cut, which cannot be done on this machine: Cut keeps of every file only
// what was synced (as pebble's strict in-memory file system does), and of
// every directory only the entries synced, then, as a disk that was
// writing when the power failed may, some of the writes after the last
// sync: a prefix of them, possibly ending in a torn sector. Die makes every
// operation fail from a chosen operation on, so that the power fails in
// the middle of whatever the code under test was doing.
//
// It implements seglog.FS. It is for tests only.
package powercut

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"

	"github.com/cairn-edge/cairn/seglog"
)

// ErrDead is what every operation returns once the power is off.
var ErrDead = errors.New("powercut: the power is off")

// FS is the file system. Its methods are safe for concurrent use.
type FS struct {
	mu    sync.Mutex
	files map[string]*file    // by path: what the running system sees
	dirs  map[string]dirState // by path
	// countdown, when positive, counts operations until the power fails.
	countdown int
	dead      bool
	// Fault, if set, is asked before each operation ("write", "sync",
	// "create", "remove", "rename", "truncate", "syncdir") on a path (of
	// a rename, the old one); an error fails it. A failed write may have
	// written part of its bytes (partial).
	Fault func(op, path string) (partial int, err error)
}

type file struct {
	data   []byte
	synced []byte // what a cut keeps for sure
}

type dirState struct {
	names  map[string]*file // entries now
	synced map[string]*file // entries a cut keeps
}

// New returns an empty file system.
func New() *FS {
	return &FS{files: make(map[string]*file), dirs: make(map[string]dirState)}
}

// DieAfter makes the power fail at the n-th operation from now (n ≥ 1):
// it and all after fail with ErrDead, and change nothing.
func (fs *FS) DieAfter(n int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countdown = n
}

// Dead reports whether the power has failed.
func (fs *FS) Dead() bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.dead
}

// op is called with fs.mu held before every operation.
func (fs *FS) op(name, path string) (int, error) {
	if fs.countdown > 0 {
		fs.countdown--
		if fs.countdown == 0 {
			fs.dead = true
		}
	}
	if fs.dead {
		return 0, ErrDead
	}
	if fs.Fault != nil {
		return fs.Fault(name, path)
	}
	return 0, nil
}

// Cut is the power cut and the reboot: every file holds what was synced,
// and with rng's help perhaps a prefix of what was written after, whose
// last sector may be torn (zeros or garbage); every directory holds the
// entries synced. Files open before do not see the new state. The power
// is on again.
func (fs *FS) Cut(rng *rand.Rand) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	survivors := make(map[*file]*file)
	fs.files = make(map[string]*file)
	for dpath, d := range fs.dirs {
		names := make(map[string]*file, len(d.synced))
		for name, f := range d.synced {
			nf, ok := survivors[f]
			if !ok {
				nf = &file{data: keep(f, rng)}
				nf.synced = slices.Clone(nf.data)
				survivors[f] = nf
			}
			names[name] = nf
			fs.files[filepath.Join(dpath, name)] = nf
		}
		fs.dirs[dpath] = dirState{names: names, synced: cloneNames(names)}
	}
	fs.dead, fs.countdown = false, 0
}

// keep is what a cut leaves of f.
func keep(f *file, rng *rand.Rand) []byte {
	out := slices.Clone(f.synced)
	if rng == nil || len(f.data) <= len(f.synced) || !slices.Equal(f.data[:len(f.synced)], f.synced) {
		return out // nothing written after the sync, or it was cut back
	}
	extra := f.data[len(f.synced):]
	switch rng.IntN(4) {
	case 0, 1: // the writes after the sync are lost
		return out
	case 2: // a prefix of them reached the disk
		return append(out, extra[:rng.IntN(len(extra)+1)]...)
	default: // a prefix, and then a torn sector
		n := rng.IntN(len(extra) + 1)
		out = append(out, extra[:n]...)
		torn := make([]byte, min(512, len(extra)-n))
		if rng.IntN(2) == 0 {
			for i := range torn {
				torn[i] = byte(rng.UintN(256))
			}
		}
		return append(out, torn...)
	}
}

func cloneNames(m map[string]*file) map[string]*file {
	out := make(map[string]*file, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (fs *FS) dir(path string) (dirState, string, error) {
	dpath, name := filepath.Split(path)
	dpath = filepath.Clean(dpath)
	d, ok := fs.dirs[dpath]
	if !ok {
		return d, name, fmt.Errorf("powercut: %s: no such directory", dpath)
	}
	return d, name, nil
}

// Create implements seglog.FS.
func (fs *FS) Create(path string) (seglog.File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, err := fs.op("create", path); err != nil {
		return nil, err
	}
	d, name, err := fs.dir(path)
	if err != nil {
		return nil, err
	}
	if _, ok := d.names[name]; ok {
		return nil, fmt.Errorf("powercut: %s exists", path)
	}
	f := &file{}
	d.names[name] = f
	fs.files[path] = f
	return &handle{fs: fs, f: f, path: path}, nil
}

// OpenAppend implements seglog.FS.
func (fs *FS) OpenAppend(path string) (seglog.File, error) { return fs.Open(path) }

// Open implements seglog.FS.
func (fs *FS) Open(path string) (seglog.File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, err := fs.op("open", path); err != nil {
		return nil, err
	}
	f, ok := fs.files[path]
	if !ok {
		return nil, fmt.Errorf("powercut: open %s: %w", path, iofs.ErrNotExist)
	}
	return &handle{fs: fs, f: f, path: path}, nil
}

// Remove implements seglog.FS.
func (fs *FS) Remove(path string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, err := fs.op("remove", path); err != nil {
		return err
	}
	d, name, err := fs.dir(path)
	if err != nil {
		return err
	}
	if _, ok := d.names[name]; !ok {
		return fmt.Errorf("powercut: remove %s: %w", path, iofs.ErrNotExist)
	}
	delete(d.names, name)
	delete(fs.files, path)
	return nil
}

// Rename implements seglog.FS. Like Create and Remove it changes the
// directories' entries now, and the entries a cut keeps only at SyncDir:
// a cut before keeps the old name.
func (fs *FS) Rename(from, to string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, err := fs.op("rename", from); err != nil {
		return err
	}
	df, fname, err := fs.dir(from)
	if err != nil {
		return err
	}
	dt, tname, err := fs.dir(to)
	if err != nil {
		return err
	}
	f, ok := df.names[fname]
	if !ok {
		return fmt.Errorf("powercut: rename %s: %w", from, iofs.ErrNotExist)
	}
	if _, ok := dt.names[tname]; ok {
		return fmt.Errorf("powercut: rename %s to %s: %w", from, to, iofs.ErrExist)
	}
	delete(df.names, fname)
	delete(fs.files, from)
	dt.names[tname] = f
	fs.files[to] = f
	return nil
}

// List implements seglog.FS.
func (fs *FS) List(path string) ([]string, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, err := fs.op("list", path); err != nil {
		return nil, err
	}
	d, ok := fs.dirs[filepath.Clean(path)]
	if !ok {
		return nil, fmt.Errorf("powercut: %s: no such directory", path)
	}
	var names []string
	for name := range d.names {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

// MkdirAll implements seglog.FS: directories are durable at once.
func (fs *FS) MkdirAll(path string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, err := fs.op("mkdir", path); err != nil {
		return err
	}
	path = filepath.Clean(path)
	if _, ok := fs.dirs[path]; !ok {
		fs.dirs[path] = dirState{names: make(map[string]*file), synced: make(map[string]*file)}
	}
	return nil
}

// SyncDir implements seglog.FS.
func (fs *FS) SyncDir(path string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, err := fs.op("syncdir", path); err != nil {
		return err
	}
	path = filepath.Clean(path)
	d, ok := fs.dirs[path]
	if !ok {
		return fmt.Errorf("powercut: %s: no such directory", path)
	}
	fs.dirs[path] = dirState{names: d.names, synced: cloneNames(d.names)}
	return nil
}

// Files returns the paths of the files there now, sorted.
func (fs *FS) Files() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []string
	for p := range fs.files {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// Corrupt flips the bits of byte off of the file at path (synced and not):
// damage, not a power cut.
func (fs *FS) Corrupt(path string, off int) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f, ok := fs.files[path]
	if !ok || off >= len(f.data) {
		return fmt.Errorf("powercut: %s has no byte %d", path, off)
	}
	f.data[off] ^= 0xff
	if off < len(f.synced) {
		f.synced[off] ^= 0xff
	}
	return nil
}

// handle is an open file.
type handle struct {
	fs   *FS
	f    *file
	path string
}

func (h *handle) ReadAt(p []byte, off int64) (int, error) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if off >= int64(len(h.f.data)) {
		return 0, io.EOF
	}
	n := copy(p, h.f.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (h *handle) Write(p []byte) (int, error) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if partial, err := h.fs.op("write", h.path); err != nil {
		partial = min(max(partial, 0), len(p))
		h.f.data = append(h.f.data, p[:partial]...)
		return partial, err
	}
	h.f.data = append(h.f.data, p...)
	return len(p), nil
}

func (h *handle) Sync() error {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if _, err := h.fs.op("sync", h.path); err != nil {
		return err
	}
	h.f.synced = slices.Clone(h.f.data)
	return nil
}

func (h *handle) Truncate(size int64) error {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if _, err := h.fs.op("truncate", h.path); err != nil {
		return err
	}
	if size < int64(len(h.f.data)) {
		h.f.data = h.f.data[:size]
	} else {
		h.f.data = append(h.f.data, make([]byte, size-int64(len(h.f.data)))...)
	}
	return nil
}

func (h *handle) Size() (int64, error) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	return int64(len(h.f.data)), nil
}

func (h *handle) Close() error { return nil }
