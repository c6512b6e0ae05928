package seglog

import (
	"errors"
	"io"
	iofs "io/fs"
	"os"
	"sort"

	"github.com/cairn-edge/cairn/datadir"
)

// FS is the file system a log lives in: the operating system's (OS), or
// in tests one that loses unsynced writes the way a power cut does.
type FS interface {
	// Create creates a new file for appending, failing if it exists.
	Create(name string) (File, error)
	// OpenAppend opens an existing file for appending and reading.
	OpenAppend(name string) (File, error)
	// Open opens a file for reading.
	Open(name string) (File, error)
	Remove(name string) error
	// Rename renames the file from to to, in the same directory; it
	// fails rather than replace a file at to. Like Create and Remove,
	// it is durable once the directory is synced (SyncDir).
	Rename(from, to string) error
	// List returns the names (not paths) in dir, sorted.
	List(dir string) ([]string, error)
	MkdirAll(dir string) error
	// SyncDir makes dir's entries durable: files created, removed or
	// renamed in it.
	SyncDir(dir string) error
}

// File is an open file of an FS.
type File interface {
	io.ReaderAt
	io.Writer
	io.Closer
	// Sync makes what was written durable (fdatasync where there is one).
	Sync() error
	Truncate(size int64) error
	Size() (int64, error)
}

// OS is the operating system's file system; files and directories are
// private to their user (0600, 0700).
var OS FS = osFS{}

type osFS struct{}

// Create fails where anything is at name, a link too (O_EXCL); OpenAppend
// and Open follow no link, and refuse a file with another name
// (datadir.OpenFile).
func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) OpenAppend(name string) (File, error) {
	f, err := datadir.OpenFile(name, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := datadir.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error { return os.Remove(name) }

// Rename refuses a to that is there, a link too; between the look and the
// rename nothing else names files in a log's directory (LockDir).
func (osFS) Rename(from, to string) error {
	if _, err := os.Lstat(to); !isNotExist(err) {
		if err == nil {
			err = &os.LinkError{Op: "rename", Old: from, New: to, Err: iofs.ErrExist}
		}
		return err
	}
	return os.Rename(from, to)
}

func (osFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (osFS) MkdirAll(dir string) error { return os.MkdirAll(dir, 0o700) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

type osFile struct{ *os.File }

func (f osFile) Sync() error { return fdatasync(f.File) }

func (f osFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func isNotExist(err error) bool { return errors.Is(err, iofs.ErrNotExist) }
