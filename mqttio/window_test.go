package mqttio

import (
	"container/heap"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// The learning of the broker's window is tested as etcd's raft is: the
// window (window.go) told of arrivals and asked about the time by a test
// (testdata/window/*.txt, one step at a time, or a whole simulated run
// against a broker with a window of its own), and a property test over
// random brokers, disks and loads (TestWindowProperties).

// epoch is time 0 of the tests: the window needs no real clock.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestWindowScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/window", func(t *testing.T, path string) {
		var w window
		owed := 0
		var oldest time.Time
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			at := func() time.Time {
				t.Helper()
				var s string
				d.ScanArgs(t, "at", &s)
				v, err := time.ParseDuration(s)
				if err != nil {
					t.Fatal(err)
				}
				return epoch.Add(v)
			}
			state := func() string {
				return fmt.Sprintf("owed %d, window %s, quiet %v", owed, known(w.full), w.quiet().Round(time.Millisecond))
			}
			switch d.Cmd {
			case "window":
				interval, limit := time.Second, 0
				if d.HasArg("interval") {
					var s string
					d.ScanArgs(t, "interval", &s)
					v, err := time.ParseDuration(s)
					if err != nil {
						t.Fatal(err)
					}
					interval = v
				}
				d.MaybeScanArgs(t, "limit", &limit)
				w, owed, oldest = newWindow(interval, limit), 0, time.Time{}
				return state() + "\n"
			case "arrive":
				// arrive at=T [n=N] [every=D]: N messages, D apart.
				now, n, every := at(), 1, time.Duration(0)
				d.MaybeScanArgs(t, "n", &n)
				if d.HasArg("every") {
					var s string
					d.ScanArgs(t, "every", &s)
					var err error
					if every, err = time.ParseDuration(s); err != nil {
						t.Fatal(err)
					}
				}
				full := false
				for i := range n {
					owed++
					if oldest.IsZero() {
						oldest = now
					}
					full = w.arrived(now.Add(time.Duration(i)*every), owed)
				}
				s := state()
				if full {
					s = "full: a group is due at once; " + s
				}
				return s + "\n"
			case "due":
				now := at()
				why, next := w.due(now, owed, oldest)
				s := why.String()
				if why == notDue && !next.IsZero() {
					s += fmt.Sprintf(" until %v", next.Sub(epoch))
				}
				return s + "; " + state() + "\n"
			case "commit":
				// The messages owed are logged and acknowledged.
				owed, oldest = 0, time.Time{}
				return state() + "\n"
			case "connected":
				w.connected()
				return state() + "\n"
			case "sim":
				return simulate(t, d)
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
	})
}

// known shows a count that 0 means unknown of.
func known(n int) string {
	if n == 0 {
		return "unknown"
	}
	return strconv.Itoa(n)
}

// A simulated run: a publisher, a broker with an in-flight window, and a
// source whose intake asks a window when to commit, as intake.due does.
// Time is simulated, so a run is exact and repeatable.
type simConfig struct {
	window   int           // the broker's in-flight window
	limit    int           // SourceConfig.MaxInflight
	interval time.Duration // SourceConfig.SyncInterval
	sync     time.Duration // how long a commit takes
	latency  time.Duration // one way, between broker and source
	perMsg   time.Duration // the broker's time to send a message
}

// A phase of the load: from its start, for dur, rate messages a second
// published in ticks of 10 ms (as cairn-bench's publishers do), or n at
// once every every; or the broker's restart with another window.
type simPhase struct {
	dur         time.Duration
	rate        int
	n           int
	every       time.Duration
	brokerWidth int
}

type simEvent struct {
	at   time.Duration
	seq  int
	kind int // simPublish ...
	n    int // messages (acks), or the timer's generation
}

const (
	simPublish   = iota // a message published
	simDeliver          // a message reaches the source
	simAcks             // acknowledgements reach the broker
	simCommitted        // a commit is durable
	simTimer            // the ingester's timer fires
	simRestart          // the broker restarts with another window
)

