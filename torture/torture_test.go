//go:build torture

// Package torture is the crash-torture harness: a test, behind the build
// tag torture, that proves the agent's delivery guarantees under fire. The
// package is test-only: without the tag it has no files, so `go test ./...`
// and the layout test do not see it.
//
// It builds the real cairn binary, starts a real mosquitto (persistent
// sessions, raised queue limits), and runs three pipelines — a keyed count,
// a union of two skewed inputs, a windowed join of two skewed inputs — in
// each checkpointing mode (exactly-once, at-least-once, unaligned). While a
// publisher sends sequenced QoS 1 messages, the agent is killed with SIGKILL
// at seeded random moments and restarted in place, and the broker is
// restarted now and then. Every restart first runs bbolt's consistency
// check on the store's file (a kill never leaves it damaged). Once a run,
// between kills, the checkpoint store is deleted, if it lists a
// checkpoint: the next start must refuse, naming the ids taken, and the
// store is put back; once a run of a pipeline whose output ids survive a
// fallback (and in at-least-once mode), a bit of the store's newest
// checkpoint is flipped, if it lists an older one, and the agent falls
// back to that and replays from there. A persistent QoS 1 consumer of the sink topics
// drops repeated message ids and counts, per pipeline and mode, the outputs
// that are lost, duplicated (the same result under another id, or input
// counted twice), out of order, or wrong. Exactly-once and unaligned must
// show none of them; at-least-once must lose nothing and reports the
// duplicates it saw. The last incarnation of every run must stop cleanly on
// SIGTERM. Every wait is for a condition with a deadline; only the fault
// schedule sleeps.
//
//	go test -tags torture ./torture -run Torture -v -torture.kills=36   # as in CI
//	go test -tags torture ./torture -run Torture -v -torture.kills=270 -timeout 1h
//	go test -tags torture ./torture -run Torture -v -torture.seed=N     # replay a schedule
//
// -torture.kills is the total over all runs. A mode is one entry of the
// modes table, a pipeline one entry of the pipelines table.
package torture

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/boltcheck"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

var (
	totalKills = flag.Int("torture.kills", 36, "SIGKILLs of the agent, in total over all runs")
	seedFlag   = flag.Uint64("torture.seed", 0, "seed of the fault schedule (0: from the clock)")
)

// mode is a checkpointing mode under torture and what it promises beyond
// losing nothing, which every mode promises.
type mode struct {
	name        string // checkpoints.mode in the pipeline file
	exactlyOnce bool   // no duplicates and no reordering either
}

var modes = []mode{
	{name: "exactly-once", exactlyOnce: true},
	{name: "at-least-once"},
	{name: "unaligned", exactlyOnce: true},
}

// row is a run's line in the summary.
type row struct {
	pipeline, mode string
	kills          int // SIGKILLs
	early          int // of which before the control socket said running
	cuts           int // stores damaged in their newest checkpoint between kills
	checked        int // restarts on a file that bbolt's check found whole
	refusals       int // starts refused on a deleted store
	restarts       int // broker restarts
	in             int // messages published and acknowledged by the broker
	repeats        int // copies of a message id, dropped by the consumer
	tally
	ran     bool // the run started (-run may leave it out)
	stopped bool // the final incarnation stopped cleanly on SIGTERM
	done    bool // the run got to its final check
}

// TestMain builds the binary the runs start once (cairntest.Build), and
// removes it after.
func TestMain(m *testing.M) { os.Exit(cairntest.Main(m)) }

// TestTorture runs every pipeline in every mode under SIGKILLs of the
// agent and broker restarts, then checks the sink's output exactly.
func TestTorture(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay the schedule with -torture.seed=%d)", seed, seed)
	bin := cairntest.Build(t, "cairn")
	runs := len(pipelines) * len(modes)
	var rows []*row
	for _, p := range pipelines {
		for _, m := range modes {
			i := len(rows)
			kills := *totalKills / runs
			if i < *totalKills%runs {
				kills++
			}
			r := &row{pipeline: p.name, mode: m.name}
			rows = append(rows, r)
			t.Run(p.name+"/"+m.name, func(t *testing.T) { torture(t, bin, p, m, kills, seed, uint64(i), r) })
		}
	}
	printSummary(rows)
}

