package localrecovery_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cairn-edge/cairn/bench"
	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/localrecovery"
)

// BenchmarkOptions measures the store under bbolt's options and chunk
// sizes the package doc weighs, against the ones chosen ("chosen"):
//
//   - reference: a checkpoint of the reference load (cairn-bench wear: 50
//     devices, a window per device), as its subtasks' snapshots come: a
//     window's state of 3 KB, a source's offset, a sink's staged output
//     of 2 KB, changed each time, with Retain 3. It reports the bytes
//     and syncs a checkpoint writes (the store's count: pages of the
//     file) and the time of its commit.
//
//   - incremental: a 1M-key state's incremental checkpoints (1 % of the
//     keys changed), each on top of the last (bench.State.Write): the
//     time of a checkpoint, and the bytes it writes.
//
//     go test -run '^$' -bench Options -benchtime 200x ./localrecovery
func BenchmarkOptions(b *testing.B) {
	variants := []struct {
		name  string
		tune  func(*bolt.Options)
		chunk int
		big   bool // measured on the 1M-key state too
	}{
		{"chosen", nil, localrecovery.ChunkSize, true},
		{"freelist-synced-array", func(o *bolt.Options) { o.NoFreelistSync, o.FreelistType = false, bolt.FreelistArrayType }, localrecovery.ChunkSize, true},
		{"freelist-synced-map", func(o *bolt.Options) { o.NoFreelistSync = false }, localrecovery.ChunkSize, false},
		{"freelist-array", func(o *bolt.Options) { o.FreelistType = bolt.FreelistArrayType }, localrecovery.ChunkSize, true},
		{"page-1k", func(o *bolt.Options) { o.PageSize = 1024 }, localrecovery.ChunkSize, false},
		{"page-2k", func(o *bolt.Options) { o.PageSize = 2048 }, localrecovery.ChunkSize, false},
		{"page-8k", func(o *bolt.Options) { o.PageSize = 8192 }, localrecovery.ChunkSize, false},
		{"page-16k", func(o *bolt.Options) { o.PageSize = 16384 }, localrecovery.ChunkSize, true},
		{"mmap-64m", func(o *bolt.Options) { o.InitialMmapSize = 64 << 20 }, localrecovery.ChunkSize, true},
		{"nogrowsync", func(o *bolt.Options) { o.NoGrowSync = true }, localrecovery.ChunkSize, true},
		{"chunk-64k", nil, 64 << 10, true},
		{"chunk-256k", nil, 256 << 10, true},
		{"chunk-4m", nil, 4 << 20, true},
	}
	for _, v := range variants {
		b.Run("reference/"+v.name, func(b *testing.B) {
			defer localrecovery.SetChunkSize(v.chunk)()
			s := mustOpenB(b, localrecovery.Tuned(localrecovery.Options{Retain: 3}, v.tune))
			tasks := []checkpoint.TaskID{{Operator: "telemetry"}, {Operator: "per-device"}, {Operator: "upstream"}}
			sizes := []int{40, 3000, 2000}
			put := func(id uint64) {
				m := &checkpoint.Manifest{ID: id}
				for i, task := range tasks {
					h, err := s.PutState(id, task, slices.Values([][]byte{benchPayload(id+uint64(i), sizes[i])}))
					if err != nil {
						b.Fatal(err)
					}
					m.Subtasks = append(m.Subtasks, checkpoint.Ack{Task: task, ID: id, State: h, Offset: id * 500})
				}
				if err := s.Complete(m); err != nil {
					b.Fatal(err)
				}
			}
			for id := uint64(1); id <= 10; id++ { // the file at its size
				put(id)
			}
			_, syncs := s.Wear()
			// What the disk is written: the pages a commit changed, and
			// where bbolt's pages are smaller than the kernel's, the 4 KiB
			// blocks that hold them.
			unit := 4096
			if o := (bolt.Options{PageSize: 4096}); v.tune != nil {
				v.tune(&o)
				unit = max(unit, o.PageSize)
			}
			var changed int64
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				before := readFile(b, s)
				b.StartTimer()
				put(uint64(11 + i))
				b.StopTimer()
				changed += changedBlocks(before, readFile(b, s), unit)
				b.StartTimer()
			}
			b.StopTimer()
			_, n := s.Wear()
			b.ReportMetric(float64(changed*int64(unit))/float64(b.N), "B-written/checkpoint")
			b.ReportMetric(float64(n-syncs)/float64(b.N), "syncs/checkpoint")
		})
	}
	for _, v := range variants {
		if !v.big {
			continue
		}
		b.Run("incremental-1M/"+v.name, func(b *testing.B) {
			defer localrecovery.SetChunkSize(v.chunk)()
			st, err := bench.NewState(1_000_000)
			if err != nil {
				b.Fatal(err)
			}
			s := mustOpenB(b, localrecovery.Tuned(localrecovery.Options{Retain: 3}, v.tune))
			if _, _, err := st.Write(s, 1, false); err != nil {
				b.Fatal(err)
			}
			written, _ := s.Wear()
			var times []time.Duration
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				st.Change(10_000, i)
				b.StartTimer()
				_, d, err := st.Write(s, uint64(i+2), true)
				if err != nil {
					b.Fatal(err)
				}
				times = append(times, d)
			}
			b.StopTimer()
			w, _ := s.Wear()
			slices.Sort(times)
			b.ReportMetric(float64(w-written)/float64(b.N)/1e3, "kB-written/checkpoint")
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1e3, "ms-p50")
			b.ReportMetric(float64(times[len(times)*99/100].Microseconds())/1e3, "ms-p99")
		})
	}
}

// readFile reads the store's file.
func readFile(b *testing.B, s *localrecovery.Store) []byte {
	data, err := os.ReadFile(s.Path())
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// changedBlocks counts the blocks of unit bytes of after that differ from
// before's (a block the file grew by, from zeros).
func changedBlocks(before, after []byte, unit int) int64 {
	n := int64(0)
	zero := make([]byte, unit)
	for off := 0; off < len(after); off += unit {
		end := min(len(after), off+unit)
		was := zero[:end-off]
		if end <= len(before) {
			was = before[off:end]
		}
		if !bytes.Equal(after[off:end], was) {
			n++
		}
	}
	return n
}

// benchPayload is n bytes that differ with id.
func benchPayload(id uint64, n int) []byte {
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(uint64(i)*7 + id)
	}
	return data
}

func mustOpenB(b *testing.B, opts localrecovery.Options) *localrecovery.Store {
	b.Helper()
	s, err := localrecovery.Open(filepath.Join(b.TempDir(), "checkpoints.db"), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}
