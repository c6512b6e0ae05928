package agent

import (
	"sync"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
)

// A checkpoint is late when it takes more than half its interval: the
// next one is then due before long, and one that takes the whole interval
// delays every later one (docs/DESIGN.md section 5). It completes, but the
// log warns, the metrics count it (cairn_checkpoints_late_total), the
// status marks it and cairn top shows it.

// isLate reports whether a checkpoint that took d is late at interval (0:
// checkpoints only on request, which are never late).
func isLate(interval, d time.Duration) bool { return interval > 0 && d > interval/2 }

// lateLog says late checkpoints at warn level: the first at once, and
// then at most one every summary interval, those in between counted in
// the next.
type lateLog struct {
	every time.Duration // the log summary interval

	mu     sync.Mutex
	said   time.Time // when the last warning was said
	unsaid int       // late checkpoints since, not said
}

// warnLate says m, late at interval, if the log may say it now.
func (c *checkpointLog) warnLate(m *checkpoint.Manifest, interval time.Duration, now time.Time) {
	c.lateLog.mu.Lock()
	defer c.lateLog.mu.Unlock()
	l := &c.lateLog
	if !l.said.IsZero() && now.Sub(l.said) < l.every {
		l.unsaid++
		return
	}
	args := []any{"id", m.ID, "duration", m.Duration, "interval", interval}
	if l.unsaid > 0 {
		args = append(args, "late_since_last_warning", l.unsaid)
	}
	c.log.Warn("checkpoint late: it took more than half the checkpoint interval", args...)
	l.said, l.unsaid = now, 0
}
