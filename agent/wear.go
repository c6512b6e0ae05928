package agent

import (
	"context"
	"sync"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/procfs"
)

// wearFile is one of the files the agent writes, and how to read what it
// wrote: whole pages and syncs.
type wearFile struct {
	name string
	read func() (written, syncs int64)
}

// wear counts what the agent writes to its data directory, and the rate of
// the last hour: a gateway's flash wears out by what is written to it.
type wear struct {
	files  []wearFile
	kernel func() (int64, error) // the kernel's count of the process's writes
	base   int64                 // the kernel's count when counting began

	mu      sync.Mutex
	samples []wearSample // oldest first, at most a minute apart, none older than wearWindow but the oldest
}

type wearSample struct {
	at      time.Time
	written int64
}

// wearWindow is the span PerDayBytes extrapolates from, and minWearSpan
// the least: the first minutes of a start (restoring, replaying the log,
// the first checkpoints) say nothing of a day.
const (
	wearWindow  = time.Hour
	minWearSpan = 10 * time.Minute
)

func newWear(files ...wearFile) *wear {
	w := &wear{files: files, kernel: func() (int64, error) { return procfs.WriteBytes(procfs.Self) }}
	w.base, _ = w.kernel()
	w.sample(time.Now())
	return w
}

// written is the bytes the kernel wrote for the process
// (/proc/self/io): the files' pages and the file system's own pages for
// them, which the files' counts cannot see. Where the kernel does not
// tell, it is the sum of the files' pages.
func (w *wear) written() int64 {
	if n, err := w.kernel(); err == nil {
		return n - w.base
	}
	var n int64
	for _, f := range w.files {
		b, _ := f.read()
		n += b
	}
	return n
}

// sample notes the bytes written so far, and forgets the samples that
// the last hour does not need.
func (w *wear) sample(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples = append(w.samples, wearSample{now, w.written()})
	for len(w.samples) > 2 && now.Sub(w.samples[1].at) >= wearWindow {
		w.samples = w.samples[1:]
	}
}

// run samples every minute until ctx is done.
func (w *wear) run(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			w.sample(now)
		case <-ctx.Done():
			return
		}
	}
}

// status is the figures for the control API.
func (w *wear) status(now time.Time) api.Disk {
	d := api.Disk{WrittenBytes: w.written()}
	for _, f := range w.files {
		b, s := f.read()
		d.Files = append(d.Files, api.DiskFile{Name: f.name, WrittenBytes: b, Syncs: s})
		d.Syncs += s
	}
	w.mu.Lock()
	oldest := w.samples[0]
	w.mu.Unlock()
	if span := now.Sub(oldest.at); span >= minWearSpan {
		d.PerDayBytes = int64(float64(d.WrittenBytes-oldest.written) / span.Seconds() * 86400)
		d.PerDaySpanSeconds = span.Seconds()
	}
	return d
}
