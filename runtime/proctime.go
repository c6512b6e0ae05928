package runtime

import "time"

// procClock is a subtask's processing time: the wall clock, as long as it
// runs forward, and never back. A gateway's clock is stepped: forward when
// NTP first syncs a board that booted in 1970, back when it corrects a
// clock that ran fast. Forward, processing time jumps with the clock: the
// windows open then close at once, and no window is made for the time
// skipped (windows are made by records). Back, it does not follow but
// runs on at half the speed of the monotonic clock until the wall clock
// catches up with it: an open window closes after at most twice its
// length rather than after the step, and processing time never repeats
// itself. Like the protocol core, it is told the time.
type procClock struct {
	started bool
	last    int64         // the processing time last read, Unix microseconds
	lastMon time.Duration // the monotonic time then
}

// read returns the processing time, in Unix milliseconds, when the wall
// clock reads wall (Unix milliseconds) and the monotonic clock mono.
func (c *procClock) read(wall int64, mono time.Duration) int64 {
	wallMicros := wall * 1000 // microseconds, not nanoseconds: a clock set to 2300 fits
	if !c.started {
		c.started, c.last, c.lastMon = true, wallMicros, mono
		return wall
	}
	// The wall clock is followed unless it reads less than half the time
	// elapsed since the last read: then it was stepped back, or has not
	// yet caught up with such a step.
	c.last = max(wallMicros, c.last+max(mono-c.lastMon, 0).Microseconds()/2)
	c.lastMon = mono
	return c.last / 1000
}
