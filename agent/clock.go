package agent

import (
	"sync/atomic"
	"time"
)

// The agent's two clocks. A gateway's wall clock is often wrong: a device
// without a real-time clock boots in 1970, or at its last shutdown, and
// jumps when NTP sets it, and NTP steps it back too. So every interval the
// agent measures (the checkpoints' durations, and so whether one is late,
// the ages and "since" of its status, the rate a day of its writes, the
// timeouts) it measures on the monotonic clock: time.Now's monotonic
// reading, which time.Time's Sub, Since, Until, Before and After use when
// both times have one, and which a step of the wall clock does not move.
// The wall clock only tells the time of day of what it shows or keeps
// (docs/operations.md, Clocks).

// wallStep is a seam for tests, which step the wall clock through it as
// NTP steps a device's, apart from the monotonic clock: readClocks reads
// the time of day as time.Now's plus wallStep (a time.Duration). It is
// always 0 outside tests.
var wallStep atomic.Int64

// clocks is one reading of both clocks, at one instant.
type clocks struct {
	mono time.Time // time.Now: what to measure from (its monotonic reading)
	wall time.Time // the time of day then, to show; never to measure from
}

// readClocks reads both clocks now.
func readClocks() clocks {
	now := time.Now()
	return clocks{mono: now, wall: now.Add(time.Duration(wallStep.Load()))}
}

// unixMS is t, an instant this process read from time.Now, in Unix
// milliseconds on the wall clock as it reads at c: c's time of day less
// the monotonic time from t to c. A step of the wall clock after t moves
// it with the clock, so that c.wall.UnixMilli() less it is the time that
// passed since t, whatever the clock did; 0 for the zero t.
func (c clocks) unixMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return c.wall.UnixMilli() - c.mono.Sub(t).Milliseconds()
}
