package mqttio

import "sync"

// Backlog bounds the output a job's sinks hold for their brokers: what
// they staged and the broker has not acknowledged. A two-phase-commit sink
// cannot drop it, and holds it in memory and in every checkpoint; a broker
// gone for an hour would otherwise make both grow until the agent runs out
// of memory. Above the limit the job's sources hold, reading nothing new
// (MQTT input is still logged and acknowledged: the ingest log on disk
// takes the wait), while checkpoints go on; below three quarters of it
// they read again.
type Backlog struct {
	limit int64

	mu    sync.Mutex
	bytes int64
	// clear is open while the backlog is over the limit and closed when it
	// falls back; nil while under.
	clear chan struct{}
	// empty, once Empty asked for it, is closed when the backlog is.
	empty chan struct{}
	// onChange, if set, hears when holding starts (true) and ends.
	onChange func(held bool, bytes int64)
}

// NewBacklog returns a backlog of at most limit bytes; onChange, if set,
// is called (with the backlog's lock held, so briefly) when holding starts
// and ends.
func NewBacklog(limit int64, onChange func(held bool, bytes int64)) *Backlog {
	return &Backlog{limit: limit, onChange: onChange}
}

// Add changes the backlog by n bytes, negative when the broker
// acknowledged some.
func (b *Backlog) Add(n int64) {
	if b == nil || n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bytes += n
	if b.empty != nil && b.bytes <= 0 {
		close(b.empty)
		b.empty = nil
	}
	switch {
	case b.clear == nil && b.bytes > b.limit:
		b.clear = make(chan struct{})
		if b.onChange != nil {
			b.onChange(true, b.bytes)
		}
	case b.clear != nil && b.bytes <= b.limit/4*3:
		close(b.clear)
		b.clear = nil
		if b.onChange != nil {
			b.onChange(false, b.bytes)
		}
	}
}

// Hold returns nil while sources may read, else a channel closed when
// they may again.
func (b *Backlog) Hold() <-chan struct{} {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.clear
}

// Empty returns a channel closed once the backlog is empty: every byte
// staged was acknowledged by its broker (or let go by its sink, which
// closed).
func (b *Backlog) Empty() <-chan struct{} {
	if b == nil {
		return closed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bytes <= 0 {
		return closed
	}
	if b.empty == nil {
		b.empty = make(chan struct{})
	}
	return b.empty
}

// closed is a channel that is closed.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Bytes is the backlog's size, and whether sources hold.
func (b *Backlog) Bytes() (int64, bool) {
	if b == nil {
		return 0, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bytes, b.clear != nil
}
