package tui

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/cairn-edge/cairn/agent/api"
)

// fleetNow is the fleet view's clock in the tests: 11:07:50 UTC.
var fleetNow = time.UnixMilli(1_795_000_070_000)

// healthy is the status of a gateway that does well, made ago before
// fleetNow.
func healthy(n int, ago time.Duration) api.GatewayStatus {
	return api.GatewayStatus{V: 1, Agent: fmt.Sprintf("cairn-gw-%03d", n), Version: "v0.4.0", Pipeline: "pipeline.yaml", State: "running",
		Time: fleetNow.Add(-ago).UnixMilli(), IntervalMS: 10_000, UptimeS: 86_400 + int64(n)*60, Mode: "exactly-once",
		Checkpoints: api.GatewayCheckpoints{IntervalMS: 10_000, Completed: 8_000 + int64(n),
			Last: &api.GatewayCheckpoint{ID: uint64(8_000 + n), AgeMS: 2_000, DurationMS: 40, AlignmentMS: 3, Size: 12_000, Kind: "incremental"}},
		IngestLag: int64(n % 7), Brokers: []api.GatewayBroker{{Name: "plant", Up: true, Clients: 3, Connected: 3}},
		Memory: api.GatewayMemory{Resident: 31_000_000 + int64(n)*100_000, HeapLive: 9_000_000, Limit: 96 << 20}, DiskPerDay: 40_000_000}
}

// troubled are gateways each with one thing wrong (gw-007 with two), and
// how: the statuses a plant's fleet view shows at fleetNow.
func troubled() map[int]func(*api.GatewayStatus) {
	return map[int]func(*api.GatewayStatus){
		7: func(s *api.GatewayStatus) {
			s.Pipeline = "skew.yaml"
			s.Stall = &api.GatewayStall{Subtask: "drift/0", WaitsFor: "score/0", DurationMS: 1_600, Backlog: 515, Checkpoint: 8_008}
			s.Checkpoints.RecentLate, s.Checkpoints.Late = 3, 3
			s.Checkpoints.Last.Late, s.Checkpoints.Last.DurationMS, s.Checkpoints.Last.AlignmentMS = true, 6_200, 5_900
			s.WatermarkLagMS = 3_400
		},
		23: func(s *api.GatewayStatus) {
			s.Checkpoints.RecentLate, s.Checkpoints.Late = 1, 1
			s.Checkpoints.Last.Late, s.Checkpoints.Last.DurationMS = true, 5_300
		},
		31: func(s *api.GatewayStatus) {
			s.InputHeld, s.OutputBacklog = &api.GatewayHeld{Reason: "output backlog"}, 33_900_000
			s.Brokers = append(s.Brokers, api.GatewayBroker{Name: "cloud", Clients: 1, Since: fleetNow.Add(-4 * time.Minute).UnixMilli()})
		},
		42: func(s *api.GatewayStatus) {
			s.Checkpoints.Failed, s.Checkpoints.RecentFailed = 2, 2
			s.Checkpoints.LastFailed = &api.GatewayFailure{ID: 8_041, AgeMS: 70_000, Cause: "expired"}
		},
		55: func(s *api.GatewayStatus) { s.IngestLag = 12_400 },
		60: func(s *api.GatewayStatus) { s.DeadLetters, s.Rejected = 3, 1 },
		64: func(s *api.GatewayStatus) { s.DiskPerDay = 6_700_000_000 },
	}
}

// plant is n gateways' messages: statuses, online on each status topic,
// gw-017 gone offline at 11:07:44 (its will), gw-070 silent for 45s,
// gw-080 stopped, gw-090 online without statuses, and the troubled ones.
func plant(n int) []any {
	var msgs []any
	for i := 1; i <= n; i++ {
		gw := fmt.Sprintf("gw-%03d", i)
		ago := time.Duration(i%10) * time.Second
		st := healthy(i, ago)
		if f := troubled()[i]; f != nil {
			f(&st)
		}
		switch i {
		case 70:
			st.Time = fleetNow.Add(-45 * time.Second).UnixMilli()
		case 80:
			st.State = "stopped"
		}
		msgs = append(msgs, presence(gw, "online", fleetNow.Add(-time.Hour), true))
		if i != 90 {
			msgs = append(msgs, status(gw, st, time.UnixMilli(st.Time), false))
		}
		switch i {
		case 17:
			msgs = append(msgs, presence(gw, "offline", fleetNow.Add(-6*time.Second), false))
		case 80:
			msgs = append(msgs, presence(gw, "offline", time.UnixMilli(st.Time), false))
		}
	}
	return append(msgs, api.FleetLink{Up: true, At: fleetNow.Add(-time.Minute)})
}

