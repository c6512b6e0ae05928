//go:build linux && (amd64 || arm64)

// Package fusecut is a file system that loses, when the power is cut, what
// was written to its files after their last sync, for tests of programs
// that write through os.File and mmap, as bbolt does, below which
// internal/testing/powercut's seam (seglog.FS) does not reach. It serves a
// directory (the backing one) through FUSE at a mount point, and passes
// every operation through, noting for each write and truncation not yet
// synced what it replaced. Cut then plays a power cut with powercut's
// semantics: each file keeps what its last fsync or fdatasync made
// durable, then a prefix of the writes after, in the order they were
// made, the last of which may be torn at a 512-byte sector; the rest are
// undone. Creating, renaming and removing files is durable at once, as
// powercut's directories are. It is for tests only, and needs /dev/fuse
// and the right to mount (root: go-fuse's DirectMount, no fusermount).
// go-fuse v2.12.1 builds for 64-bit Linux only (its splice package does
// not for linux/arm), and so does this package.
package fusecut

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is a mounted file system of a backing directory.
type FS struct {
	backing, mount string
	server         *fuse.Server

	mu sync.Mutex
	// pending are each file's changes since its last sync, in order, by
	// its path in the backing directory.
	pending map[string][]change
	// trap, if set, is called once before the write that brings writes
	// to 0 is made (Trap).
	trap   func()
	writes int
}

// Trap calls fire, once, before the n-th write from now is made (and
// then makes it): a test kills the writer there, so that cuts fall
// inside its commits rather than between them.
func (f *FS) Trap(n int, fire func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes, f.trap = n, fire
}

// change is a write or truncation not yet synced, and what it replaced.
type change struct {
	off  int64
	n    int    // bytes written at off (0: a truncation to off)
	old  []byte // the bytes of the file it replaced, from off on
	size int64  // the file's size before it
}

// Mount serves backing at mount (both existing directories).
func Mount(backing, mount string) (*FS, error) {
	f := &FS{backing: backing, mount: mount, pending: make(map[string][]change)}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, err
	}
	root := &fs.LoopbackRoot{Path: backing, Dev: uint64(st.Dev)}
	rootNode := &node{LoopbackNode: &fs.LoopbackNode{RootData: root}, fs: f}
	root.RootNode = rootNode
	server, err := fs.Mount(mount, rootNode, &fs.Options{MountOptions: fuse.MountOptions{
		DirectMount: true, DirectMountStrict: true, FsName: "fusecut", Name: "fusecut",
	}})
	if err != nil {
		return nil, err
	}
	f.server = server
	return f, nil
}

// Unmount unmounts the file system. Nothing may have its files open.
func (f *FS) Unmount() error { return f.server.Unmount() }

// Cut plays a power cut (see the package doc), choosing with rng how much
// of what was not synced each file keeps; it returns how many writes
// were kept, how many undone, and whether one was torn. Nothing may be
// writing the files.
func (f *FS) Cut(rng *rand.Rand) (kept, lost int, torn bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for path, changes := range f.pending {
		k := rng.IntN(len(changes) + 1)
		tear := k > 0 && changes[k-1].n > 512 && rng.IntN(3) == 0
		kept, lost = kept+k, lost+len(changes)-k
		file, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return kept, lost, torn, err
		}
		for i := len(changes) - 1; i >= k; i-- {
			if err := undo(file, changes[i], 0); err != nil {
				file.Close()
				return kept, lost, torn, err
			}
		}
		if tear {
			// The last write kept reached the disk up to a sector boundary.
			c := changes[k-1]
			first := (c.off/512 + 1) * 512 // its first boundary after off
			sectors := int64(rng.IntN(int((c.off+int64(c.n)-first)/512) + 1))
			if err := undo(file, c, first+sectors*512-c.off); err != nil {
				file.Close()
				return kept, lost, torn, err
			}
			torn = true
		}
		if err := errors.Join(file.Sync(), file.Close()); err != nil {
			return kept, lost, torn, err
		}
	}
	clear(f.pending)
	return kept, lost, torn, nil
}

// undo puts back what c replaced, from its byte from on: the old bytes,
// and the file's size before it.
func undo(file *os.File, c change, from int64) error {
	if c.n == 0 { // a truncation: what it cut, and the size before
		if len(c.old) > 0 {
			if _, err := file.WriteAt(c.old, c.off); err != nil {
				return err
			}
		}
		return file.Truncate(c.size)
	}
	if from < int64(len(c.old)) {
		if _, err := file.WriteAt(c.old[from:], c.off+from); err != nil {
			return err
		}
	}
	st, err := file.Stat()
	if err != nil {
		return err
	}
	if end := max(c.size, c.off+from); st.Size() > end {
		return file.Truncate(end)
	}
	return nil
}

// note records change c of the file at path, not yet synced, after
// springing the trap if it is due.
func (f *FS) note(path string, c change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.trap != nil && c.n > 0 {
		if f.writes--; f.writes <= 0 {
			f.trap()
			f.trap = nil
		}
	}
	f.pending[path] = append(f.pending[path], c)
}

// synced says that the file at path is durable as it is.
func (f *FS) synced(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pending, path)
}

