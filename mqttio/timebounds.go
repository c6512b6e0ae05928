package mqttio

import (
	"fmt"
	"time"
)

// ClockFloor is the default TimeBounds.Earliest: no reading of a working
// device is older, and a gateway clock that reads earlier was never set
// (a board without a real-time clock boots in 1970; a clock chip whose
// battery died reads 2000-01-01).
var ClockFloor = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// TimeBounds are the event times a source takes from its payloads, judged
// against the gateway's clock when the message was received
// (ingest.Message.Received, which the ingest log keeps): a replay judges a
// message as its first read did, so the state stays exactly-once. A
// reading outside them is a dead letter (ingest.CauseBadTime) and never
// moves the watermark: one reading from a device whose clock says 9999
// would otherwise end every window.
//
// The zero TimeBounds takes every time.
type TimeBounds struct {
	// Earliest is the earliest event time taken, and the earliest the
	// gateway's own clock can read and be trusted: while it reads
	// earlier, MaxFuture and MaxPast, which are relative to it, are not
	// applied.
	Earliest time.Time
	// MaxFuture is how far ahead of the gateway's clock an event time may
	// be; 0 for no bound.
	MaxFuture time.Duration
	// MaxPast is how far behind the gateway's clock an event time may be;
	// 0 for no bound.
	MaxPast time.Duration
}

// check returns why a reading of event time at (Unix milliseconds),
// received at received, is refused, or nil. field is the time field as
// the pipeline file names it.
func (b *TimeBounds) check(at int64, received time.Time, field string) error {
	if !b.Earliest.IsZero() && at < b.Earliest.UnixMilli() {
		return &DecodeError{BadTime: true, Reason: fmt.Sprintf("time field %q is %s, before min_time %s: the device's clock is not set",
			field, showMillis(at), b.Earliest.UTC().Format(time.RFC3339))}
	}
	if !b.Earliest.IsZero() && received.Before(b.Earliest) {
		return nil // the gateway's clock cannot say what is ahead or behind
	}
	now := received.UnixMilli()
	if b.MaxFuture > 0 && at-now > b.MaxFuture.Milliseconds() {
		return &DecodeError{BadTime: true, Reason: fmt.Sprintf("time field %q is %s, %v ahead of the gateway's clock (max_future %v): the device's clock is wrong",
			field, showMillis(at), roundAge(at-now), b.MaxFuture)}
	}
	if b.MaxPast > 0 && now-at > b.MaxPast.Milliseconds() {
		return &DecodeError{BadTime: true, Reason: fmt.Sprintf("time field %q is %s, %v behind the gateway's clock (max_past %v)",
			field, showMillis(at), roundAge(now-at), b.MaxPast)}
	}
	return nil
}

// showMillis writes Unix milliseconds as an RFC 3339 time.
func showMillis(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

// roundAge is ms as a duration a person reads: to the second, to the hour
// past a day, in years past a year.
func roundAge(ms int64) string {
	const year = 365.25 * 24 * 3600 * 1000
	if float64(ms) >= year {
		return fmt.Sprintf("%.0f years", float64(ms)/year)
	}
	d := time.Duration(ms) * time.Millisecond
	if d > 24*time.Hour {
		return d.Round(time.Hour).String()
	}
	return d.Round(time.Second).String()
}
