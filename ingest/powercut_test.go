package ingest

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/internal/testing/powercut"
)

var ingestCuts = flag.Int("powercut.cuts", 100, "TestIngestLogPowerCut: power cuts (a long run: 10000 or more)")

// TestIngestLogPowerCut appends groups of messages to ingest logs on a file
// system that loses power at a random operation and keeps, of what was not
// synced, nothing or part (package powercut). A message is acknowledged to
// the broker (PUBACK) once the Append holding it returns. After every cut
// the logs are opened again: every acknowledged message is there, once, at
// its offset, with its own topic and payload; nothing else is, but
// messages whose Append had not returned; and those are the ones a broker
// would deliver again, which Logged recognises by packet id and payload,
// so the source acknowledges them without logging them twice. A torn write
// is cut, never read past as damage.
func TestIngestLogPowerCut(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	fs := powercut.New()
	opts := LogOptions{FS: fs, SegmentBytes: 4 << 10, Logger: slog.New(slog.DiscardHandler)}
	type sent struct {
		m     Message
		acked bool
	}
	logged := map[string]map[uint64]sent{"a/0": {}, "b/0": {}} // by log, by offset
	floor := map[string]uint64{}                               // by log: messages below may have been truncated
	packet := uint16(0)
	acked := 0
	for cut := range *ingestCuts {
		logs, err := OpenLogs("/data/ingest", opts)
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		for name, want := range logged {
			l, err := logs.Log(name)
			if err != nil {
				t.Fatalf("cut %d: %v", cut, err)
			}
			next := l.Next()
			got := map[uint64]bool{}
			if _, err := l.Read(l.First(), 1<<20, func(off uint64, m Message) error {
				if m.Lost != nil {
					return fmt.Errorf("a write a power cut tore read as damage at %d: %s", off, m.Lost.Reason)
				}
				w, ok := want[off]
				if !ok || w.m.Topic != m.Topic || !bytes.Equal(w.m.Payload, m.Payload) || w.m.PacketID != m.PacketID {
					return fmt.Errorf("offset %d holds %s %q (packet %d): never appended there", off, m.Topic, m.Payload, m.PacketID)
				}
				got[off] = true
				return nil
			}); err != nil {
				t.Fatalf("cut %d, log %s: %v", cut, name, err)
			}
			if h := logs.Health(); h.DamagedRecords != 0 {
				t.Fatalf("cut %d: a torn write counted as damage: %+v", cut, h)
			}
			redeliverable, err := l.Logged(RedeliveryWindow)
			if err != nil {
				t.Fatal(err)
			}
			for off, w := range want {
				switch {
				case !got[off] && off < floor[name]:
					delete(want, off) // truncated
				case w.acked && !got[off]:
					t.Fatalf("cut %d, log %s: acknowledged message at %d lost (the log holds [%d, %d), floor %d)", cut, name, off, l.First(), next, floor[name])
				case got[off] && !w.acked && redeliverable[PublishID{w.m.Publisher, w.m.PacketID}] != PayloadSum(w.m.Topic, w.m.Payload):
					t.Fatalf("cut %d, log %s: a message that survived unacknowledged at %d would be logged twice when redelivered", cut, name, off)
				case !got[off]:
					delete(want, off) // lost before its acknowledgement: the broker sends it again
				default:
					want[off] = sent{w.m, true}
				}
			}
		}
		fs.DieAfter(1 + rng.IntN(200))
		for !fs.Dead() {
			name := "a/0"
			if rng.IntN(2) == 0 {
				name = "b/0"
			}
			l, _ := logs.Log(name)
			var group []Message
			for range 1 + rng.IntN(30) {
				packet++
				group = append(group, Message{Topic: fmt.Sprintf("sensors/d%d/t", rng.IntN(50)), Payload: fmt.Appendf(nil, `{"n":%d}`, packet),
					PacketID: packet, Received: time.UnixMilli(int64(packet))})
			}
			next := l.Next()
			first, err := l.Append(group)
			for i, m := range group {
				logged[name][next+uint64(i)] = sent{m, err == nil}
			}
			if err != nil {
				if !errors.Is(err, powercut.ErrDead) {
					t.Fatalf("cut %d: %v", cut, err)
				}
				break
			}
			if first != next {
				t.Fatalf("appended at %d, want %d", first, next)
			}
			acked += len(group)
			if rng.IntN(10) == 0 {
				end := l.Next()
				err := l.Truncate(next)
				if err != nil && !errors.Is(err, powercut.ErrDead) {
					t.Fatal(err)
				}
				// Whatever the outcome, segments below may be gone.
				floor[name] = max(floor[name], min(next, end-min(end, RedeliveryWindow)))
			}
		}
		fs.Cut(rng)
	}
	t.Logf("%d power cuts, %d messages acknowledged", *ingestCuts, acked)
}
