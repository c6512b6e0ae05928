// Package testlog is a log that tests read while the code under test
// writes it, from any goroutine.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer collects what is written to it; its zero value is empty and
// ready. It is safe for concurrent use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
