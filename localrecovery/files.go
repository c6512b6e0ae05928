package localrecovery

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// OpenOwned opens the file at path as os.OpenFile does, for the files the
// store keeps in the agent's data directory (the store's bbolt file, its
// checkpoint id mark, the file of a move in progress), without following
// a symbolic link at path (O_NOFOLLOW), and refuses a file with more than
// one hard link: whoever can write the data directory could otherwise
// point the agent, which may run as root, at any file to write. The
// directories above path are followed (a data directory may be a link to
// another disk). It is bbolt's Options.OpenFile for the store.
func OpenOwned(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, perm)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, &notOwnedError{fmt.Sprintf("%s is a symbolic link, which cairn does not follow in its data directory: replace it with the file it points to", path)}
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Nlink > 1 {
		f.Close()
		return nil, &notOwnedError{fmt.Sprintf("%s has %d hard links, and cairn writes only files of its own in its data directory: replace it with a copy", path, sys.Nlink)}
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &notOwnedError{fmt.Sprintf("%s is not a regular file", path)}
	}
	return f, nil
}

// notOwnedError says a file is not one the store may open (OpenOwned).
type notOwnedError struct{ msg string }

func (e *notOwnedError) Error() string { return e.msg }
