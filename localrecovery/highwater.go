package localrecovery

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cairn-edge/cairn/datadir"
	"github.com/cairn-edge/cairn/seglog"
	"github.com/cairn-edge/cairn/wire"
)

// The high-water mark is the highest checkpoint id the store completed or
// took, kept also in a small file outside the store's directory
// (Options.HighWater), so that ids only go up (invariant I6) after the
// store itself is deleted, truncated or replaced by an older copy, and so
// that a start that finds no checkpoint knows whether some completed
// here. The file is 12 bytes: the id (little-endian uint64) and the
// CRC-32C of those 8 bytes. It is written in place, once the completion
// record of a checkpoint with a higher id has committed (never before:
// a crash between the two would leave a mark of a checkpoint that never
// completed, and the next start would refuse to run for state that was
// never there), and not synced: what it guards against is the loss of
// the store, not a power cut, which the store survives whole (its
// completion records are synced). The kernel writes the page back within
// its dirty-expiry time (30 s by default), once for all the checkpoints
// in between, and Close syncs it; only a crash or power cut within that
// time together with the loss of the store leaves it behind.

const highWaterSize = 12

// readHighWater reads the mark at path: 0 if there is no file. A file
// that fails its checksum is an error wrapping seglog.ErrCorrupt.
func readHighWater(path string) (uint64, error) {
	f, err := datadir.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	b, err := io.ReadAll(io.LimitReader(f, highWaterSize+1))
	f.Close()
	if err != nil {
		return 0, err
	}
	d := wire.NewDecoder(b)
	id, sum := d.Uint64(), d.Uint32()
	if err := d.End(); err != nil {
		return 0, fmt.Errorf("%w: %s is not a checkpoint id mark: %v", seglog.ErrCorrupt, path, err)
	}
	if crc32.Checksum(b[:8], crc32c) != sum {
		return 0, fmt.Errorf("%w: %s is not a checkpoint id mark: it fails its checksum", seglog.ErrCorrupt, path)
	}
	return id, nil
}

// openHighWater opens (creating, durably) the mark at path for
// writeHighWater. The file stays open, as the log's segments do: a data
// directory removed under the agent is then noticed by the agent's watch,
// not by a failed checkpoint.
func openHighWater(path string) (*os.File, error) {
	_, statErr := os.Lstat(path)
	f, err := datadir.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("checkpoint id mark: %w", err)
	}
	if statErr != nil {
		if err := syncDir(filepath.Dir(path)); err != nil { // a new file's name
			f.Close()
			return nil, fmt.Errorf("checkpoint id mark %s: %w", path, err)
		}
	}
	return f, nil
}

// writeHighWater records id as the mark in f, unsynced.
func writeHighWater(f *os.File, id uint64) error {
	b := make(wire.Encoder, 0, highWaterSize)
	b.Uint64(id)
	b.Uint32(crc32.Checksum(b, crc32c))
	if _, err := f.WriteAt(b, 0); err != nil {
		return fmt.Errorf("checkpoint id mark %s: %w", f.Name(), err)
	}
	return nil
}
