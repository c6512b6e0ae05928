package agent

import (
	"testing"
	"time"
)

// TestWearRateWaitsForTenMinutes: the rate a day is extrapolated from the
// samples of the last hour, and only once they span 10 minutes.
func TestWearRateWaitsForTenMinutes(t *testing.T) {
	var written int64
	var kernel int64
	w := &wear{files: []wearFile{{"ingest", func() (int64, int64) { return written, 0 }}},
		kernel: func() (int64, error) { return kernel, nil }}
	start := time.Unix(1_700_000_000, 0)
	w.samples = []wearSample{{at: start}}
	written, kernel = 1<<20, 1<<20
	if d := w.status(start.Add(4 * time.Second)); d.PerDayBytes != 0 || d.PerDaySpanSeconds != 0 {
		t.Fatalf("after 4 s: %+v, want no rate a day", d)
	}
	written, kernel = 10<<20, 10<<20 // 10 MiB in 10 minutes: 1,440 MiB a day
	d := w.status(start.Add(10 * time.Minute))
	if want := int64(10<<20) * 144; d.PerDaySpanSeconds != 600 || d.PerDayBytes < want*99/100 || d.PerDayBytes > want*101/100 {
		t.Fatalf("after 10 minutes: %+v, want %d a day over 600 s", d, want)
	}
}