func presence(gw, word string, at time.Time, retained bool) api.FleetMessage {
	return api.FleetMessage{Gateway: gw, Topic: "gateways/" + gw + "/status", Payload: []byte(word), Retained: retained, At: at}
}

func status(gw string, st api.GatewayStatus, at time.Time, retained bool) api.FleetMessage {
	b, err := json.Marshal(st)
	if err != nil {
		panic(err)
	}
	return api.FleetMessage{Gateway: gw, Topic: "gateways/" + gw + "/status/json", JSON: true, Payload: b, Retained: retained, At: at}
}

// earlier are gateway i's statuses of the 40s before plant's: a checkpoint
// each, a failure and a stall, which its detail lists.
func earlier(i int) []any {
	var msgs []any
	gw := fmt.Sprintf("gw-%03d", i)
	for k := 4; k >= 1; k-- {
		st := healthy(i, time.Duration(k)*10*time.Second)
		st.Checkpoints.Last.ID = uint64(8_000 + i - k)
		switch k {
		case 3:
			st.Checkpoints.Failed, st.Checkpoints.RecentFailed = 1, 1
			st.Checkpoints.LastFailed = &api.GatewayFailure{ID: 8_002, AgeMS: 18_000, Cause: "expired"}
		case 2:
			st.Stall = &api.GatewayStall{Subtask: "drift/0", WaitsFor: "score/0", DurationMS: 2_200, Backlog: 2_048, Checkpoint: 8_005, Ended: true, EndedAgoMS: 7_000}
		}
		msgs = append(msgs, status(gw, st, time.UnixMilli(st.Time), false))
	}
	return msgs
}

// fleetModel is a fleet view that received msgs, at a terminal size, at
// fleetNow.
func fleetModel(w, h int, msgs ...any) *Fleet {
	f := NewFleet(FleetOptions{Source: "tcp://broker.plant:1883 gateways/+/status", Topic: "gateways/+/status", Location: time.UTC,
		Now: func() time.Time { return fleetNow }})
	f.Update(tea.WindowSizeMsg{Width: w, Height: h})
	f.Update(fleetBatch(msgs))
	return f
}

// justStarted is the detail view, w×h, of a gateway up for 2 minutes: too
// soon for a day's rate of what it writes.
func justStarted(w, h int) *Fleet {
	st := healthy(5, time.Second)
	st.Agent, st.UptimeS, st.DiskPerDay = "gw-005", 120, 0
	f := fleetModel(w, h, presence("gw-005", "online", fleetNow.Add(-2*time.Minute), false), status("gw-005", st, fleetNow.Add(-time.Second), false))
	press(f, "enter")
	return f
}

// fleetScreen renders f as the terminal shows it without colour.
func fleetScreen(t *testing.T, f *Fleet) string {
	t.Helper()
	return terminalShows(t, f.render(), f.width, f.height)
}

