package mqttio

import "time"

// window learns the broker's in-flight window — how many QoS 1 messages
// it sends a client without waiting for an acknowledgement (mosquitto's
// max_inflight_messages) — from what a durable source receives, and says
// when the messages waiting are due for a group commit: at once when the
// window is full, for the broker sends no more until the commit
// acknowledges them; once the broker stops sending while messages are
// owed (a pause); or once the oldest waited the sync interval.
//
// MQTT 3.1.1 never tells a client the window, but what arrives shows it.
// A broker whose window is full stops sending, with exactly that many
// owed (received, not yet acknowledged), until it hears an
// acknowledgement: two pauses in a row with as many owed are taken for the
// window, which a group then fills without waiting for a pause. (A pause
// is eight typical gaps between arrivals without one, counted from the
// last arrival or, if later, the end of the last commit: while a commit
// is written, a broker whose window it holds cannot send. Where the
// interval runs out first, three gaps are enough to learn from.) A
// publisher that pauses after as many messages twice looks the same (and
// its bursts are then committed as they end); the first message that
// arrives with more owed shows a window wider than learned, and it is
// learned again. So groups are one sync per window however wide the
// broker's is, 20, 100 or 1,000 messages, without a setting; a window
// wider than what arrives in a sync interval is never filled, and the
// interval commits.
//
// It is deterministic: no clock and no goroutine. The source tells it of
// each message as it arrives and asks it, with the time, whether a group
// is due (as etcd's raft is told of messages by Step and of the time by
// Tick). It is not safe for concurrent use: the intake guards it.
type window struct {
	// interval is how long the oldest message waits at most
	// (SourceConfig.SyncInterval); limit, if above 0, is a known window
	// (SourceConfig.MaxInflight): a group is due once that many are owed,
	// learned or not.
	interval time.Duration
	limit    int

	full int // messages owed at which the window is full, as learned; 0: not known
	// last is when the newest message arrived, and gap the typical time
	// between arrivals (a moving average); paused is the messages owed at
	// the last pause, if no interval ran out since, and pausedAt the
	// arrival that pause followed; acked is when the last commit ended
	// and its acknowledgements left.
	last     time.Time
	acked    time.Time
	gap      time.Duration
	paused   int
	pausedAt time.Time
}

// Why a group is due, or that it is not (window.due, intake.due).
type dueReason int

const (
	notDue      dueReason = iota
	windowFull            // as many are owed as the window takes
	brokerPause           // no message for a quiet spell while messages are owed
	intervalUp            // the oldest message waited the sync interval
	ackOnly               // nothing waiting is to be logged (intake.due)
	bytesDue              // maxPendingBytes of payload wait (intake.due)
)

func (r dueReason) String() string {
	return [...]string{"not due", "window full", "pause", "interval", "acknowledge only", "bytes"}[r]
}

// minQuiet is the shortest quiet spell that is a pause.
const minQuiet = 20 * time.Millisecond

func newWindow(interval time.Duration, limit int) window {
	return window{interval: interval, limit: limit}
}

// connected forgets what was learned: a new connection may be to another
// broker, or to the same one with another window.
func (w *window) connected() {
	w.full, w.paused, w.pausedAt = 0, 0, time.Time{}
}

// arrived notes a message that arrived at now while owed messages, it
// included, were owed, and reports whether the window is now full: a
// group is due at once.
func (w *window) arrived(now time.Time, owed int) bool {
	if !w.last.IsZero() {
		d := min(now.Sub(w.last), time.Second)
		if w.gap == 0 {
			w.gap = d // the first gap: no pace known before it
		} else {
			w.gap += (d - w.gap) / 8
		}
	}
	w.last = now
	if w.full > 0 && owed > w.full {
		w.full = 0 // the broker sends more than was learned
	}
	return w.isFull(owed)
}

// isFull reports whether owed messages fill the window, as learned or as
// told.
func (w *window) isFull(owed int) bool {
	return w.full > 0 && owed >= w.full || w.limit > 0 && owed >= w.limit
}

// committed notes that a commit ended at now: its acknowledgements
// leave, and the broker may send again.
func (w *window) committed(now time.Time) { w.acked = now }

// quiet is how long no message must arrive for a pause: eight typical
// gaps between arrivals, at least minQuiet. At a steady pace it is longer
// than the pace's gaps, so a pace does not pause.
func (w *window) quiet() time.Duration { return max(minQuiet, 8*w.gap) }

// due reports whether a group is due at now, and why, with owed messages
// owed, the oldest of those waiting (not being committed) having arrived
// at oldest (zero: none waits). If none is due, next is when one will be
// unless a message arrives first (zero: not until one arrives). A pause
// found here is learned from.
func (w *window) due(now time.Time, owed int, oldest time.Time) (why dueReason, next time.Time) {
	if oldest.IsZero() {
		return notDue, time.Time{}
	}
	if w.isFull(owed) {
		return windowFull, now
	}
	quietSince := w.last
	if w.acked.After(quietSince) {
		quietSince = w.acked
	}
	pause, interval := quietSince.Add(w.quiet()), oldest.Add(w.interval)
	switch {
	case !now.Before(pause):
		w.pause(owed)
		return brokerPause, now
	case !now.Before(interval):
		// The interval may end a pause that eight gaps would not have
		// shown yet (a narrow window at a slow pace): three will do to
		// learn from.
		if now.Sub(quietSince) >= max(minQuiet, 3*w.gap) {
			w.pause(owed)
		} else {
			w.paused = 0 // the pause before was not the broker's window
		}
		return intervalUp, now
	case pause.Before(interval):
		return notDue, pause
	}
	return notDue, interval
}

// pause learns from a pause with owed messages owed: they are the window
// if as many were owed at the pause before.
func (w *window) pause(owed int) {
	if w.pausedAt.Equal(w.last) {
		return // the same pause, asked about again
	}
	if owed > 0 && owed == w.paused {
		w.full = owed
	}
	w.paused, w.pausedAt = owed, w.last
}
