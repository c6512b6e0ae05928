package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
)

// checkpointLog is what the log says about checkpoints: each completion
// at debug level (the runtime's line), the first of an incarnation at
// info, so that a start or a reload shows checkpointing works, a failed
// one at warn, and every interval an info summary of those since the last
// summary. An agent that checkpoints every second so writes a dozen info
// lines an hour, not 86,400 a day.
type checkpointLog struct {
	log     *slog.Logger
	lateLog lateLog

	mu        sync.Mutex
	first     bool // the first completion was said
	since     time.Time
	completed int
	unchanged int // completed as SameAs: nothing written
	late      int // completed, taking more than half the interval
	failed    int
	newest    uint64
	total     time.Duration
	longest   time.Duration
}

// onComplete says a checkpoint that completed at now, late at interval
// or not.
func (c *checkpointLog) onComplete(m *checkpoint.Manifest, interval time.Duration, now time.Time) {
	late := isLate(interval, m.Duration)
	if late {
		c.warnLate(m, interval, now)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if late {
		c.late++
	}
	if !c.first {
		c.first = true
		c.log.Info("first checkpoint complete", "id", m.ID, "duration", m.Duration)
	}
	c.completed++
	if m.SameAs != 0 {
		c.unchanged++
	}
	c.newest = max(c.newest, m.ID)
	c.total += m.Duration
	c.longest = max(c.longest, m.Duration)
}

// onAbort says a failed checkpoint at once; one subsumed by a newer one, or
// that could not complete because the pipeline is stopping, is no failure.
func (c *checkpointLog) onAbort(a checkpoint.Abort) {
	if a.Reason == checkpoint.Subsumed || a.Reason == checkpoint.TaskFinished {
		return
	}
	c.log.Warn("checkpoint failed", "id", a.ID, "reason", a.Reason.String(), "cause", a.Cause)
	c.mu.Lock()
	c.failed++
	c.mu.Unlock()
}

// summarize logs a summary every interval until ctx is done, and then one
// of what is left.
func (c *checkpointLog) summarize(ctx context.Context, every time.Duration) {
	c.mu.Lock()
	c.since = time.Now()
	c.mu.Unlock()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			c.summary()
		case <-ctx.Done():
			c.summary()
			return
		}
	}
}

// summary logs what the checkpoints did since the last summary, if they
// did anything, and starts counting afresh.
func (c *checkpointLog) summary() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if c.completed+c.failed > 0 {
		var mean time.Duration
		if c.completed > 0 {
			mean = c.total / time.Duration(c.completed)
		}
		c.log.Info("checkpoints", "completed", c.completed, "unchanged", c.unchanged, "late", c.late, "failed", c.failed,
			"newest", c.newest, "mean_duration", mean.Round(time.Microsecond), "max_duration", c.longest,
			"over", now.Sub(c.since).Round(time.Second))
	}
	c.since, c.completed, c.unchanged, c.late, c.failed, c.total, c.longest = now, 0, 0, 0, 0, 0, 0
}
