package agent

import (
	"testing"
	"time"
)

// TestProcPolicy: an agent that uses little of a processor runs on one;
// once it uses most of that one it runs on all again, and a load in
// between changes nothing either way.
func TestProcPolicy(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := procPolicy{most: 4, procs: 4}
	var cpu time.Duration
	steps := []struct {
		used float64 // of a processor, over the second before
		want int
	}{
		{0, 4},   // the first observation has nothing to compare with
		{0.4, 4}, // between the bounds: as it was
		{0.2, 1}, // light
		{0.5, 1}, // between the bounds: as it was
		{0.7, 4}, // most of the one
		{0.3, 4},
		{0.01, 1},
		{0.59, 1},
		{2.5, 4},
	}
	for i, s := range steps {
		cpu += time.Duration(s.used * float64(time.Second))
		if got := p.observe(start.Add(time.Duration(i)*time.Second), cpu); got != s.want {
			t.Fatalf("step %d, %.2f of a processor: %d processors, want %d", i, s.used, got, s.want)
		}
	}
	// Told the same time twice, it decides nothing.
	if got := p.observe(start.Add(time.Duration(len(steps)-1)*time.Second), cpu+time.Hour); got != 4 {
		t.Fatalf("at the same time again: %d processors, want 4", got)
	}
}
