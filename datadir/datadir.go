// Package datadir opens the files of cairn's data directory without
// following what someone may have put in their place. A symbolic link at
// the name of a file the agent writes would have it write, perhaps as
// root, to whatever the link names; a hard link would have it truncate
// and rewrite a file that also has another name, anywhere on the same
// file system; a file of another user, or one that other users may
// write, is one whose contents someone else decides. All are refused,
// with an error that says which and what to do, by checks of the file
// opened, which no one can swap for another between the check and the
// write.
package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrNotOwn is wrapped by the errors of OpenFile and CheckEntry about an
// entry the agent does not follow or write: a symbolic link, a file with
// more than one name, an entry of another user or that other users may
// write (CheckOwner), or one of another kind than the agent keeps there.
var ErrNotOwn = errors.New("not a file of cairn's own")

// Kind is what the agent keeps at an entry of its data directory.
type Kind int

const (
	// File is a regular file.
	File Kind = iota
	// Dir is a directory, all of whose entries are checked too.
	Dir
	// Socket is a unix socket (the control socket), or a stale one's
	// file.
	Socket
)

// OpenFile is os.OpenFile for a file of the data directory: it does not
// follow a symbolic link at path's last element, and refuses a regular
// file with more than one hard link, and, opened to write, one that
// CheckOwner refuses. The directories above path are followed (the data
// directory itself may be a link to another disk); the agent checks its
// own entries when it starts (CheckEntry).
func OpenFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	// O_TRUNC would cut the file before it is looked at: it is cut once it
	// passed.
	f, err := openNoFollow(path, flag&^os.O_TRUNC, perm)
	if err != nil {
		if isLoop(err) {
			return nil, fmt.Errorf("%s is a symbolic link, which cairn does not follow in its data directory: %w; "+
				"replace it with the file it points to", path, ErrNotOwn)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err == nil {
		err = checkLinks(path, st)
	}
	if err == nil && flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE) != 0 {
		err = CheckOwner(path, st)
	}
	if err == nil && flag&os.O_TRUNC != 0 {
		err = f.Truncate(0)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// CheckEntry returns why the entry at path is not one the agent may keep
// in its data directory as kind: a symbolic link, an entry of another
// kind, or a regular file with more than one hard link; of a directory,
// also why any entry under it is not one the agent may keep (of whatever
// kind, not following links). It returns nil if there is none, or nothing
// at path. It is the check for a process that reads the data directory
// (root reading a stopped agent's dead letters); the agent, which writes
// it, checks CheckOwnEntry.
func CheckEntry(path string, kind Kind) error { return checkEntry(path, kind, false) }

// CheckOwnEntry is CheckEntry and, of the entry and of every entry under
// a directory, CheckOwner: the check of the process that writes the data
// directory, the agent, when it starts.
func CheckOwnEntry(path string, kind Kind) error { return checkEntry(path, kind, true) }

func checkEntry(path string, kind Kind, owned bool) error {
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case st.Mode()&os.ModeSymlink != 0:
		return symlinkError(path)
	case kind == Dir && !st.IsDir(), kind == File && !st.Mode().IsRegular(), kind == Socket && st.IsDir():
		return fmt.Errorf("%s is a %s, where cairn keeps a %s: %w; move it away", path, describe(st.Mode()), kind, ErrNotOwn)
	}
	if err := checkOne(path, st, owned); err != nil {
		return err
	}
	if kind != Dir {
		return nil
	}
	return filepath.WalkDir(path, func(p string, _ fs.DirEntry, err error) error {
		if err != nil || p == path {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if st.Mode()&os.ModeSymlink != 0 {
			return symlinkError(p)
		}
		return checkOne(p, st, owned)
	})
}

// symlinkError says that the entry at path is a symbolic link.
func symlinkError(path string) error {
	return fmt.Errorf("%s is a symbolic link, which cairn does not follow in its data directory: %w; "+
		"replace it with the directory or file it points to", path, ErrNotOwn)
}

// checkOne refuses st, the entry at path, if it has more than one hard
// link, or, owned, if CheckOwner does.
func checkOne(path string, st os.FileInfo, owned bool) error {
	if err := checkLinks(path, st); err != nil {
		return err
	}
	if owned {
		return CheckOwner(path, st)
	}
	return nil
}

// CheckOwner is the one rule for the owner and mode of what the agent
// writes in its data directory: st, the entry at path, is refused when it
// belongs to another user than the agent's (effective) one, or when other
// users may write it (o+w). Another user could otherwise decide what the
// agent restores, or replace what it wrote; a root agent would write, as
// root, a file that its owner keeps. Refused, with one message: whose it
// is, its mode, and what to do.
func CheckOwner(path string, st os.FileInfo) error {
	uid, own := owner(st)
	shared := st.Mode().Perm()&0o002 != 0
	if own && !shared {
		return nil
	}
	return fmt.Errorf("%s belongs to uid %d and has mode %s, and cairn (uid %d) keeps in its data directory only what is its own user's and "+
		"no other user may write: %w; chown it to uid %d and chmod o-w it, or move it away",
		path, uid, st.Mode().Perm(), os.Geteuid(), ErrNotOwn, os.Geteuid())
}

// checkLinks refuses st, the entry at path, if it is a regular file with
// more than one hard link.
func checkLinks(path string, st os.FileInfo) error {
	if n := links(st); st.Mode().IsRegular() && n > 1 {
		return fmt.Errorf("%s has %d hard links, and cairn writes only files of its own: %w; remove the other names of the file, or the file",
			path, n, ErrNotOwn)
	}
	return nil
}

// describe names the kind of an entry of mode m.
func describe(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "file"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

func (k Kind) String() string {
	switch k {
	case Dir:
		return "directory"
	case Socket:
		return "socket"
	}
	return "file"
}