type simQueue []simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// simResult is what a run did.
type simResult struct {
	cfg       simConfig
	published int
	acked     int
	groups    []int // the commits' sizes, in order
	reasons   [dueReason(6)]int
	waits     []time.Duration // per message: from the broker's send to its acknowledgement's arrival there
	holds     []time.Duration // per message: from its arrival at the source to its commit's start
	stalled   time.Duration   // the broker had messages to send and its window was full
	learned   int             // the window as learned at the end
	learnedAt time.Duration   // when the window was last learned, -1: never
	end       time.Duration
}

// runSim runs phases against cfg's broker and then lets everything
// published be acknowledged.
func runSim(cfg simConfig, phases []simPhase) *simResult {
	r := &simResult{cfg: cfg, learnedAt: -1}
	var q simQueue
	seq := 0
	push := func(at time.Duration, kind, n int) {
		seq++
		heap.Push(&q, simEvent{at: at, seq: seq, kind: kind, n: n})
	}
	// The publisher's schedule.
	start := time.Duration(0)
	for _, p := range phases {
		switch {
		case p.brokerWidth > 0:
			push(start, simRestart, p.brokerWidth)
		case p.rate > 0:
			done := 0
			for tick := time.Duration(0); tick < p.dur; tick += 10 * time.Millisecond {
				due := int(float64(p.rate) * tick.Seconds())
				for ; done < due; done++ {
					push(start+tick, simPublish, 0)
				}
			}
		case p.n > 0:
			for at := time.Duration(0); at < p.dur; at += p.every {
				for range p.n {
					push(start+at, simPublish, 0)
				}
			}
		}
		start += p.dur
	}
	// The broker: messages queued, the send times of those in flight.
	width := cfg.window
	queued, inflight := 0, 0
	var sent []time.Duration // every message's send time, in order
	delivered := 0
	lastSend := time.Duration(-1)
	stalledSince := time.Duration(-1)
	// The source.
	w := newWindow(cfg.interval, cfg.limit)
	type msg struct{ sent, arrived time.Duration }
	var pending, committing []msg
	busy := false
	timerAt, timerGen := time.Duration(-1), 0
	at := func(d time.Duration) time.Time { return epoch.Add(d) }
	var now time.Duration
	stall := func() {
		full := queued > 0 && inflight >= width
		switch {
		case full && stalledSince < 0:
			stalledSince = now
		case !full && stalledSince >= 0:
			r.stalled += now - stalledSince
			stalledSince = -1
		}
	}
	send := func() {
		for queued > 0 && inflight < width {
			queued, inflight = queued-1, inflight+1
			lastSend = max(lastSend+cfg.perMsg, now)
			sent = append(sent, lastSend)
			push(lastSend+cfg.latency, simDeliver, 0)
		}
		stall()
	}
	// evaluate is the ingester's loop: commit if due, else arm the timer.
	evaluate := func() {
		if busy {
			return
		}
		var oldest time.Time
		if len(pending) > 0 {
			oldest = at(pending[0].arrived)
		}
		full := w.full
		why, next := w.due(at(now), len(pending), oldest)
		if w.full != full && w.full > 0 {
			r.learnedAt = now
		}
		if why == notDue {
			timerGen++
			if timerAt = -1; !next.IsZero() {
				timerAt = next.Sub(epoch)
				push(timerAt, simTimer, timerGen)
			}
			return
		}
		r.reasons[why]++
		r.groups = append(r.groups, len(pending))
		for _, m := range pending {
			r.holds = append(r.holds, now-m.arrived)
		}
		committing, pending, busy = pending, nil, true
		push(now+cfg.sync, simCommitted, 0)
	}
	for q.Len() > 0 {
		e := heap.Pop(&q).(simEvent)
		now = e.at
		switch e.kind {
		case simPublish:
			r.published++
			queued++
			send()
		case simDeliver:
			pending = append(pending, msg{sent: sent[delivered], arrived: now})
			delivered++
			owed := len(pending) + len(committing)
			if w.arrived(at(now), owed) || len(pending) == 1 {
				evaluate() // the intake kicks the ingester
			}
		case simCommitted:
			for _, m := range committing {
				r.waits = append(r.waits, now+cfg.latency-m.sent)
			}
			push(now+cfg.latency, simAcks, len(committing))
			committing, busy = nil, false
			w.committed(at(now))
			evaluate()
		case simAcks:
			inflight -= e.n
			r.acked += e.n
			send()
		case simTimer:
			if e.n == timerGen {
				evaluate()
			}
		case simRestart:
			// The session survives; the source connects again and learns
			// anew.
			width = e.n
			w.connected()
			send()
		}
		stall()
	}
	r.learned, r.end = w.full, now
	return r
}

