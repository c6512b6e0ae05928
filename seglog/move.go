package seglog

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// MoveInto makes the directory dir (of logs) from the file at src, as
// fill writes it, once, and safely across a crash: fill writes into a
// directory beside dir (the one it is given, dir + ".moving"), which is
// then marked with what src holds, synced, and renamed to dir. src stays;
// the caller removes it (or sets it aside) once MoveInto returns. Without
// src it does nothing, and reports moved false.
//
// Where dir exists already and src is still there, a crash came between
// the rename and src's removal, or src was written to after the move (by
// an older cairn run on the same data directory, say), which dir does not
// hold. The mark tells them apart: in the first case MoveInto does
// nothing and src can go; in the second it fails, for neither can be
// chosen over the other without losing what the other holds.
func MoveInto(src, dir string, fill func(tmp string) error) (moved bool, err error) {
	if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if _, err := os.Stat(dir); err == nil {
		want, err := os.ReadFile(filepath.Join(dir, movedMark))
		if err != nil {
			return false, fmt.Errorf("both %s and %s are there, and %s is not known to hold what %s does: keep one, and move the other away", src, dir, dir, src)
		}
		got, err := markOf(src)
		if err != nil {
			return false, err
		}
		if got != string(want) {
			return false, fmt.Errorf("%s was written to after it was moved into %s (by an older cairn?): keep one, and move the other away", src, dir)
		}
		return false, nil
	}
	tmp := dir + ".moving"
	if err := os.RemoveAll(tmp); err != nil {
		return false, err
	}
	if err := fill(tmp); err != nil {
		return false, errors.Join(err, os.RemoveAll(tmp)) // the space it took, on a full disk, say
	}
	mark, err := markOf(src)
	if err != nil {
		return false, err
	}
	if err := writeSynced(filepath.Join(tmp, movedMark), mark); err != nil {
		return false, err
	}
	return true, renameDurable(tmp, dir)
}

// movedMark is the file in a directory made by MoveInto that says what
// its source held: markOf.
const movedMark = "moved-from"

// markOf identifies what the file at path holds: its size, modification
// time and the CRC-32C of its first 64 KiB (where a bbolt file's meta
// pages are, which every transaction rewrites).
func markOf(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	head := make([]byte, 64<<10)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", err
	}
	return fmt.Sprintf("%s size %d modified %d head %08x\n", strings.ReplaceAll(filepath.Base(path), " ", "_"),
		st.Size(), st.ModTime().UnixNano(), crc32.Checksum(head[:n], crcTable)), nil
}

// writeSynced writes a new file at path holding s, and syncs it.
func writeSynced(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	return errors.Join(err, f.Sync(), f.Close())
}

// renameDurable renames the directory from, whose files are synced, to
// to, durably: from's entries and then the rename are synced.
func renameDurable(from, to string) error {
	if err := OS.SyncDir(from); err != nil {
		return err
	}
	if err := os.Rename(from, to); err != nil {
		return err
	}
	return OS.SyncDir(filepath.Dir(to))
}