// TestFleetView compares views of a fixed plant with golden files
// (rewrite them with -update).
func TestFleetView(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func() *Fleet
		want []string
	}{
		{"narrow", func() *Fleet { return fleetModel(80, 24, plant(12)...) },
			[]string{"12 gateways · 12 up · 0 down · 1 late · 1 stalled", "› gw-007  running  late: #8007 took 6.2s of 10s (3) (+1)"}},
		{"offline", func() *Fleet { return fleetModel(80, 24, plant(20)...) },
			[]string{"20 gateways · 19 up · 1 down", "› gw-017  OFFLINE  offline since 11:07:44"}},
		{"wide", func() *Fleet { return fleetModel(120, 30, plant(100)...) },
			[]string{"100 gateways · 97 up · 3 down · 1 failing · 2 late · 1 stalled", "DISK/d", "6.2GB", "+", "more"}},
		{"crowded", func() *Fleet { return fleetModel(80, 24, plant(100)...) },
			[]string{"+81 more · ↑/↓ pgup/pgdn"}},
		{"crowded-scrolled", func() *Fleet {
			f := fleetModel(80, 24, plant(100)...)
			press(f, "end")
			return f
		}, []string{"81 above · ↑/↓ pgup/pgdn", "› gw-100"}},
		{"filtered", func() *Fleet {
			f := fleetModel(80, 24, plant(100)...)
			press(f, "/", "b", "r", "o", "k", "e", "r", "enter")
			return f
		}, []string{"filter broker (esc clears)", "› gw-031  running  input held: output backlog (+1)"}},
		{"offline-later-wills", func() *Fleet {
			// gw-017's other clients' wills, as their keepalives run out.
			return fleetModel(80, 24, append(plant(20), presence("gw-017", "offline", fleetNow.Add(-2*time.Second), false),
				presence("gw-017", "offline", fleetNow, false))...)
		}, []string{"› gw-017  OFFLINE  offline since 11:07:44"}},
		{"detail-just-started", func() *Fleet { return justStarted(80, 24) },
			[]string{"1 gateway · 1 up", "gw-005  running · gw-005 · pipeline.yaml", " · disk a day: measured once it has run\n10 minutes\n"}},
		{"detail-just-started-wide", func() *Fleet { return justStarted(120, 30) },
			[]string{"up 2m00s", "memory 30MB resident, heap 8.6MB of 96MB · disk a day: measured once it has run 10 minutes\n"}},
		{"detail", func() *Fleet {
			f := fleetModel(80, 24, append(earlier(7), plant(12)...)...)
			press(f, "enter")
			return f
		}, []string{"gw-007  running · cairn-gw-007 · skew.yaml", "▲ STALL drift/0 waits 1.6s for score/0 (backlog 515) · checkpoint #8008",
			"8007   LATE", "8002   FAILED    11:07:02  expired", "esc back"}},
		{"detail-scrolled", func() *Fleet {
			f := fleetModel(80, 16, append(earlier(7), plant(12)...)...)
			press(f, "enter", "end")
			return f
		}, []string{"above · ↑/↓ scroll", "11:07:23 #8005   drift/0 waited 2.2s for score/0 (backlog 2.0k)"}},
		{"reconnecting", func() *Fleet {
			f := fleetModel(80, 24, plant(12)...)
			f.Update(fleetBatch{api.FleetLink{Err: "EOF", At: fleetNow.Add(-3 * time.Second)},
				api.FleetLink{Err: "dial tcp 10.0.0.9:1883: connect: connection refused", At: fleetNow.Add(-time.Second)}})
			return f
		}, []string{"⟳ broker unreachable since 11:07:47: dial tcp 10.0.0.9:1883: connect:"}},
		{"connecting", func() *Fleet { return fleetModel(80, 24) }, []string{"⟳ connecting to the broker…", "no gateway's status yet"}},
		{"help", func() *Fleet {
			f := fleetModel(80, 24, plant(12)...)
			press(f, "?")
			return f
		}, []string{"OFFLINE (its last will, or stopped)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := fleetScreen(t, tc.f())
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("the screen lacks %q:\n%s", w, out)
				}
			}
			golden.RequireEqual(t, out)
		})
	}
}

// order is the gateways of f, as ranked.
func order(f *Fleet) []string {
	var ids []string
	for _, g := range f.ranked {
		ids = append(ids, g.id)
	}
	return ids
}

// TestFleetRanksWorstFirst: offline and stopped first (the longest
// offline first), then silent, then
// failing checkpoints, late ones, stalls, held input, brokers down, lag,
// dead letters, wear, then those without a status, then the healthy by
// name.
func TestFleetRanksWorstFirst(t *testing.T) {
	f := fleetModel(80, 24, plant(100)...)
	want := []string{"gw-017", "gw-080", "gw-070", "gw-042", "gw-007", "gw-023", "gw-031", "gw-055", "gw-060", "gw-064", "gw-090", "gw-001", "gw-002"}
	if got := order(f)[:len(want)]; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("ranked %v\nwant    %v", got, want)
	}
}

// TestFleetOfflineAndBack: a gateway's will makes it offline at once and
// first; a status that comes after makes it up again; a retained offline
// beside a retained status (the broker's last word on a gateway that went
// away) is offline.
func TestFleetOfflineAndBack(t *testing.T) {
	f := fleetModel(80, 24, plant(5)...)
	f.Update(fleetBatch{presence("gw-004", "offline", fleetNow, false)})
	if o := order(f); o[0] != "gw-004" || f.gateways["gw-004"].rank.state != "OFFLINE" {
		t.Fatalf("after gw-004's will: %v", o)
	}
	f.Update(fleetBatch{status("gw-004", healthy(4, 0), fleetNow, false)})
	if r := f.gateways["gw-004"].rank; r.tier() != tierOK || r.state != "running" {
		t.Fatalf("gw-004 after a new status: %+v", r)
	}
	f = fleetModel(80, 24, status("gw-009", healthy(9, time.Hour), fleetNow, true), presence("gw-009", "offline", fleetNow, true))
	if r := f.gateways["gw-009"].rank; r.state != "OFFLINE" || !strings.Contains(r.problems[0].text, "the broker's last word") {
		t.Fatalf("retained offline: %+v", r)
	}
	f = fleetModel(80, 24, presence("gw-009", "offline", fleetNow, true), status("gw-009", healthy(9, time.Hour), fleetNow, true))
	if r := f.gateways["gw-009"].rank; r.state != "OFFLINE" {
		t.Fatalf("retained offline, then the retained status: %+v", r)
	}
}