const configHead = `agent:
  data_dir: %s
brokers:
  mq:
    url: %s
    client_id: torture
checkpoints:
  interval: 100ms
  mode: %s
  incremental: true
`

// torture runs pipeline p in mode m with the given number of kills, on the
// fault schedule of seed's stream run, and fills r.
func torture(t *testing.T, bin string, p pipeline, m mode, kills int, seed, run uint64, r *row) {
	rng := rand.New(rand.NewPCG(seed, run))
	r.ran = true
	dir, err := os.MkdirTemp("", "torture-") // short: the control socket's path is limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the agent's log, data directory and the broker's log are kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	brokerLog, err := os.Create(filepath.Join(dir, "mosquitto.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { brokerLog.Close() })
	b := mosquittotest.Start(t, dir, brokerLog)
	for _, s := range p.sources {
		if err := presubscribe(b.URL, "torture-"+s+"-0", "in/"+s+"/+"); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := startConsumer(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cons.close)
	dataDir := filepath.Join(dir, "data")
	socket := filepath.Join(dataDir, "cairn.sock")
	running := func(st api.Status) bool { return st.State == "running" }
	config := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(configHead, dataDir, b.URL, m.name)+p.body), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "agent.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\nthe agent's log ends:\n%s", fmt.Sprintf(format, args...), tail(logPath, 40))
	}

	pub := &publisher{url: b.URL, rate: p.rate, message: p.message, broker: b,
		restart: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go pub.run()
	defer func() {
		select {
		case <-pub.stop:
		default:
			close(pub.stop)
		}
		<-pub.done
	}()

	// The fault schedule: each incarnation is killed at a random moment,
	// some while starting or restoring, the others after the control
	// socket said running; some incarnations see a broker restart.
	restartsAsked := 0
	damaged := false // the store was damaged on purpose: not checked
	began := time.Now()
	for r.kills < kills {
		switch {
		case kills >= 3 && r.kills == kills/3 && (p.stableIDs || !m.exactlyOnce):
			cut, err := damageStore(bin, dataDir)
			if err != nil {
				fail("damaging the store: %v", err)
			}
			if cut {
				r.cuts++
				damaged = true
			}
		case kills >= 3 && r.kills == 2*kills/3:
			refused, err := refusedWithoutStore(bin, config, dataDir, log)
			if err != nil {
				fail("starting without the store: %v", err)
			}
			if refused {
				r.refusals++
			}
		}
		if !damaged {
			// Every restart opens a store that a kill left whole.
			if err := boltcheck.Check(filepath.Join(dataDir, "checkpoints.db")); err != nil {
				fail("after incarnation %d was killed: %v", r.kills, err)
			}
			r.checked++
		}
		damaged = false
		fmt.Fprintf(log, "=== torture: incarnation %d\n", r.kills+1)
		a := cairntest.Start(t, log, bin, "run", "-c", config)
		if rng.IntN(3) == 0 || restartsAsked == 0 && r.kills == kills-1 {
			select {
			case pub.restart <- struct{}{}:
				restartsAsked++
			case <-pub.done:
			}
		}
		var delay time.Duration
		if rng.IntN(5) == 0 {
			delay = time.Duration(rng.IntN(400)) * time.Millisecond
			r.early++
		} else {
			cairntest.AwaitStatus(t, socket, fmt.Sprintf("incarnation %d to run (its log: %s)", r.kills+1, logPath), 30*time.Second, running)
			delay = time.Duration(20+rng.IntN(1500)) * time.Millisecond
		}
		select {
		case <-time.After(delay): // the fault schedule, not a synchronisation
		case <-a.Ended():
		}
		if err := a.Kill(); err != nil {
			fail("incarnation %d: %v", r.kills+1, err)
		}
		r.kills++
	}
	close(pub.stop)
	<-pub.done
	r.in, r.restarts = pub.published, pub.restarts
	if pub.err != nil {
		fail("publisher: %v", pub.err)
	}
	published := make([]message, pub.published)
	for i := range published {
		published[i] = p.message(i)
	}

	// The last incarnation runs until the consumer has every expected
	// output, then stops with SIGTERM; a fence message published after
	// its exit shows when the consumer has seen all it ever published.
	fmt.Fprintf(log, "=== torture: final incarnation\n")
	a := cairntest.Start(t, log, bin, "run", "-c", config)
	cairntest.AwaitStatus(t, socket, "the final incarnation to run (its log: "+logPath+")", 60*time.Second, running)
	faults := time.Since(began)
	const drain = 2 * time.Minute
	began = time.Now()
	if !testwait.Poll(drain, func() bool {
		outs, _, _ := cons.snapshot()
		if p.check(published, outs).lost == 0 {
			return true
		}
		select {
		case <-a.Ended():
			fail("the final incarnation ended on its own: %v", a.Wait())
		default:
		}
		return false
	}) {
		t.Errorf("the consumer lacks outputs %v after the final start", drain)
	}
	drained := time.Since(began)
	if err := a.Stop(30 * time.Second); err != nil {
		// Not fatal: the agent is gone either way, and the outputs
		// still tell whether anything was lost.
		t.Errorf("stopping the final incarnation with SIGTERM: %v\nthe agent's log ends:\n%s", err, tail(logPath, 40))
	} else {
		r.stopped = true
	}
	if err := publishFence(b.URL); err != nil {
		t.Fatal(err)
	}
	testwait.Recv(t, cons.fence, 30*time.Second, "the consumer to get the fence")

	outs, repeats, garbled := cons.snapshot()
	r.tally, r.repeats, r.done = p.check(published, outs), repeats, true
	t.Logf("%d kills (%d while starting or restoring), %d restarts on a store bbolt's check found whole, %d stores damaged, %d starts refused without the store and %d broker restarts in %v, final outputs %v later; %d messages in, %d outputs (%d repeated ids dropped): %d lost, %d duplicated, %d out of order, %d wrong",
		r.kills, r.early, r.checked, r.cuts, r.refusals, r.restarts, faults.Round(time.Millisecond), drained.Round(time.Millisecond), r.in, r.outputs, r.repeats, r.lost, r.duplicated, r.outOfOrder, r.wrong)
	var broken []string
	if len(garbled) > 0 {
		broken = append(broken, fmt.Sprintf("%d messages on the sink topics are not sink output or reuse an id for another output, first %s", len(garbled), garbled[0]))
	}
	if r.lost > 0 || r.wrong > 0 {
		broken = append(broken, fmt.Sprintf("%d lost and %d wrong outputs", r.lost, r.wrong))
	}
	if m.exactlyOnce && (r.duplicated > 0 || r.outOfOrder > 0) {
		broken = append(broken, fmt.Sprintf("%d duplicated and %d out-of-order outputs in %s mode", r.duplicated, r.outOfOrder, m.name))
	}
	if len(broken) > 0 {
		t.Errorf("%s; seed %d\nfirst problems:\n  %s\nthe agent's log ends:\n%s", strings.Join(broken, "; "), seed,
			strings.Join(r.examples, "\n  "), tail(logPath, 40))
	} else if len(r.examples) > 0 {
		t.Logf("tolerated in %s mode:\n  %s", m.name, strings.Join(r.examples, "\n  "))
	}
	if r.in == 0 || r.outputs == 0 {
		t.Errorf("nothing went through: %d messages in, %d outputs", r.in, r.outputs)
	}
}

