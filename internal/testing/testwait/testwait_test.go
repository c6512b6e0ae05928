package testwait

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestPoll: a condition that comes to hold is seen within the longest
// pause of its holding; one that never holds is given up on at the
// deadline, having been called no more often than the pauses say.
func TestPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		holds := start.Add(300 * time.Millisecond)
		if !Poll(time.Second, func() bool { return !time.Now().Before(holds) }) {
			t.Fatal("a condition that held after 300 ms was not seen within a second")
		}
		if late := time.Since(holds); late > maxInterval {
			t.Fatalf("seen %v after it held, more than the longest pause", late)
		}

		start, calls := time.Now(), 0
		if Poll(time.Second, func() bool { calls++; return false }) {
			t.Fatal("a condition that never holds was reported to")
		}
		if d := time.Since(start); d != time.Second {
			t.Fatalf("gave up after %v, want the deadline, 1s", d)
		}
		// After pauses of 1, 2, ... 32 ms, then of 50 ms: 7 calls in the
		// first 63 ms, 18 more up to 963 ms, and the last at the deadline.
		if calls != 26 {
			t.Fatalf("%d calls in a second", calls)
		}
	})
}

func TestRecv(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := make(chan int)
		go func() {
			time.Sleep(time.Minute)
			ch <- 7
		}()
		if v := Recv(t, ch, 2*time.Minute, "the value"); v != 7 {
			t.Fatalf("received %d, want 7", v)
		}
	})
}
