package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	goruntime "runtime"
	"sync/atomic"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/runtime"
)

// PipelineConfig sizes the pipeline scenario.
type PipelineConfig struct {
	// Records is how many records each of the two runs pushes (rounded
	// down to an even number); default 4,000,000.
	Records int
	// Keys is the number of distinct keys; default 10,000.
	Keys int
	// Interval is the checkpoint interval of the second run; default
	// 100 ms.
	Interval time.Duration
}

// PipelineResult compares the in-process graph with checkpoints off and on,
// run one after the other on the same records.
type PipelineResult struct {
	Records    int     `json:"records"`
	Keys       int     `json:"keys"`
	IntervalMS float64 `json:"checkpoint_interval_ms"`
	// OffRecordsPerSec and OnRecordsPerSec are the throughput without and
	// with checkpoints.
	OffRecordsPerSec float64 `json:"off_records_per_sec"`
	OnRecordsPerSec  float64 `json:"on_records_per_sec"`
	// OffAllocsPerRecord and OnAllocsPerRecord are heap allocations of
	// the whole process divided by the records.
	OffAllocsPerRecord float64 `json:"off_allocs_per_record"`
	OnAllocsPerRecord  float64 `json:"on_allocs_per_record"`
	// Checkpoints completed during the second run.
	Checkpoints int `json:"checkpoints"`
	// CheckpointOverheadRatio is the time with checkpoints over the time
	// without: 1 means checkpoints cost nothing, 1.25 a quarter more.
	CheckpointOverheadRatio float64 `json:"checkpoint_overhead_ratio"`
}

func (*PipelineResult) Scenario() string { return "pipeline" }

func (r *PipelineResult) Rows() []Row {
	return []Row{
		{"records per run", num(float64(r.Records))},
		{"keys", num(float64(r.Keys))},
		{"records/s, checkpoints off", num(r.OffRecordsPerSec)},
		{fmt.Sprintf("records/s, checkpoints every %v", time.Duration(r.IntervalMS*float64(time.Millisecond))), num(r.OnRecordsPerSec)},
		{"allocs/record, off / on", num(r.OffAllocsPerRecord) + " / " + num(r.OnAllocsPerRecord)},
		{"checkpoints completed", num(float64(r.Checkpoints))},
		{"checkpoint overhead (time on / off)", fmt.Sprintf("%.3f", r.CheckpointOverheadRatio)},
	}
}

// Pipeline runs the pipeline of RunPipeline twice, checkpoints off and then
// on, after an unmeasured run.
func Pipeline(ctx context.Context, cfg PipelineConfig) (*PipelineResult, error) {
	if cfg.Records <= 0 {
		cfg.Records = 4_000_000
	}
	if cfg.Keys <= 0 {
		cfg.Keys = 10_000
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 100 * time.Millisecond
	}
	records := KeyedRecords(cfg.Keys)
	res := &PipelineResult{Records: cfg.Records / 2 * 2, Keys: cfg.Keys, IntervalMS: ms(cfg.Interval)}
	// An unmeasured run first, so that neither measured run pays for
	// warming the heap up.
	if _, err := RunPipeline(ctx, records, cfg.Records/4, 0); err != nil {
		return nil, err
	}
	off, err := measureAllocs(func() (PipelineRun, error) { return RunPipeline(ctx, records, cfg.Records, 0) })
	if err != nil {
		return nil, err
	}
	on, err := measureAllocs(func() (PipelineRun, error) { return RunPipeline(ctx, records, cfg.Records, cfg.Interval) })
	if err != nil {
		return nil, err
	}
	res.OffRecordsPerSec, res.OnRecordsPerSec = perSec(res.Records, off.Elapsed), perSec(res.Records, on.Elapsed)
	res.OffAllocsPerRecord = float64(off.allocs) / float64(res.Records)
	res.OnAllocsPerRecord = float64(on.allocs) / float64(res.Records)
	res.Checkpoints = on.Checkpoints
	res.CheckpointOverheadRatio = ratio(float64(on.Elapsed), float64(off.Elapsed))
	return res, nil
}

