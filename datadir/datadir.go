// Package datadir opens the files of cairn's data directory without
// following what someone may have put in their place. A symbolic link at
// the name of a file the agent writes would have it write, perhaps as
// root, to whatever the link names; a hard link would have it truncate
// and rewrite a file that also has another name, anywhere on the same
// file system. Both are refused, with an error that says which and what
// to do, by checks of the file opened, which no one can swap for another
// between the check and the write.
package datadir

import (
	"errors"
	"fmt"
	"os"
)

// ErrNotOwn is wrapped by the errors of OpenFile about a file the agent
// does not follow or write: a symbolic link, or a file with more than one
// name.
var ErrNotOwn = errors.New("not a file of cairn's own")

// OpenFile is os.OpenFile for a file of the data directory: it does not
// follow a symbolic link at path's last element, and refuses a regular
// file with more than one hard link. The directories above path are
// followed (the data directory itself may be a link to another disk);
// the agent checks its own entries when it starts (agent's
// checkEntries).
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
	if err := checkLinks(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s %w", path, err)
	}
	if flag&os.O_TRUNC != 0 {
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// CheckEntry returns why the entry at path is not one the agent may keep
// in its data directory: a symbolic link, or a regular file with more than
// one hard link; nil if there is none.
func CheckEntry(path string) error {
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case st.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link, which cairn does not follow in its data directory: %w; "+
			"replace it with the directory or file it points to", path, ErrNotOwn)
	case st.Mode().IsRegular():
		if n := links(st); n > 1 {
			return fmt.Errorf("%s has %d hard links, and cairn writes only files of its own: %w; "+
				"remove the other names of the file, or the file", path, n, ErrNotOwn)
		}
	}
	return nil
}

// checkLinks refuses f, a file just opened, if it is a regular file with
// more than one hard link.
func checkLinks(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if n := links(st); st.Mode().IsRegular() && n > 1 {
		return fmt.Errorf("has %d hard links, and cairn writes only files of its own: %w; remove the other names of the file, or the file", n, ErrNotOwn)
	}
	return nil
}