// simulate runs the sim command: sim window=W [limit=N] [interval=D]
// [sync=D] [latency=D], with one phase a line: "load rate=R for=D",
// "burst n=N every=D for=D", "idle for=D", "broker window=W".
func simulate(t *testing.T, d *datadriven.TestData) string {
	cfg := simConfig{interval: time.Second, sync: 2 * time.Millisecond, latency: 100 * time.Microsecond, perMsg: 5 * time.Microsecond}
	d.ScanArgs(t, "window", &cfg.window)
	d.MaybeScanArgs(t, "limit", &cfg.limit)
	for _, a := range []struct {
		key string
		v   *time.Duration
	}{{"interval", &cfg.interval}, {"sync", &cfg.sync}, {"latency", &cfg.latency}} {
		if d.HasArg(a.key) {
			var s string
			d.ScanArgs(t, a.key, &s)
			v, err := time.ParseDuration(s)
			if err != nil {
				t.Fatal(err)
			}
			*a.v = v
		}
	}
	var phases []simPhase
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		var p simPhase
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			var err error
			switch k {
			case "for":
				p.dur, err = time.ParseDuration(v)
			case "every":
				p.every, err = time.ParseDuration(v)
			case "rate":
				p.rate, err = strconv.Atoi(v)
			case "n":
				p.n, err = strconv.Atoi(v)
			case "window":
				p.brokerWidth, err = strconv.Atoi(v)
			default:
				t.Fatalf("unknown setting %q in %q", k, line)
			}
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
		}
		phases = append(phases, p)
	}
	return runSim(cfg, phases).String()
}

func (r *simResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d messages in %d commits, %.1f a commit\n", r.acked, len(r.groups), float64(r.acked)/float64(max(1, len(r.groups))))
	sizes := map[int]int{}
	for _, g := range r.groups {
		sizes[g]++
	}
	keys := make([]int, 0, len(sizes))
	for k := range sizes {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b int) int { return sizes[b] - sizes[a] + (a-b)*boolInt(sizes[a] == sizes[b]) })
	var top []string
	for i, k := range keys {
		if i == 4 {
			top = append(top, fmt.Sprintf("%d other sizes", len(keys)-4))
			break
		}
		top = append(top, fmt.Sprintf("%d×%d", sizes[k], k))
	}
	fmt.Fprintf(&b, "groups: %s\n", strings.Join(top, ", "))
	var why []string
	for i, n := range r.reasons {
		if n > 0 {
			why = append(why, fmt.Sprintf("%s %d", dueReason(i), n))
		}
	}
	fmt.Fprintf(&b, "due: %s\n", strings.Join(why, ", "))
	learned := "learned " + known(r.learned)
	if r.learned > 0 && r.learnedAt >= 0 {
		learned += fmt.Sprintf(" at %v", r.learnedAt)
	}
	fmt.Fprintf(&b, "%s; broker stalled %v in all\n", learned, r.stalled)
	slices.Sort(r.waits)
	fmt.Fprintf(&b, "PUBACK p50 %v, p99 %v, max %v\n", pct(r.waits, 50), pct(r.waits, 99), pct(r.waits, 100))
	return b.String()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// pct is the p-th percentile of sorted d, rounded to 0.1 ms.
func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(float64(len(d))*p/100))].Round(100 * time.Microsecond)
}

