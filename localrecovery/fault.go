package localrecovery

import "github.com/cairn-edge/cairn/seglog"

// faultFS is the operating system's file system with a fault asked before
// every write and sync of a file (Options.WriteFault): its error fails the
// call as a full or broken disk would, and the log rolls back as it must
// then.
type faultFS struct {
	seglog.FS
	fault func() error
}

func (fs faultFS) Create(name string) (seglog.File, error) {
	f, err := fs.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return faultFile{f, fs.fault}, nil
}

func (fs faultFS) OpenAppend(name string) (seglog.File, error) {
	f, err := fs.FS.OpenAppend(name)
	if err != nil {
		return nil, err
	}
	return faultFile{f, fs.fault}, nil
}

type faultFile struct {
	seglog.File
	fault func() error
}

func (f faultFile) Write(p []byte) (int, error) {
	if err := f.fault(); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f faultFile) Sync() error {
	if err := f.fault(); err != nil {
		return err
	}
	return f.File.Sync()
}
