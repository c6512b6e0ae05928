package agent

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/agent/config"
	"github.com/cairn-edge/cairn/ingest"
	"github.com/cairn-edge/cairn/mqttio"
)

// eventTimePipeline windows one source's readings by their event time,
// bounded as a gateway's are by default (max_future 5m, min_time 2020),
// with a past bound too; no idleness, so that event time moves with the
// readings alone.
const eventTimePipeline = `
brokers:
  local: {embedded: true}
checkpoints: {interval: 1h}
sources:
  - id: telemetry
    broker: local
    topics: ["sensors/{device}/telemetry"]
    key: device
    value: temp
    time: ts
    out_of_orderness: 1s
    max_past: 720h
    idle_timeout: 0s
  - {id: events, broker: local, topics: ["events/#"], value: v}
operators:
  - {id: avg, type: window, inputs: [telemetry], key_by: key, window: {kind: tumbling, size: 1s}, aggregate: avg}
sinks:
  - {id: out-avg, input: avg, broker: local, topic: "out/avg/{key}"}
`

// TestEventTimeBoundsByConstruction runs generated readings through the
// pipeline as the agent builds it, from the sources' ingest logs through
// the runtime to a window: event times near the gateway's clock, minutes,
// years and millennia ahead and behind, the epoch, the years 1 and 9999,
// received by a gateway clock that runs, is stepped back and forth, and
// reads 1970 for a while (not yet set). Every reading outside the bounds,
// as a plain model says them, is a dead letter of cause bad_time and no
// other is; and the window's event time is exactly what the readings
// inside the bounds make it, so its windows go on closing, whatever the
// bad ones said.
func TestEventTimeBoundsByConstruction(t *testing.T) {
	cfg, errs := config.Parse("eventtime.yaml", []byte(eventTimePipeline), func(string) (string, bool) { return "", false })
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	br, err := sharedBroker()
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 35))
			groups, bad, newest := eventTimeReadings(rng, 400)
			h := &readingsHarness{t: t, cfg: cfg, dir: t.TempDir(), broker: br, id: fmt.Sprintf("eventtime-%d-%d", seed, rng.Uint64())}
			var msgs []ingest.Message
			for _, g := range groups {
				h.feed(g, nil) // a group commit: its messages share their receive time
				msgs = append(msgs, g...)
			}
			res := h.life(0, int64(len(msgs)), false)
			if res.read != int64(len(msgs)) {
				t.Fatalf("the source made %d records and dead letters of %d readings", res.read, len(msgs))
			}

			logs, err := ingest.OpenLogs(ingest.Dir(h.dir), ingest.LogOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer logs.Close()
			stored, err := logs.DeadLetters(0, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			got := map[uint64]bool{}
			for _, dl := range stored {
				if ingest.CauseOf(&dl.DeadLetter) != ingest.CauseBadTime {
					t.Fatalf("dead letter %d of cause %s: %s", dl.Offset, ingest.CauseOf(&dl.DeadLetter), dl.Reason)
				}
				got[dl.Offset] = true
			}
			for i, m := range msgs {
				if offset := uint64(i + 1); got[offset] != bad[offset] {
					t.Fatalf("reading %d %s received at %s: dead letter %v, want %v", offset, m.Payload, m.Received.UTC(), got[offset], bad[offset])
				}
			}
			if want := newest - time.Second.Milliseconds() - 1; res.watermarks["avg"] != want {
				t.Fatalf("the window's event time is %d, want %d: the newest reading within the bounds less out_of_orderness", res.watermarks["avg"], want)
			}
		})
	}
}

// eventTimeReadings draws n readings of one source with a clock of their
// own, in the groups the source commits them in, which share the time
// their first was received; and returns them with the offsets of those
// the bounds refuse and the newest event time of those they take.
func eventTimeReadings(rng *rand.Rand, n int) (groups [][]ingest.Message, bad map[uint64]bool, newest int64) {
	const maxFuture, maxPast = 5 * time.Minute, 720 * time.Hour
	year := 365 * 24 * time.Hour
	clock := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	unset := time.Unix(100, 0) // a board without a real-time clock, before NTP
	offsets := []time.Duration{time.Second, -time.Second, 4 * time.Minute, 6 * time.Minute, -29 * 24 * time.Hour, -31 * 24 * time.Hour,
		year, -year, 100 * year, -30 * year}
	absolute := []time.Time{time.Unix(0, 0), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), mqttio.ClockFloor.Add(-time.Millisecond)}
	bad = map[uint64]bool{}
	newest = -1 << 62
	var received time.Time
	for i := range n {
		clock = clock.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
		switch rng.IntN(40) {
		case 0:
			clock = clock.Add(-time.Hour) // NTP steps it back
		case 1:
			clock = clock.Add(time.Hour)
		}
		if len(groups) == 0 || rng.IntN(8) == 0 { // a new group commit
			groups = append(groups, nil)
			received = clock
			if i%100 >= 90 {
				received = unset.Add(time.Duration(i) * time.Second)
			}
		}
		at := received.Add(time.Duration(rng.IntN(2000)-1000) * time.Millisecond)
		switch k := rng.IntN(6); {
		case k == 0:
			at = absolute[rng.IntN(len(absolute))]
		case k == 1:
			at = received.Add(offsets[rng.IntN(len(offsets))])
		}
		if y := at.Year(); y < 1 || y > 9999 {
			at = received
		}
		ms := at.UnixMilli()
		payload := fmt.Sprintf(`{"temp": 21, "ts": %d}`, ms)
		if rng.IntN(2) == 0 {
			payload = fmt.Sprintf(`{"temp": 21, "ts": %q}`, at.UTC().Format(time.RFC3339Nano))
		}
		last := len(groups) - 1
		groups[last] = append(groups[last], ingest.Message{Topic: fmt.Sprintf("sensors/d%d/telemetry", rng.IntN(5)), Payload: []byte(payload), Received: received})

		now := received.UnixMilli()
		clockSet := !received.Before(mqttio.ClockFloor)
		if ms < mqttio.ClockFloor.UnixMilli() || clockSet && (ms-now > maxFuture.Milliseconds() || now-ms > maxPast.Milliseconds()) {
			bad[uint64(i+1)] = true
			continue
		}
		newest = max(newest, ms)
	}
	return groups, bad, newest
}
