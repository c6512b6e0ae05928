package localrecovery_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/localrecovery"
	"github.com/cairn-edge/cairn/runtime"
)

// The crash tests run this package's test binary as a helper process: with
// CAIRN_HELPER set, TestMain runs a pipeline instead of the tests. The
// helper is killed with SIGKILL from outside, or kills itself at a named
// failpoint of the store, and is started again on the same data directory.

const helperEnv = "CAIRN_HELPER"

func TestMain(m *testing.M) {
	if path := os.Getenv(storeEnv); path != "" {
		if err := runWriter(path); err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if dir := os.Getenv(helperEnv); dir != "" {
		if err := runHelper(dir); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helperInput is the helper's deterministic input: n records over keys.
func helperInput(n, keys int) []graph.Record {
	recs := make([]graph.Record, n)
	for i := range recs {
		recs[i] = graph.Record{Key: "k" + strconv.Itoa(i*7919%keys), Value: float64(i%97 + 1), Time: int64(i)}
	}
	return recs
}

// referenceSums is what a failure-free run computes: the sum per key.
func referenceSums(recs []graph.Record) map[string]float64 {
	out := make(map[string]float64)
	for _, r := range recs {
		out[r.Key] += r.Value
	}
	return out
}

// pacedSource reads a slice at a steady rate of perTick records a
// millisecond, so that a run lasts long enough to be killed in the middle;
// its offset is the index reached.
type pacedSource struct {
	records      []graph.Record
	next, stride int
	perTick      int
	start        time.Time
	read         int           // records read since start
	ready        chan struct{} // a wake-up every millisecond
	stop         chan struct{}
}

func (s *pacedSource) Open(ctx *graph.Context, offset uint64) error {
	s.stride = ctx.Info().Parallelism
	s.next = ctx.Info().Subtask + int(offset)*s.stride
	s.start = time.Now()
	s.ready, s.stop = make(chan struct{}, 1), make(chan struct{})
	go func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				select {
				case s.ready <- struct{}{}:
				default:
				}
			case <-s.stop:
				return
			}
		}
	}()
	return nil
}

func (s *pacedSource) Read(buf []graph.Record) (int, error) {
	if s.next >= len(s.records) {
		return 0, io.EOF
	}
	allowed := int(time.Since(s.start)/time.Millisecond)*s.perTick - s.read
	n := 0
	for n < min(len(buf), allowed) && s.next < len(s.records) {
		buf[n] = s.records[s.next]
		s.next += s.stride
		n++
	}
	s.read += n
	return n, nil
}

func (s *pacedSource) Offset() uint64         { return uint64(s.next / s.stride) }
func (s *pacedSource) Ready() <-chan struct{} { return s.ready }
func (s *pacedSource) Close() error           { close(s.stop); return nil }

// sumAtEnd sums values per key and emits each key's sum when the input
// ends: a timer at the end of event time, checkpointed like the sums.
type sumAtEnd struct {
	graph.BaseOperator
	ctx  *graph.Context
	sum  *graph.ValueState[float64]
	spin int // busy-loop iterations per record: a costly operator
	spun int // keeps the busy loop from being optimised away
}

func (o *sumAtEnd) Open(ctx *graph.Context) (err error) {
	o.ctx = ctx
	o.sum, err = graph.NewValueState(ctx, "sum", graph.Float64Codec{})
	return err
}

func (o *sumAtEnd) ProcessRecord(_ int, r *graph.Record) error {
	for i := range o.spin {
		o.spun += i
	}
	s, _ := o.sum.Get()
	o.sum.Set(s + r.Value)
	o.ctx.RegisterEventTimer(math.MaxInt64)
	return nil
}

func (o *sumAtEnd) OnTimer(int64) error {
	s, _ := o.sum.Get()
	o.ctx.Emit(&graph.Record{Key: o.ctx.CurrentKey(), Value: s})
	return nil
}

// resultSink collects the final sums of all its subtasks.
type resultSink struct {
	graph.BaseOperator
	mu   *sync.Mutex
	sums map[string]float64
}