// listsCheckpoints reports how many checkpoints `cairn checkpoints` lists
// in the stopped agent's store (every incarnation so far may have been
// killed before its first checkpoint).
func listsCheckpoints(bin, dataDir string) int {
	out, err := exec.Command(bin, "checkpoints", "--data-dir", dataDir).Output()
	if err != nil {
		return 0
	}
	return max(0, strings.Count(string(out), "\n")-1) // less the header
}

// damageStore flips a bit in the newest checkpoint of the stopped agent's
// checkpoint store (a chunk of its state or its completion record, which
// then fails its checksum), if an older one is left to fall back to; else
// it leaves the file as it was and reports no damage.
func damageStore(bin, dataDir string) (damaged bool, err error) {
	if listsCheckpoints(bin, dataDir) < 2 {
		return false, nil
	}
	return true, boltcheck.FlipNewest(filepath.Join(dataDir, "checkpoints.db"))
}

// refusedWithoutStore sets the stopped agent's checkpoint store aside, if
// it lists a checkpoint, and starts it: it must exit 1 saying that
// checkpoints were taken and their state is lost. The store is then put
// back. Without a checkpoint there is nothing to lose, and no start.
func refusedWithoutStore(bin, config, dataDir string, log *os.File) (refused bool, err error) {
	if listsCheckpoints(bin, dataDir) == 0 {
		return false, nil
	}
	store := filepath.Join(dataDir, "checkpoints.db")
	aside := store + ".aside"
	if err := os.Rename(store, aside); err != nil {
		return false, err
	}
	fmt.Fprintf(log, "=== torture: start without the checkpoint store\n")
	var said bytes.Buffer
	cmd := exec.Command(bin, "run", "-c", config)
	cmd.Stdout, cmd.Stderr = io.MultiWriter(log, &said), io.MultiWriter(log, &said)
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(said.String(), "were taken on this data directory") {
		return false, fmt.Errorf("want exit status 1 naming the ids taken; got %v:\n%s", err, said.String())
	}
	if err := os.Remove(store); err != nil && !errors.Is(err, os.ErrNotExist) { // what the refused start created
		return false, err
	}
	return true, os.Rename(aside, store)
}

