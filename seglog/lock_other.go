//go:build !unix

package seglog

// LockDir does not lock where there is no flock.
func LockDir(string) (func() error, error) { return func() error { return nil }, nil }

// LockDirToRead does not lock where there is no flock.
func LockDirToRead(string) (func() error, error) { return func() error { return nil }, nil }