type allocRun struct {
	PipelineRun
	allocs uint64
}

// measureAllocs runs f and counts the heap allocations meanwhile.
func measureAllocs(f func() (PipelineRun, error)) (allocRun, error) {
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	r, err := f()
	goruntime.ReadMemStats(&after)
	return allocRun{r, after.Mallocs - before.Mallocs}, err
}

// KeyedRecords returns one record for each of keys keys, named
// device-00000 and up, with value 1.
func KeyedRecords(keys int) []graph.Record {
	records := make([]graph.Record, keys)
	for i := range records {
		records[i] = graph.Record{Key: fmt.Sprintf("device-%05d", i), Value: 1, Time: int64(i)}
	}
	return records
}

// PipelineRun is what one run of RunPipeline measured.
type PipelineRun struct {
	// Elapsed runs from the start of the job to its end.
	Elapsed time.Duration
	// Checkpoints completed during the run.
	Checkpoints int
}

// RunPipeline pushes n records (n/2 from each source subtask), cycling
// over records, through source(2) -key-by-> keyed count(2) -forward->
// sink(2) with a checkpoint every interval (0: none) into the runtime's
// in-memory store, and fails unless the sinks saw every record.
func RunPipeline(ctx context.Context, records []graph.Record, n int, interval time.Duration) (PipelineRun, error) {
	if len(records) == 0 {
		return PipelineRun{}, errors.New("no records to cycle over")
	}
	var seen atomic.Int64
	var bld graph.Builder
	src := bld.Source("src", 2, func(int) graph.Source { return CycleSource(records, n/2) })
	cnt := bld.Operator("count", 2, graph.Count(), []graph.Input{graph.In(src, graph.Hash(nil))})
	bld.Operator("sink", 2, func(int) graph.Operator { return &countingSink{seen: &seen} },
		[]graph.Input{graph.In(cnt, graph.Forward())})
	topo, err := bld.Build()
	if err != nil {
		return PipelineRun{}, err
	}
	cfg := checkpoint.DefaultConfig()
	cfg.Interval = interval
	var completed atomic.Int64
	job, err := runtime.New(topo, runtime.Options{Checkpoints: cfg, OnComplete: func(*checkpoint.Manifest) { completed.Add(1) }})
	if err != nil {
		return PipelineRun{}, err
	}
	start := time.Now()
	if err := job.Run(ctx); err != nil {
		return PipelineRun{}, err
	}
	run := PipelineRun{Elapsed: time.Since(start), Checkpoints: int(completed.Load())}
	if got := seen.Load(); got != int64(n/2*2) {
		return run, fmt.Errorf("the sinks saw %d records, want %d", got, n/2*2)
	}
	return run, nil
}

// CycleSource returns a source that emits n records cycling over records
// (math.MaxInt: endlessly), at no cost of its own.
func CycleSource(records []graph.Record, n int) graph.Source {
	return &cycleSource{records: records, n: n}
}

type cycleSource struct {
	records []graph.Record
	n, i    int
}

func (s *cycleSource) Open(*graph.Context, uint64) error { return nil }
func (s *cycleSource) Read(buf []graph.Record) (int, error) {
	if s.i >= s.n {
		return 0, io.EOF
	}
	k := min(len(buf), s.n-s.i)
	for j := range k {
		buf[j] = s.records[(s.i+j)%len(s.records)]
	}
	s.i += k
	return k, nil
}
func (s *cycleSource) Offset() uint64         { return uint64(s.i) }
func (s *cycleSource) Ready() <-chan struct{} { return nil }
func (s *cycleSource) Close() error           { return nil }

// countingSink counts the records that reach it; each subtask counts
// locally and adds its count once, at the end.
type countingSink struct {
	graph.BaseOperator
	n    int64
	seen *atomic.Int64
}

func (s *countingSink) ProcessRecord(int, *graph.Record) error { s.n++; return nil }
func (s *countingSink) Close() error                           { s.seen.Add(s.n); return nil }
