// Command cairn-bench measures cairn on this machine: the scenarios of
// package bench, each a table or, with --json, one JSON object per line.
// It is a program of its own, not a command of the gateway's binary: it
// links test helpers (a mosquitto runner, a free-port finder) and the
// scenarios' code, which the agent has no use for.
//
// Usage:
//
//	cairn-bench [--json] [--cairn PATH] [flags] [scenario...]
//	cairn-bench bare-subscriber --broker URL --topic FILTER
//
// cairn-bench -h lists the scenarios and the flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-edge/cairn/bench"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// scenarios are the scenarios, in the order cairn-bench runs them all.
var scenarios = []string{"pipeline", "ingest", "mqtt", "snapshot", "restore", "footprint", "wear", "ingress"}

const usage = `usage: cairn-bench [--json] [--cairn PATH] [flags] [scenario...]

Measures cairn on this machine. Scenarios (all of them when none is
named): %s. Each prints a table, or with --json one JSON object per line.
footprint and wear run the cairn binary (--cairn); wear needs mosquitto
installed, and runs "cairn-bench bare-subscriber --broker URL --topic T",
a bare paho subscriber, beside the agent.

Flags:
`

// run executes the command line args and returns the exit status: 0, 1
// when a scenario failed, 2 on a usage error.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "bare-subscriber" {
		return bareSubscriber(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("cairn-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), usage, strings.Join(scenarios, ", "))
		fs.PrintDefaults()
	}
	asJSON := fs.Bool("json", false, "print one JSON object per scenario")
	dir := fs.String("dir", "", "directory for the scenarios' files (default: a temporary one, removed after)")
	cairn := fs.String("cairn", "", "footprint, wear, ingress: the cairn binary to measure (default: the cairn beside cairn-bench, named as it is without -bench, else cairn on the PATH)")
	var (
		pipe = bench.PipelineConfig{}
		ing  = bench.IngestConfig{}
		mq   = bench.MQTTConfig{}
		snap = bench.SnapshotConfig{}
		rest = bench.RestoreConfig{}
		foot = bench.FootprintConfig{}
		wear = bench.WearConfig{}
		ingr = bench.IngressConfig{}
	)
	fs.IntVar(&pipe.Records, "records", 4_000_000, "pipeline: records per run")
	fs.IntVar(&pipe.Keys, "keys", 10_000, "pipeline: distinct keys")
	fs.DurationVar(&pipe.Interval, "interval", 100*time.Millisecond, "pipeline, mqtt: checkpoint interval")
	fs.IntVar(&ing.Messages, "ingest-messages", 200_000, "ingest: messages appended in groups")
	fs.IntVar(&ing.GroupSize, "group", 1000, "ingest: messages per fsynced group")
	fs.IntVar(&mq.Messages, "mqtt-messages", 20_000, "mqtt: messages per side")
	fs.IntVar(&mq.Rounds, "rounds", 3, "mqtt: rounds per side, alternating")
	fs.StringVar(&mq.Broker, "broker", "", "mqtt, footprint: broker URL, e.g. tcp://127.0.0.1:1883 (default: an embedded broker)")
	fs.IntVar(&snap.Keys, "snapshot-keys", 100_000, "snapshot, restore: keys in the state")
	fs.Float64Var(&snap.Changed, "changed", 0.01, "snapshot: fraction of keys changed before the incremental snapshot")
	fs.IntVar(&foot.IdleCheckpoints, "idle-checkpoints", 60, "footprint: checkpoints (every 100 ms) before the idle figures")
	fs.IntVar(&foot.Keys, "load-keys", 100_000, "footprint: distinct keys of the load")
	fs.IntVar(&foot.Messages, "load-messages", 150_000, "footprint: readings published")
	fs.IntVar(&foot.Rate, "load-rate", 10_000, "footprint: readings per second")
	fs.StringVar(&foot.MemoryLimit, "memory-limit", bench.FootprintMemoryLimit, "footprint: run the load again with this agent.memory_limit (\"\": don't)")
	fs.StringVar(&wear.Baseline, "baseline", "", "wear: another cairn binary to measure the same way first, such as one built from an older commit")
	fs.IntVar(&wear.Devices, "devices", 50, "wear: devices of the reference load, a reading a second each")
	fs.DurationVar(&wear.Duration, "wear-duration", time.Minute, "wear: how long the reference load is measured")
	fs.DurationVar(&wear.IdleDuration, "idle-duration", time.Minute, "wear: how long the idle agent is measured")
	fs.IntVar(&wear.BusyRate, "busy-rate", 5000, "wear: readings a second of the busy load")
	fs.DurationVar(&wear.BusyDuration, "busy-duration", 20*time.Second, "wear: how long the busy load is measured")
	fs.Func("busy-windows", "wear: the in-flight windows (mosquitto's max_inflight_messages) the busy load runs through, one after another, comma-separated (default 20,100,1000)", func(v string) error {
		wear.BusyWindows = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > 65535 {
				return fmt.Errorf("%q is no window of 1 to 65535", f)
			}
			wear.BusyWindows = append(wear.BusyWindows, n)
		}
		return nil
	})
	fs.DurationVar(&ingr.Duration, "ingress-duration", 30*time.Second, "ingress: how long the reference load is measured (its devices: --devices; the busy load: --busy-rate, --busy-duration)")
	fs.IntVar(&wear.Rounds, "wear-rounds", 1, "wear: how many times each load is measured, the baseline's and the cairn's runs alternating; figures are the medians")

	// Scenario names and flags may come in any order.
	var names []string
	for rest := args; ; {
		if code, ok := parse(fs, rest, stdout); !ok {
			return code
		}
		if fs.NArg() == 0 {
			break
		}
		if !slices.Contains(scenarios, fs.Arg(0)) {
			fmt.Fprintf(stderr, "cairn-bench: unknown scenario %q (known: %s)\n", fs.Arg(0), strings.Join(scenarios, ", "))
			return 2
		}
		names, rest = append(names, fs.Arg(0)), fs.Args()[1:]
	}
	if len(names) == 0 {
		names = scenarios
	}

	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "cairn-bench:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	root := *dir
	if root == "" {
		tmp, err := os.MkdirTemp("", "cairn-bench-")
		if err != nil {
			fmt.Fprintln(stderr, "cairn-bench:", err)
			return 1
		}
		defer os.RemoveAll(tmp)
		root = tmp
	}
	code := 0
	for _, name := range names {
		d := filepath.Join(root, name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			fmt.Fprintln(stderr, "cairn-bench:", err)
			return 1
		}
		var r bench.Result
		var err error
		switch name {
		case "pipeline":
			r, err = bench.Pipeline(ctx, pipe)
		case "ingest":
			ing.Dir = d
			r, err = bench.Ingest(ing)
		case "mqtt":
			mq.Dir, mq.Interval = d, pipe.Interval
			r, err = bench.MQTT(ctx, mq)
		case "snapshot":
			snap.Dir = d
			r, err = bench.Snapshot(snap)
		case "restore":
			rest.Dir, rest.Keys = d, snap.Keys
			r, err = bench.Restore(rest)
		case "footprint":
			foot.Dir, foot.Broker = d, mq.Broker
			if foot.Binary, err = findCairn(*cairn, self); err == nil {
				r, err = bench.Footprint(ctx, foot)
			}
		case "wear":
			wear.Dir, wear.BareSubscriber = d, []string{self, "bare-subscriber"}
			if wear.Binary, err = findCairn(*cairn, self); err == nil {
				r, err = bench.Wear(ctx, wear)
			}
		case "ingress":
			ingr.Dir, ingr.Devices, ingr.BusyRate, ingr.BusyDuration = d, wear.Devices, wear.BusyRate, wear.BusyDuration
			if ingr.Binary, err = findCairn(*cairn, self); err == nil {
				r, err = bench.Ingress(ctx, ingr)
			}
		}
		if err == nil {
			err = bench.Print(stdout, r, *asJSON)
		}
		if err != nil {
			fmt.Fprintf(stderr, "cairn-bench %s: %v\n", name, err)
			code = 1
		}
		if ctx.Err() != nil {
			return 1
		}
	}
	return code
}

