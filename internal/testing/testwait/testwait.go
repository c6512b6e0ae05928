// Package testwait is how tests wait for what happens on its own time:
// a condition polled until it holds, or a value a channel delivers, each
// with a deadline after which the test fails. A wait never stands in for
// a sleep: what it waits for is named.
package testwait

import (
	"testing"
	"time"
)

// maxInterval is the longest pause between two calls of a condition.
const maxInterval = 50 * time.Millisecond

// Poll calls cond until it holds or d has passed, and reports whether it
// held: at once, then after a millisecond, and after pauses doubling up
// to 50 ms, so that what holds soon is seen soon and a condition that
// costs (a process run, a request) is not called much more than 20 times
// a second. It sleeps on time.Sleep: in a synctest bubble, on the
// bubble's clock. cond may fail the test itself.
func Poll(d time.Duration, cond func() bool) bool {
	return poll(d, time.Millisecond, maxInterval, cond)
}

// PollEvery is Poll with the same pause, every, between calls: for a
// wait whose end a benchmark measures, which a long pause would blur.
func PollEvery(d, every time.Duration, cond func() bool) bool {
	return poll(d, every, every, cond)
}

// poll calls cond until it holds or d has passed, after pauses that
// double from first up to most.
func poll(d, first, most time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for pause := first; ; pause = min(2*pause, most) {
		if cond() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(pause, left))
	}
}

// For polls cond (as Poll does) until it holds, failing t if it does not
// within d: "waited d for what".
func For(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(d, cond) {
		t.Fatalf("waited %v for %s", d, what)
	}
}

// Recv returns what ch delivers, failing t if nothing comes within d.
func Recv[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("waited %v for %s", d, what)
	}
	var zero T
	return zero
}