// node is a file or directory of the backing directory.
type node struct {
	*fs.LoopbackNode
	fs *FS
}

var _ = (fs.NodeWrapChilder)((*node)(nil))

// WrapChild makes every node the loopback file system makes below the
// root one of fusecut's, which records the writes to its files.
func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), fs: n.fs}
}

func (n *node) backingPath() string {
	return filepath.Join(n.RootData.Path, n.Path(n.Root()))
}

var _ = (fs.NodeOpener)((*node)(nil))

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, _, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return n.wrap(fh, n.backingPath())
}

var _ = (fs.NodeCreater)((*node)(nil))

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	inode, fh, _, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	wrapped, fl, errno := n.wrap(fh, filepath.Join(n.backingPath(), name))
	return inode, wrapped, fl, errno
}

var _ = (fs.NodeSetattrer)((*node)(nil))

// Setattr notes a truncation made by path (not through an open file).
func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if h, ok := fh.(*handle); ok {
		return h.Setattr(ctx, in, out)
	}
	if size, ok := in.GetSize(); ok {
		if err := n.fs.noteTruncate(n.backingPath(), int64(size)); err != nil {
			return fs.ToErrno(err)
		}
	}
	return n.LoopbackNode.Setattr(ctx, fh, in, out)
}

func (n *node) wrap(fh fs.FileHandle, path string) (fs.FileHandle, uint32, syscall.Errno) {
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok {
		return nil, 0, syscall.EIO
	}
	r, err := os.Open(path)
	if err != nil {
		lf.Release(context.Background())
		return nil, 0, fs.ToErrno(err)
	}
	return &handle{f: lf, r: r, path: path, fs: n.fs}, 0, 0
}

// noteTruncate notes that the file at path is to be truncated to size.
func (f *FS) noteTruncate(path string, size int64) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	c := change{off: size, size: st.Size()}
	if size < st.Size() {
		c.old = make([]byte, st.Size()-size)
		file, err := os.Open(path)
		if err != nil {
			return err
		}
		_, err = file.ReadAt(c.old, size)
		file.Close()
		if err != nil {
			return err
		}
	}
	f.note(path, c)
	return nil
}

// handle is an open file: the loopback's, with its writes, truncations
// and syncs noted. It offers no passthrough fd, so that every write
// comes through it.
type handle struct {
	f    *fs.LoopbackFile
	r    *os.File // the backing file, to read what a write replaces
	path string
	fs   *FS
}

var (
	_ = (fs.FileReader)((*handle)(nil))
	_ = (fs.FileWriter)((*handle)(nil))
	_ = (fs.FileFsyncer)((*handle)(nil))
	_ = (fs.FileFlusher)((*handle)(nil))
	_ = (fs.FileReleaser)((*handle)(nil))
	_ = (fs.FileGetattrer)((*handle)(nil))
	_ = (fs.FileSetattrer)((*handle)(nil))
	_ = (fs.FileGetlker)((*handle)(nil))
	_ = (fs.FileSetlker)((*handle)(nil))
	_ = (fs.FileSetlkwer)((*handle)(nil))
	_ = (fs.FileLseeker)((*handle)(nil))
)

func (h *handle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return h.f.Read(ctx, buf, off)
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	st, err := h.r.Stat()
	if err != nil {
		return 0, fs.ToErrno(err)
	}
	c := change{off: off, n: len(data), size: st.Size()}
	if off < st.Size() {
		c.old = make([]byte, min(int64(len(data)), st.Size()-off))
		if _, err := h.r.ReadAt(c.old, off); err != nil {
			return 0, fs.ToErrno(err)
		}
	}
	h.fs.note(h.path, c)
	return h.f.Write(ctx, data, off)
}

func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	errno := h.f.Fsync(ctx, flags)
	if errno == 0 {
		h.fs.synced(h.path)
	}
	return errno
}

func (h *handle) Flush(ctx context.Context) syscall.Errno { return h.f.Flush(ctx) }

func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.r.Close()
	return h.f.Release(ctx)
}

func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.f.Getattr(ctx, out)
}

func (h *handle) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok {
		if err := h.fs.noteTruncate(h.path, int64(size)); err != nil {
			return fs.ToErrno(err)
		}
	}
	return h.f.Setattr(ctx, in, out)
}

func (h *handle) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	return h.f.Getlk(ctx, owner, lk, flags, out)
}

func (h *handle) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return h.f.Setlk(ctx, owner, lk, flags)
}

func (h *handle) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return h.f.Setlkw(ctx, owner, lk, flags)
}

func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return h.f.Lseek(ctx, off, whence)
}

// Available says whether this process can mount a FUSE file system here,
// and if not why.
func Available() error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("no /dev/fuse: %w", err)
	}
	dir, err := os.MkdirTemp("", "fusecut-probe")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	backing, mount := filepath.Join(dir, "b"), filepath.Join(dir, "m")
	if err := errors.Join(os.Mkdir(backing, 0o700), os.Mkdir(mount, 0o700)); err != nil {
		return err
	}
	f, err := Mount(backing, mount)
	if err != nil {
		return fmt.Errorf("mounting FUSE: %w", err)
	}
	return f.Unmount()
}