func publishFence(url string) error {
	c, err := connect(url, "torture-fence", true, nil)
	if err != nil {
		return err
	}
	defer c.Disconnect(100)
	if tok := c.Publish(fenceTopic, 1, false, "fence"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return fmt.Errorf("publishing the fence: %v", tok.Error())
	}
	return nil
}

// tail returns the last n lines of the agent's log at path, leaving out
// the routine ones of completed checkpoints.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := slices.DeleteFunc(bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n")), func(l []byte) bool {
		return bytes.Contains(l, []byte(`msg="checkpoint complete"`))
	})
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

func printSummary(rows []*row) {
	var total row
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "pipeline\tmode\tkills\tstores damaged\tstarts refused\tbroker restarts\tmessages in\toutputs\trepeated ids\tlost\tduplicated\tout-of-order\twrong\tSIGTERM stop\t")
	line := func(r *row, pipeline, mode, stop string) {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", pipeline, mode, r.kills, r.cuts, r.refusals, r.restarts, r.in,
			r.outputs, r.repeats, r.lost, r.duplicated, r.outOfOrder, r.wrong, stop)
	}
	for _, r := range rows {
		if !r.ran {
			continue
		}
		m := r.mode
		if !r.done {
			m += " (aborted)"
		}
		stop := "clean"
		switch {
		case !r.done:
			stop = "-"
		case !r.stopped:
			stop = "FAILED"
		}
		line(r, r.pipeline, m, stop)
		total.kills += r.kills
		total.cuts += r.cuts
		total.refusals += r.refusals
		total.restarts += r.restarts
		total.in += r.in
		total.outputs += r.outputs
		total.repeats += r.repeats
		total.lost += r.lost
		total.duplicated += r.duplicated
		total.outOfOrder += r.outOfOrder
		total.wrong += r.wrong
	}
	line(&total, "total", "", "")
	w.Flush()
}