// TestFleetOfflineSinceTheFirstWill: each MQTT client of an agent carries
// the offline will, and the broker publishes each as its keepalive runs
// out: a gateway is offline since the first, and the later ones do not
// move that time.
func TestFleetOfflineSinceTheFirstWill(t *testing.T) {
	f := fleetModel(80, 24, plant(5)...)
	f.Update(fleetBatch{presence("gw-004", "offline", fleetNow, false)})
	f.Update(fleetBatch{presence("gw-004", "offline", fleetNow.Add(12*time.Second), false)})
	if at := f.gateways["gw-004"].downAt; !at.Equal(fleetNow) {
		t.Fatalf("gw-004 offline since %v after a second will 12 s later; want %v", at, fleetNow)
	}
}

// TestFleetStatusAge: a retained status is as old as its own time says,
// never older than when it came; a gateway whose statuses stop coming
// goes silent after three intervals and a slack, as the clock moves.
func TestFleetStatusAge(t *testing.T) {
	st := healthy(3, 20*time.Second)
	f := fleetModel(80, 24, status("gw-003", st, fleetNow, true))
	if d, _ := f.age(f.gateways["gw-003"]); d != 20*time.Second {
		t.Fatalf("a retained status made 20s ago is %v old", d)
	}
	st.Time = fleetNow.Add(time.Hour).UnixMilli() // the gateway's clock ahead
	f = fleetModel(80, 24, status("gw-003", st, fleetNow, true))
	if d, _ := f.age(f.gateways["gw-003"]); d != 0 {
		t.Fatalf("a retained status from a clock ahead is %v old", d)
	}
	now := fleetNow
	f.opts.Now = func() time.Time { return now }
	for _, tc := range []struct {
		after time.Duration
		state string
	}{{30*time.Second + silentSlack, "running"}, {30*time.Second + silentSlack + time.Millisecond, "SILENT"}} {
		now = fleetNow.Add(tc.after)
		f.Update(fleetTick(now))
		if s := f.gateways["gw-003"].rank.state; s != tc.state {
			t.Errorf("%v after its status: %s, want %s", tc.after, s, tc.state)
		}
	}
}

// TestFleetCursorFollowsTheGateway: the selected gateway stays selected
// when the ranking moves it, and the view scrolls to keep it shown.
func TestFleetCursorFollowsTheGateway(t *testing.T) {
	f := fleetModel(80, 24, plant(100)...)
	press(f, "end")
	if f.selected != "gw-100" {
		t.Fatalf("end selected %s", f.selected)
	}
	f.Update(fleetBatch{presence("gw-100", "offline", fleetNow, false)})
	out := fleetScreen(t, f)
	if order(f)[0] != "gw-017" && order(f)[0] != "gw-100" || !strings.Contains(out, "› gw-100  OFFLINE") {
		t.Fatalf("gw-100, offline, should be selected and shown near the top:\n%s", out)
	}
	press(f, "enter")
	if out := fleetScreen(t, f); !strings.Contains(out, "gw-100  OFFLINE") || !strings.Contains(out, "• offline since 11:07:50") {
		t.Fatalf("enter shows gw-100:\n%s", out)
	}
	press(f, "esc")
	if f.detail != "" {
		t.Fatalf("esc did not go back to the table")
	}
}

// TestFleetUnreadable: a status that is no JSON is counted and said, and
// breaks nothing else.
func TestFleetUnreadable(t *testing.T) {
	f := fleetModel(80, 24, append(plant(3), api.FleetMessage{Gateway: "gw-009", JSON: true, Payload: []byte("{\"v\":1,"), At: fleetNow},
		presence("gw-010", "hello", fleetNow, false))...)
	out := fleetScreen(t, f)
	if !strings.Contains(out, "2 unreadable") || !strings.Contains(out, "its status is no JSON") {
		t.Fatalf("unreadable messages not said:\n%s", out)
	}
}

// BenchmarkFleetBatch is the fleet view's work for a batch of ten
// statuses among 1,000 gateways (a tenth of a second of a fleet whose
// gateways publish every 10s): decoding them, ranking every gateway
// and drawing the screen.
func BenchmarkFleetBatch(b *testing.B) {
	f := fleetModel(120, 30, plant(1000)...)
	var batches []fleetBatch
	for k := range 100 {
		var batch fleetBatch
		for i := 1; i <= 10; i++ {
			n := k*10 + i
			batch = append(batch, status(fmt.Sprintf("gw-%03d", n), healthy(n, 0), fleetNow, false))
		}
		batches = append(batches, batch)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		f.Update(batches[i%len(batches)])
		_ = f.render()
	}
}