func (s resultSink) ProcessRecord(_ int, r *graph.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sums[r.Key] = r.Value
	return nil
}

// helperTopology is source(2) -key-by-> sumAtEnd(2) -> sink(1).
// With spin, the sums cost that many busy-loop iterations a record, so
// records queue in front of them.
func helperTopology(recs []graph.Record, perTick, spin int, sink resultSink) (*graph.Topology, error) {
	var b graph.Builder
	src := b.Source("src", 2, func(int) graph.Source { return &pacedSource{records: recs, perTick: perTick} })
	sums := b.Operator("sums", 2, func(int) graph.Operator { return &sumAtEnd{spin: spin} }, []graph.Input{graph.In(src, graph.Hash(nil))})
	b.Operator("sink", 1, func(int) graph.Operator { return sink }, []graph.Input{graph.In(sums, graph.Rebalance())})
	return b.Build()
}

// runHelper runs the pipeline in dir until its input ends, restoring the
// newest intact checkpoint, and writes the final sums to dir/result; with
// CAIRN_MODE=first-record, it runs runFirstRecord instead. The
// environment chooses the run: CAIRN_RECORDS, CAIRN_KEYS, CAIRN_PER_TICK,
// CAIRN_SPIN, CAIRN_INCREMENTAL, CAIRN_CHECKPOINT_MODE, and CAIRN_FAILPOINT=name:n (SIGKILL itself at the n-th
// time the store passes failpoint name).
func runHelper(dir string) error {
	if os.Getenv("CAIRN_MODE") == "first-record" {
		return runFirstRecord(dir)
	}
	n, _ := strconv.Atoi(os.Getenv("CAIRN_RECORDS"))
	keys, _ := strconv.Atoi(os.Getenv("CAIRN_KEYS"))
	perTick, _ := strconv.Atoi(os.Getenv("CAIRN_PER_TICK"))
	spin, _ := strconv.Atoi(os.Getenv("CAIRN_SPIN"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	opts := localrecovery.Options{Logger: logger}
	if fp := os.Getenv("CAIRN_FAILPOINT"); fp != "" {
		name, count, _ := strings.Cut(fp, ":")
		left, _ := strconv.Atoi(count)
		var mu sync.Mutex
		opts.Failpoint = func(at string) {
			mu.Lock()
			defer mu.Unlock()
			if at == name {
				if left--; left == 0 {
					syscall.Kill(os.Getpid(), syscall.SIGKILL)
				}
			}
		}
	}
	store, err := localrecovery.Open(filepath.Join(dir, "checkpoints.db"), opts)
	if err != nil {
		return err
	}
	defer store.Close()
	restore, err := store.Completed()
	if err != nil {
		return err
	}
	sink := resultSink{mu: new(sync.Mutex), sums: make(map[string]float64)}
	topo, err := helperTopology(helperInput(n, keys), perTick, spin, sink)
	if err != nil {
		return err
	}
	cfg := checkpoint.DefaultConfig()
	cfg.Interval = 10 * time.Millisecond
	cfg.TolerableFailures = -1
	if m := os.Getenv("CAIRN_CHECKPOINT_MODE"); m != "" {
		if cfg.Mode, err = checkpoint.ParseMode(m); err != nil {
			return err
		}
	}
	job, err := runtime.New(topo, runtime.Options{Checkpoints: cfg, Store: store, Restore: localrecovery.Candidates(store, restore), Logger: logger,
		Incremental: os.Getenv("CAIRN_INCREMENTAL") != "", MaxChain: 4})
	if err != nil {
		return err
	}
	if err := job.Run(context.Background()); err != nil {
		return err
	}
	return writeResult(filepath.Join(dir, "result"), sink.sums)
}

func writeResult(path string, sums map[string]float64) error {
	keys := make([]string, 0, len(sums))
	for k := range sums {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %v\n", k, sums[k])
	}
	if err := os.WriteFile(path+".tmp", []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

func readResult(path string) (map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := make(map[string]float64)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, err
		}
		out[k] = x
	}
	return out, sc.Err()
}
