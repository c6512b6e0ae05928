package mqttio

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/ingest"
)

// TestTimeBoundsByConstruction decodes readings of generated event times
// (near the clock, years ahead and behind, the epoch, the years 1 and
// 9999, written as milliseconds and as RFC 3339) received by a gateway
// clock that is set, stepped either way, or not yet set (1970): each is a
// record exactly when a plain model of the bounds takes it, and otherwise
// a DecodeError marked BadTime that names the field and the bound.
func TestTimeBoundsByConstruction(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 1))
	bounds := TimeBounds{Earliest: ClockFloor, MaxFuture: 5 * time.Minute, MaxPast: 30 * 24 * time.Hour}
	d := Decoding{TimeField: "ts", TimeBounds: bounds}
	year := 365 * 24 * time.Hour
	clocks := []time.Time{
		time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC), // set
		time.Date(2026, 12, 6, 11, 0, 0, 0, time.UTC), // stepped back an hour
		time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC),   // stepped forward
		time.Unix(42, 0), // not set: a board without a real-time clock
		time.Date(2000, 1, 1, 0, 0, 10, 0, time.UTC), // a clock chip that lost its battery
	}
	offsets := []time.Duration{0, time.Second, -time.Second, 4 * time.Minute, 6 * time.Minute, -29 * 24 * time.Hour, -31 * 24 * time.Hour,
		year, -year, 50 * year, -50 * year}
	absolute := []time.Time{time.Unix(0, 0), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		ClockFloor, ClockFloor.Add(-time.Millisecond)}
	for i := range 5000 {
		received := clocks[rng.IntN(len(clocks))]
		var at time.Time
		if rng.IntN(4) == 0 {
			at = absolute[rng.IntN(len(absolute))]
		} else {
			at = received.Add(offsets[rng.IntN(len(offsets))] + time.Duration(rng.Int64N(2000)-1000)*time.Millisecond)
		}
		if y := at.Year(); y < 1 || y > 9999 {
			continue // no payload can say it: the decoder refuses it as any field
		}
		ms := at.UnixMilli()
		payload := fmt.Sprintf(`{"ts": %d}`, ms)
		if rng.IntN(2) == 0 {
			payload = fmt.Sprintf(`{"ts": %q}`, at.UTC().Format(time.RFC3339Nano))
		}
		var r graph.Record
		err := d.decode(ingest.Message{Topic: "t", Payload: []byte(payload), Received: received}, &r)

		// The model.
		now := received.UnixMilli()
		clockSet := !received.Before(bounds.Earliest)
		want := ms >= bounds.Earliest.UnixMilli() &&
			(!clockSet || ms-now <= bounds.MaxFuture.Milliseconds() && now-ms <= bounds.MaxPast.Milliseconds())

		var de *DecodeError
		switch {
		case want && err != nil:
			t.Fatalf("case %d: %s received at %s: refused (%v), want a record", i, payload, received, err)
		case want && r.Time != ms:
			t.Fatalf("case %d: %s: event time %d, want %d", i, payload, r.Time, ms)
		case !want && err == nil:
			t.Fatalf("case %d: %s received at %s: a record, want it refused", i, payload, received)
		case !want && (!errors.As(err, &de) || !de.BadTime || !strings.Contains(de.Reason, `"ts"`)):
			t.Fatalf("case %d: %s: %v, want a bad time naming the field", i, payload, err)
		}
	}
}

// TestFarFutureReadingIsABadTime: the reading a sensor whose clock lost
// its battery sends (issue 35) is refused with a reason that says so, and
// one a minute ahead of the gateway is taken.
func TestFarFutureReadingIsABadTime(t *testing.T) {
	d := Decoding{TimeField: "ts", TimeBounds: TimeBounds{Earliest: ClockFloor, MaxFuture: 5 * time.Minute}}
	received := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	var r graph.Record
	err := d.decode(ingest.Message{Payload: []byte(`{"temp":5,"ts":"9999-12-31T23:59:59Z"}`), Received: received}, &r)
	var de *DecodeError
	if !errors.As(err, &de) || !de.BadTime || !strings.Contains(de.Reason, "ahead of the gateway's clock (max_future 5m0s)") {
		t.Fatalf("got %v, want a bad time ahead of the clock", err)
	}
	if err := d.decode(ingest.Message{Payload: []byte(`{"temp":5,"ts":"2026-12-06T12:01:00Z"}`), Received: received}, &r); err != nil {
		t.Fatalf("a reading a minute ahead: %v", err)
	}
}
