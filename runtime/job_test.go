package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/localrecovery"
)

// latestSink records the last Value seen per key.
type latestSink struct {
	graph.BaseOperator
	mu   sync.Mutex
	last map[string]float64
}

func (s *latestSink) ProcessRecord(_ int, r *graph.Record) error {
	s.mu.Lock()
	s.last[r.Key] = r.Value
	s.mu.Unlock()
	return nil
}

func (s *latestSink) snapshot() map[string]float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]float64, len(s.last))
	for k, v := range s.last {
		out[k] = v
	}
	return out
}

func keyedRecords(n, keys int) []graph.Record {
	recs := make([]graph.Record, n)
	for i := range recs {
		recs[i] = graph.Record{Key: fmt.Sprintf("k%03d", i%keys), Value: 1, Time: int64(i)}
	}
	return recs
}

func expectedCounts(recs []graph.Record) map[string]float64 {
	want := make(map[string]float64)
	for _, r := range recs {
		want[r.Key]++
	}
	return want
}

// countTopology is source(2) -hash-> count(2) -forward-> sink(2), with all
// sink subtasks writing into sink.
func countTopology(t *testing.T, src func(int) graph.Source, sink *latestSink) *graph.Topology {
	t.Helper()
	var b graph.Builder
	s := b.Source("src", 2, src)
	c := b.Operator("count", 2, graph.Count(), []graph.Input{graph.In(s, graph.Hash(nil))})
	b.Operator("sink", 2, func(int) graph.Operator { return sink }, []graph.Input{graph.In(c, graph.Forward())})
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func equalCounts(t *testing.T, got, want map[string]float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d keys, want %d", len(got), len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Fatalf("key %s: count %v, want %v", k, got[k], w)
		}
	}
}

