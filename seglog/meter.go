package seglog

import "sync/atomic"

// PageSize is the unit the kernel writes files back in, and Meter counts.
const PageSize = 4096

// Meter counts the bytes a set of files makes the kernel write back, and
// the syncs that make it. It is safe for concurrent use; the zero Meter is
// ready.
type Meter struct {
	written atomic.Int64
	syncs   atomic.Int64
}

// Written is the bytes counted so far: whole pages.
func (m *Meter) Written() int64 { return m.written.Load() }

// Syncs is the number of fsyncs and fdatasyncs counted so far.
func (m *Meter) Syncs() int64 { return m.syncs.Load() }

// addWritten counts n bytes written back.
func (m *Meter) addWritten(n int64) {
	if m != nil {
		m.written.Add(n)
	}
}

// addSyncs counts n syncs.
func (m *Meter) addSyncs(n int64) {
	if m != nil {
		m.syncs.Add(n)
	}
}

// dirtyPages tracks the pages of one file written since its last sync, as
// the kernel does: a write dirties the pages it touches, and a page already
// dirty costs nothing more until a sync cleans it. Appends only ever move
// forward, so the dirty pages are one range ending at through.
type dirtyPages struct {
	through int64 // the last dirty page, -1 when the file is clean
}

// wrote counts into m the pages that a write of n bytes at off dirtied.
func (d *dirtyPages) wrote(m *Meter, off, n int64) {
	if n <= 0 {
		return
	}
	first, last := off/PageSize, (off+n-1)/PageSize
	if d.through >= first {
		first = d.through + 1
	}
	if last >= first {
		m.addWritten((last - first + 1) * PageSize)
		d.through = last
	}
}

// synced marks the file clean.
func (d *dirtyPages) synced() { d.through = -1 }