// parse parses args with fs's flags. Given -h or --help it prints the
// usage to stdout; given a bad flag, the complaint and the usage to fs's
// output. When not ok, cairn-bench exits with code: 0 after -h, 2 after a
// bad flag.
func parse(fs *flag.FlagSet, args []string, stdout io.Writer) (code int, ok bool) {
	stderr := fs.Output()
	fs.SetOutput(io.Discard) // the flag package would print both to one writer
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return 0, false
	case err != nil:
		fs.SetOutput(stderr)
		fmt.Fprintf(stderr, "%s: %v\n\n", fs.Name(), err)
		fs.Usage()
		return 2, false
	}
	fs.SetOutput(stderr)
	return 0, true
}

// findCairn returns the cairn binary that footprint and wear run: path if
// one is given; else the one beside self, this program, named as it is
// without "-bench" (cairn beside cairn-bench, cairn-linux-arm64 beside the
// release's cairn-bench-linux-arm64); else cairn on the PATH.
func findCairn(path, self string) (string, error) {
	if path != "" {
		return path, nil
	}
	beside := filepath.Join(filepath.Dir(self), strings.Replace(filepath.Base(self), "cairn-bench", "cairn", 1))
	if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() && beside != self {
		return beside, nil
	}
	path, err := exec.LookPath("cairn")
	if err != nil {
		return "", errors.New("no cairn beside cairn-bench or on the PATH: name the binary to measure with --cairn PATH")
	}
	return path, nil
}

// bareSubscriber runs a bare paho subscriber until SIGTERM or SIGINT,
// printing how many messages it has received on each SIGUSR1 and at its
// end: the wear scenario measures its CPU time beside the agent's.
func bareSubscriber(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cairn-bench bare-subscriber", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: cairn-bench bare-subscriber --broker URL --topic FILTER\n\na bare paho subscriber that acknowledges what it receives, for cairn-bench wear\n\nFlags:")
		fs.PrintDefaults()
	}
	broker := fs.String("broker", "", "broker URL")
	topic := fs.String("topic", "", "topic filter, subscribed at QoS 1")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if *broker == "" || *topic == "" {
		fmt.Fprintf(stderr, "%s: --broker and --topic are required\n\n", fs.Name())
		fs.Usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	asked := make(chan os.Signal, 1)
	signal.Notify(asked, syscall.SIGUSR1)
	defer signal.Stop(asked)
	if err := bench.BareSubscriber(ctx, *broker, *topic, asked, stdout); err != nil {
		fmt.Fprintln(stderr, "cairn-bench bare-subscriber:", err)
		return 1
	}
	return 0
}