func TestJobCountsEveryRecordOnce(t *testing.T) {
	recs := keyedRecords(50_000, 100)
	sink := &latestSink{last: map[string]float64{}}
	cfg := checkpoint.DefaultConfig()
	cfg.Interval = 5 * time.Millisecond
	job, err := New(countTopology(t, graph.SliceSource(recs), sink), Options{Checkpoints: cfg, BatchSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	equalCounts(t, sink.snapshot(), expectedCounts(recs))
}

// gatedSource reads its slice until it reaches gate, then waits until the
// gate is opened.
type gatedSource struct {
	records      []graph.Record
	next, stride int
	gate         int
	open         chan struct{}
	atGate       chan<- int // receives the subtask's index when it reaches the gate
	waiting      bool
}

func (s *gatedSource) Open(ctx *graph.Context, offset uint64) error {
	s.stride = ctx.Info().Parallelism
	s.next = ctx.Info().Subtask + int(offset)*s.stride
	return nil
}

func (s *gatedSource) Read(buf []graph.Record) (int, error) {
	n := 0
	for n < len(buf) && s.next < len(s.records) {
		if s.next >= s.gate {
			select {
			case <-s.open:
			default:
				if !s.waiting {
					s.waiting = true
					s.atGate <- s.next % s.stride
				}
				return n, nil
			}
		}
		buf[n] = s.records[s.next]
		s.next += s.stride
		n++
	}
	if n == 0 && s.next >= len(s.records) {
		return 0, io.EOF
	}
	return n, nil
}

func (s *gatedSource) Offset() uint64         { return uint64(s.next / s.stride) }
func (s *gatedSource) Ready() <-chan struct{} { return s.open }
func (s *gatedSource) Close() error           { return nil }

// TestJobRestoresFromCheckpoint stops a job after a checkpoint that covers
// part of the input, restarts from it, and checks that the counts equal a
// failure-free run's: state came back and sources resumed at their offsets.
func TestJobRestoresFromCheckpoint(t *testing.T) {
	recs := keyedRecords(20_000, 50)
	store := checkpoint.NewMemStore(3)
	first := &latestSink{last: map[string]float64{}}
	gate := make(chan struct{})
	atGate := make(chan int, 2)
	src := func(int) graph.Source { return &gatedSource{records: recs, gate: 10_000, open: gate, atGate: atGate} }
	cfg := checkpoint.DefaultConfig()
	cfg.Interval = 0
	completed := make(chan *checkpoint.Manifest, 1)
	job, err := New(countTopology(t, src, first), Options{Checkpoints: cfg, Store: store,
		OnComplete: func(m *checkpoint.Manifest) { completed <- m }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- job.Run(ctx) }()
	<-atGate
	<-atGate
	id, err := job.TriggerCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var m *checkpoint.Manifest
	select {
	case m = <-completed:
	case err := <-ran:
		t.Fatalf("job ended before checkpoint %d completed: %v", id, err)
	}
	if m.ID != id {
		t.Fatalf("completed checkpoint %d, triggered %d", m.ID, id)
	}
	st := job.Status()
	var read int64
	for _, ts := range st.Tasks {
		if ts.ID.Operator == "src" {
			read += ts.RecordsOut
		}
	}
	if st.Completed != 1 || st.LastCompleted == nil || st.LastCompleted.ID != id || read != 10_000 || st.RestoredFrom != nil {
		t.Fatalf("status after one checkpoint: %+v (sources read %d)", st, read)
	}
	if len(st.History) != 1 || st.History[0].ID != id || st.History[0].Manifest == nil || st.History[0].Duration <= 0 {
		t.Fatalf("history after one checkpoint: %+v", st.History)
	}
	upstream := map[string]string{"count": "src", "sink": "count"}
	channels := map[string]int{"count": 2, "sink": 1} // hash reads every subtask; forward one
	for _, ts := range st.Tasks {
		want := channels[ts.ID.Operator]
		if len(ts.Upstream) != want || len(ts.Queued) != want {
			t.Fatalf("%s: upstream %v, queued %v; want %d channels", ts.ID, ts.Upstream, ts.Queued, want)
		}
		for _, up := range ts.Upstream {
			if up.Operator != upstream[ts.ID.Operator] {
				t.Fatalf("%s reads from %s, want %s", ts.ID, up, upstream[ts.ID.Operator])
			}
		}
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	var offsets uint64
	for _, a := range m.Subtasks {
		if a.Source {
			offsets += a.Offset
		}
		if a.State.Size == 0 || a.Stats.StateSize != a.State.Size || a.Source != (a.Task.Operator == "src") {
			t.Fatalf("acknowledgement of %s is incomplete: %+v", a.Task, a)
		}
	}
	if m.Subtask(checkpoint.TaskID{Operator: "count", Subtask: 1}) == nil {
		t.Fatal("manifest lacks count/1")
	}
	if offsets != 10_000 {
		t.Fatalf("sources checkpointed %d records read, want the 10000 before the gate", offsets)
	}

	close(gate)
	second := &latestSink{last: map[string]float64{}}
	job, err = New(countTopology(t, src, second), Options{Checkpoints: cfg, Store: store, Restore: localrecovery.Candidates(store, []*checkpoint.Manifest{m})})
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	equalCounts(t, second.snapshot(), expectedCounts(recs))
	if r := job.Status().RestoredFrom; r == nil || r.ID != id {
		t.Fatalf("status says restored from %v, want checkpoint %d", r, id)
	}
	if next, _ := store.LastID(); next != id {
		t.Fatalf("store's last id is %d, want %d", next, id)
	}
}

type failingOp struct {
	graph.BaseOperator
	after int
}

func (f *failingOp) ProcessRecord(_ int, r *graph.Record) error {
	if f.after--; f.after < 0 {
		return errors.New("boom")
	}
	return nil
}

func TestJobFailsWithCause(t *testing.T) {
	var b graph.Builder
	s := b.Source("src", 1, graph.SliceSource(keyedRecords(1000, 10)))
	b.Operator("fragile", 1, func(int) graph.Operator { return &failingOp{after: 10} }, []graph.Input{graph.In(s, graph.Forward())})
	err := runToEnd(t, &b)
	if err == nil || !strings.Contains(err.Error(), "fragile/0: boom") {
		t.Fatalf("Run = %v, want the failing subtask named", err)
	}
}

// TestRejectedRecords checks a record an operator rejects
// (graph.RecordError): handed to Options.OnRejected, which keeps the job
// going, and counted; without a handler, or when it says so, it fails the
// job.
func TestRejectedRecords(t *testing.T) {
	newTopo := func(sink *latestSink) *graph.Topology {
		var b graph.Builder
		s := b.Source("src", 1, graph.SliceSource(keyedRecords(1000, 10)))
		odd := b.Operator("picky", 1, graph.FilterErr(func(r *graph.Record) (bool, error) {
			if r.Time%10 == 3 {
				return false, graph.Reject(fmt.Errorf("record %d is poison", r.Time))
			}
			return true, nil
		}), []graph.Input{graph.In(s, graph.Forward())})
		b.Operator("sink", 1, func(int) graph.Operator { return sink }, []graph.Input{graph.In(odd, graph.Forward())})
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return topo
	}
	sink := &latestSink{last: map[string]float64{}}
	job, rejected := runRejecting(t, newTopo(sink))
	if len(rejected) != 100 || rejected[0] != "picky/0 3: record 3 is poison" {
		t.Fatalf("OnRejected saw %d records, the first %q; want 100, the first of record 3", len(rejected), rejected[0])
	}
	for _, ts := range job.Status().Tasks {
		if want := map[string]int64{"picky": 100}[ts.ID.Operator]; ts.Rejected != want {
			t.Fatalf("%v counted %d rejected records, want %d", ts.ID, ts.Rejected, want)
		}
	}
	// Records 3, 13, 23, ... are key k003's: the others' pass.
	if got := sink.snapshot(); len(got) != 9 || got["k003"] != 0 {
		t.Fatalf("the sink saw the keys %v, want all but k003", got)
	}

	for _, handler := range []func(checkpoint.TaskID, *graph.Record, error) error{
		nil,
		func(_ checkpoint.TaskID, _ *graph.Record, err error) error { return fmt.Errorf("no more: %w", err) },
	} {
		job, err := New(newTopo(&latestSink{last: map[string]float64{}}), Options{Checkpoints: checkpoint.DefaultConfig(), OnRejected: handler})
		if err != nil {
			t.Fatal(err)
		}
		if err := job.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "picky/0: ") || !strings.Contains(err.Error(), "record 3 is poison") {
			t.Fatalf("Run = %v, want the rejection to fail the job", err)
		}
	}
}

// holdingOp holds every tenth record and rejects those it holds at the
// end of input, outside ProcessRecord (graph.Context.Reject).
type holdingOp struct {
	graph.BaseOperator
	ctx  *graph.Context
	held []graph.Record
}

func (h *holdingOp) Open(ctx *graph.Context) error { h.ctx = ctx; return nil }

func (h *holdingOp) ProcessRecord(_ int, r *graph.Record) error {
	if r.Time%10 == 0 {
		h.held = append(h.held, *r)
	}
	return nil
}

func (h *holdingOp) OnWatermark(wm int64) error {
	if wm != graph.MaxWatermark {
		return nil
	}
	for i := range h.held {
		if err := h.ctx.Reject(&h.held[i], fmt.Errorf("held record %d", h.held[i].Time)); err != nil {
			return err
		}
	}
	h.held = nil
	return nil
}

// TestContextReject: a record an operator rejects outside ProcessRecord
// is counted and handed to Options.OnRejected, as one ProcessRecord
// rejects; without a handler it fails the job.
func TestContextReject(t *testing.T) {
	newTopo := func() *graph.Topology {
		var b graph.Builder
		s := b.Source("src", 1, graph.SliceSource(keyedRecords(100, 10)))
		b.Operator("holder", 1, func(int) graph.Operator { return &holdingOp{} }, []graph.Input{graph.In(s, graph.Forward())})
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return topo
	}
	job, rejected := runRejecting(t, newTopo())
	if len(rejected) != 10 || rejected[1] != "holder/0 10: held record 10" {
		t.Fatalf("OnRejected saw %q; want 10 records, the second 10", rejected)
	}
	for _, ts := range job.Status().Tasks {
		if want := map[string]int64{"holder": 10}[ts.ID.Operator]; ts.Rejected != want {
			t.Fatalf("%v counted %d rejected records, want %d", ts.ID, ts.Rejected, want)
		}
	}
	job, err := New(newTopo(), Options{Checkpoints: checkpoint.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "held record 0") {
		t.Fatalf("Run = %v, want the rejection to fail the job without a handler", err)
	}
}

func TestJobKeyedStateWithoutKeyFails(t *testing.T) {
	var b graph.Builder
	s := b.Source("src", 1, graph.SliceSource([]graph.Record{{Value: 1}}))
	b.Operator("count", 1, graph.Count(), []graph.Input{graph.In(s, graph.Forward())})
	if err := runToEnd(t, &b); !errors.Is(err, graph.ErrNoKey) {
		t.Fatalf("Run = %v, want ErrNoKey", err)
	}
}

// TestJobFilterAndBroadcast checks the filter operator and the broadcast
// and rebalance partitioners: every sink subtask of a broadcast edge sees
// every kept record.
func TestJobFilterAndBroadcast(t *testing.T) {
	recs := keyedRecords(1000, 10)
	var mu sync.Mutex
	seen := map[int]int{} // sink subtask → records
	var b graph.Builder
	s := b.Source("src", 2, graph.SliceSource(recs))
	even := b.Operator("even", 2, graph.Filter(func(r *graph.Record) bool { return r.Time%2 == 0 }),
		[]graph.Input{graph.In(s, graph.Rebalance())})
	b.Operator("sink", 3, func(i int) graph.Operator {
		return opFunc{f: func(*graph.Record) { mu.Lock(); seen[i]++; mu.Unlock() }}
	}, []graph.Input{graph.In(even, graph.Broadcast())})
	if err := runToEnd(t, &b); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if seen[i] != 500 {
			t.Fatalf("sink subtask %d saw %d records, want all 500 even ones", i, seen[i])
		}
	}
}

// opFunc is an operator made of a function.
type opFunc struct {
	graph.BaseOperator
	f func(*graph.Record)
}

func (o opFunc) ProcessRecord(_ int, r *graph.Record) error { o.f(r); return nil }

// runToEnd builds b's topology and runs it with default checkpointing until
// its input ends.
func runToEnd(t *testing.T, b *graph.Builder) error {
	t.Helper()
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	job, err := New(topo, Options{Checkpoints: checkpoint.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	return job.Run(context.Background())
}

// checkpointAtGate runs topology newTopo until its gated sources wait, takes
// a checkpoint, and returns it with its store.
func checkpointAtGate(t *testing.T, newTopo func(src func(int) graph.Source) *graph.Topology) (*checkpoint.Manifest, *checkpoint.MemStore) {
	t.Helper()
	recs := keyedRecords(2_000, 20)
	atGate := make(chan int, 2)
	src := func(int) graph.Source {
		return &gatedSource{records: recs, gate: 1_000, open: make(chan struct{}), atGate: atGate}
	}
	store := checkpoint.NewMemStore(3)
	cfg := checkpoint.DefaultConfig()
	cfg.Interval = 0
	completed := make(chan *checkpoint.Manifest, 1)
	job, err := New(newTopo(src), Options{Checkpoints: cfg, Store: store, OnComplete: func(m *checkpoint.Manifest) { completed <- m }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- job.Run(ctx) }()
	<-atGate
	<-atGate
	if _, err := job.TriggerCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	m := <-completed
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	return m, store
}

func TestRestoreRefusesChangedMaxParallelism(t *testing.T) {
	topo := func(maxPar int) func(func(int) graph.Source) *graph.Topology {
		return func(src func(int) graph.Source) *graph.Topology {
			var b graph.Builder
			s := b.Source("src", 2, src)
			b.Operator("count", 2, graph.Count(), []graph.Input{graph.In(s, graph.Hash(nil))}, graph.WithMaxParallelism(maxPar))
			tp, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			return tp
		}
	}
	m, store := checkpointAtGate(t, topo(128))
	restoreRefused(t, topo(64), store, m, "max parallelism changed from 128 to 64")
}

// restoreRefused restores m into newTopo's topology and expects Run to
// refuse with an error containing want.
func restoreRefused(t *testing.T, newTopo func(func(int) graph.Source) *graph.Topology, store checkpoint.Store, m *checkpoint.Manifest, want string) {
	t.Helper()
	job, err := New(newTopo(graph.SliceSource(nil)), Options{Checkpoints: checkpoint.DefaultConfig(), Store: store, Restore: localrecovery.Candidates(store, []*checkpoint.Manifest{m})})
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Run(context.Background()); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Run = %v, want a refusal containing %q", err, want)
	}
}

// stateful keeps non-keyed operator state.
type stateful struct{ graph.BaseOperator }

func (stateful) ProcessRecord(int, *graph.Record) error { return nil }
func (stateful) SnapshotState(uint64) ([]byte, error)   { return []byte("pending output"), nil }

func TestRestoreRefusesRescalingOperatorState(t *testing.T) {
	topo := func(par int) func(func(int) graph.Source) *graph.Topology {
		return func(src func(int) graph.Source) *graph.Topology {
			var b graph.Builder
			s := b.Source("src", 2, src)
			b.Operator("sink", par, func(int) graph.Operator { return stateful{} }, []graph.Input{graph.In(s, graph.Rebalance())})
			tp, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			return tp
		}
	}
	m, store := checkpointAtGate(t, topo(3))
	restoreRefused(t, topo(2), store, m, "operator state (not keyed) cannot be redistributed")
}

// listState keeps non-keyed state that can be split among subtasks: each
// subtask's state is its index; a restore records what it was handed.
type listState struct {
	graph.BaseOperator
	index int
	got   *[][]string // per subtask
}

func (s *listState) ProcessRecord(int, *graph.Record) error { return nil }
func (s *listState) SnapshotState(uint64) ([]byte, error) {
	return []byte(fmt.Sprint("from ", s.index)), nil
}
func (s *listState) RestoreStates(states [][]byte) error {
	for _, st := range states {
		(*s.got)[s.index] = append((*s.got)[s.index], string(st))
	}
	return nil
}

func TestRestoreRedistributesRescalableState(t *testing.T) {
	got := make([][]string, 3)
	topo := func(par int) func(func(int) graph.Source) *graph.Topology {
		return func(src func(int) graph.Source) *graph.Topology {
			var b graph.Builder
			s := b.Source("src", 2, src)
			b.Operator("sink", par, func(i int) graph.Operator { return &listState{index: i, got: &got} },
				[]graph.Input{graph.In(s, graph.Rebalance())})
			tp, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			return tp
		}
	}
	m, store := checkpointAtGate(t, topo(3))
	job, err := New(topo(2)(graph.SliceSource(nil)), Options{Checkpoints: checkpoint.DefaultConfig(), Store: store, Restore: localrecovery.Candidates(store, []*checkpoint.Manifest{m})})
	if err != nil {
		t.Fatal(err)
	}
	got = make([][]string, 3)
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"from 0", "from 2"}, {"from 1"}, nil}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("3 → 2 subtasks handed %q, want %q", got, want)
	}
}

// runRejecting runs topo to its end with a handler of rejected records
// that notes each ("operator/subtask time: error") and lets the job go
// on; the job must end without an error.
func runRejecting(t *testing.T, topo *graph.Topology) (*Job, []string) {
	t.Helper()
	var rejected []string
	job, err := New(topo, Options{Checkpoints: checkpoint.DefaultConfig(),
		OnRejected: func(id checkpoint.TaskID, r *graph.Record, err error) error {
			rejected = append(rejected, fmt.Sprintf("%s/%d %d: %v", id.Operator, id.Subtask, r.Time, err))
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Run(context.Background()); err != nil {
		t.Fatalf("Run = %v, want the rejected records handled", err)
	}
	return job, rejected
}