var (
	windowRuns = flag.Int("window.runs", 20, "TestWindowProperties: random runs (a long run: 2000)")
	windowSeed = flag.Uint64("window.seed", 0, "TestWindowProperties: the seed of its runs (0: the time)")
)

// TestWindowProperties runs the source against random brokers (windows of
// 1 to 2,000), disks (a commit of 0.1 to 20 ms), links and loads, and
// checks what the window promises: every message is committed within the
// sync interval of its arrival, or as soon as the commit before ends; and
// under a steady load the syncs are one per window, or one per interval
// where less than a window arrives in one, with a few more while the
// window is learned.
func TestWindowProperties(t *testing.T) {
	seed := *windowSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (-window.seed=N runs them again)", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for run := range *windowRuns {
		cfg := simConfig{
			window:   1 + rng.IntN(2000),
			interval: time.Duration(100+rng.IntN(1900)) * time.Millisecond,
			sync:     time.Duration(100+rng.IntN(20_000)) * time.Microsecond,
			latency:  time.Duration(10+rng.IntN(2000)) * time.Microsecond,
			perMsg:   time.Duration(1+rng.IntN(20)) * time.Microsecond,
		}
		if rng.IntN(4) == 0 {
			cfg.limit = 1 + rng.IntN(2000)
		}
		rate := 10 + rng.IntN(10_000)
		dur := time.Duration(1+rng.IntN(3)) * time.Second
		phases := []simPhase{{rate: rate, dur: dur}}
		if rng.IntN(2) == 0 { // a pause, and then bursts
			phases = append(phases, simPhase{dur: time.Duration(rng.IntN(3000)) * time.Millisecond},
				simPhase{n: 1 + rng.IntN(500), every: time.Duration(10+rng.IntN(2000)) * time.Millisecond, dur: 2 * time.Second})
		}
		r := runSim(cfg, phases)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("run %d (seed %d), %+v, load %+v: %s\n%s", run, seed, cfg, phases, fmt.Sprintf(format, args...), r)
		}
		if r.acked != r.published {
			fail("%d of %d messages acknowledged", r.acked, r.published)
		}
		for _, h := range r.holds {
			if h > cfg.interval+cfg.sync {
				fail("a message waited %v for its commit, more than the interval and a commit", h)
			}
		}
		// The steady load alone, against a broker that keeps up with it:
		// a group is the window, or what arrives in an interval (a tick's
		// worth of messages more), whichever is smaller.
		steady := runSim(cfg, phases[:1])
		width := cfg.window
		if cfg.limit > 0 {
			width = min(width, cfg.limit)
		}
		perInterval := float64(rate)*cfg.interval.Seconds() + float64(rate)/100
		group := min(float64(width), perInterval)
		want := float64(steady.acked)/group*1.1 + 4
		if float64(len(steady.groups)) > want {
			r = steady
			fail("%d commits for %d messages; want at most %.0f, about one per %.0f messages", len(steady.groups), steady.acked, want, group)
		}
		// Once the window is learned, a full one is committed at once: the
		// broker waits for a commit and the acknowledgements' way, not for
		// a pause, but while it learns.
		perCommit := cfg.sync + 2*cfg.latency + time.Millisecond
		if most := time.Duration(len(steady.groups))*perCommit + 4*(100*time.Millisecond+perCommit); steady.stalled > most {
			r = steady
			fail("the broker waited %v for acknowledgements in all, more than %v", steady.stalled, most)
		}
	}
}

// BenchmarkWindow measures what learning the window costs per message:
// an arrival, and the ingester asking whether a group is due, at a steady
// pace against a window of 100.
func BenchmarkWindow(b *testing.B) {
	w := newWindow(time.Second, 0)
	now, owed := epoch, 0
	var oldest time.Time
	for b.Loop() {
		now = now.Add(200 * time.Microsecond)
		owed++
		if oldest.IsZero() {
			oldest = now
		}
		w.arrived(now, owed)
		if why, _ := w.due(now, owed, oldest); why != notDue || owed == 100 {
			owed, oldest = 0, time.Time{}
		}
	}
}
