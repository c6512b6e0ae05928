package remote_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/bench"
	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/internal/testing/s3test"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
	"github.com/cairn-edge/cairn/localrecovery"
	"github.com/cairn-edge/cairn/remote"
	"github.com/cairn-edge/cairn/runtime"
)

const bucket = "cairn"

func benchRemote(b *testing.B, srv *s3test.Server) *remote.Remote {
	r, err := remote.Open(remote.Config{Endpoint: srv.Endpoint, Bucket: bucket, AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkUpload measures the upload of whole checkpoints of four 4 MiB
// blobs to a local versitygw, retention included: one op is one
// checkpoint, MB/s is the upload throughput and cpu-ms/MB this process's
// CPU time per MB sent (the server's is not counted).
func BenchmarkUpload(b *testing.B) {
	srv := s3test.Start(b)
	srv.Bucket(b, bucket)
	local := checkpoint.NewMemStore(2)
	u, err := remote.NewUploader(benchRemote(b, srv), local, remote.UploadOptions{Device: "bench", Retain: 2, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer u.Close(context.Background())
	const blob = 4 << 20
	data := make([]byte, blob)
	for i := range data {
		data[i] = byte(i * 7)
	}
	b.SetBytes(4 * blob)
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := range b.N {
		id := uint64(i + 1)
		m := &checkpoint.Manifest{ID: id}
		for s := range 4 {
			data[0] = byte(i) // every blob differs from the last
			task := checkpoint.TaskID{Operator: "op", Subtask: s}
			h, err := local.PutState(id, task, slices.Values([][]byte{data}))
			if err != nil {
				b.Fatal(err)
			}
			m.Subtasks = append(m.Subtasks, checkpoint.Ack{Task: task, ID: id, State: h})
		}
		if err := local.Complete(m); err != nil {
			b.Fatal(err)
		}
		u.Upload(m)
		if !testwait.PollEvery(time.Minute, time.Millisecond, func() bool {
			s := u.State(id)
			if s.Status != remote.Uploaded && s.Status != remote.Pending {
				b.Fatalf("checkpoint %d: %+v", id, s)
			}
			return s.Status == remote.Uploaded
		}) {
			b.Fatalf("checkpoint %d not uploaded in a minute", id)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/(float64(b.N)*4*blob/1e6), "cpu-ms/MB")
}

// BenchmarkUploadEffect measures what uploading does to processing:
// source(2) -key-by-> keyed sum(2) over 100,000 keys, checkpoints every
// 100 ms (CAIRN_BENCH_INTERVAL sets another interval) into a real bbolt
// store, with remote upload off and on, in nine alternating pairs of rounds
// of b.N records each. It reports the median records/s of each, the median
// of each pair's slowdown (target: at most 5%) and of its extra CPU time
// per record (this process's, which the uploader's work is part of), the
// MB/s of checkpoints uploaded, and how much of a core the S3 server used
// meanwhile. The server runs at the lowest priority, so that it takes only
// CPU time the pipeline leaves, as a server on another machine would; it
// still shares the caches and memory bandwidth of this one.
func BenchmarkUploadEffect(b *testing.B) {
	srv := s3test.StartBackground(b)
	srv.Bucket(b, bucket)
	r := benchRemote(b, srv)
	records := make([]graph.Record, 100_000)
	for i := range records {
		records[i] = graph.Record{Key: fmt.Sprintf("device-%06d", i), Value: float64(i % 10)}
	}
	quiet := slog.New(slog.DiscardHandler)
	interval, rounds := 100*time.Millisecond, 9
	if v := os.Getenv("CAIRN_BENCH_INTERVAL"); v != "" {
		interval, _ = time.ParseDuration(v)
	}
	round := func(n int, upload bool) (rate, cpuPerRecord, uploadMBps, serverCPU float64) {
		var bld graph.Builder
		src := bld.Source("src", 2, func(int) graph.Source { return bench.CycleSource(records, n/2) })
		bld.Operator("sum", 2, graph.Sum(), []graph.Input{graph.In(src, graph.Hash(nil))})
		topo, err := bld.Build()
		if err != nil {
			b.Fatal(err)
		}
		store, err := localrecovery.Open(filepath.Join(b.TempDir(), "checkpoints.db"), localrecovery.Options{Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		defer store.Close()
		var u *remote.Uploader
		var completed []*checkpoint.Manifest
		onComplete := func(m *checkpoint.Manifest) { completed = append(completed, m) }
		if upload {
			u, err = remote.NewUploader(r, store, remote.UploadOptions{Device: fmt.Sprintf("effect-%d", time.Now().UnixNano()), Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			onComplete = func(m *checkpoint.Manifest) { completed = append(completed, m); u.Upload(m) }
		}
		cfg := checkpoint.DefaultConfig()
		cfg.Interval = interval
		job, err := runtime.New(topo, runtime.Options{Checkpoints: cfg, Store: store, Logger: quiet, OnComplete: onComplete})
		if err != nil {
			b.Fatal(err)
		}
		start, cpu0, server0 := time.Now(), cpuTime(), srv.CPUTime(b)
		if err := job.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
		elapsed, cpu, server := time.Since(start), cpuTime()-cpu0, srv.CPUTime(b)-server0
		var sent int64
		if u != nil {
			for _, m := range completed {
				if u.State(m.ID).Status == remote.Uploaded {
					for _, a := range m.Subtasks {
						sent += a.State.Size
					}
				}
			}
			u.Close(context.Background())
		}
		return float64(n) / elapsed.Seconds(), float64(cpu.Nanoseconds()) / float64(n), float64(sent) / 1e6 / elapsed.Seconds(),
			100 * server.Seconds() / elapsed.Seconds()
	}
	// Rounds come in pairs, in alternating order, and each pair is
	// compared on its own: load from other processes drifts, and hits both
	// rounds of a pair alike.
	var slower, moreCPU, off, on, uploads, servers []float64
	b.ResetTimer()
	for i := range rounds {
		var offRate, offCPU, onRate, onCPU, up, server float64
		if i%2 == 0 {
			offRate, offCPU, _, _ = round(b.N, false)
			onRate, onCPU, up, server = round(b.N, true)
		} else {
			onRate, onCPU, up, server = round(b.N, true)
			offRate, offCPU, _, _ = round(b.N, false)
		}
		slower = append(slower, 100*(offRate-onRate)/offRate)
		moreCPU = append(moreCPU, 100*(onCPU-offCPU)/offCPU)
		off, on, uploads, servers = append(off, offRate), append(on, onRate), append(uploads, up), append(servers, server)
		b.Logf("pair %d: %.0f records/s off, %.0f on (uploading %.1f MB/s, the server using %.0f%% of a core); CPU per record %.0fns off, %.0fns on",
			i, offRate, onRate, up, server, offCPU, onCPU)
	}
	b.StopTimer()
	median := func(xs []float64) float64 { slices.Sort(xs); return xs[len(xs)/2] }
	b.ReportMetric(median(off), "records/s-off")
	b.ReportMetric(median(on), "records/s-on")
	b.ReportMetric(median(slower), "%-slower")
	b.ReportMetric(median(moreCPU), "%-more-cpu")
	b.ReportMetric(median(uploads), "upload-MB/s")
	b.ReportMetric(median(servers), "server-%-of-a-core")
}

// cpuTime is the CPU time this process has used (all threads; the S3
// server is another process).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
