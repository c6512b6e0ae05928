package tui

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
)

// Fixed statuses of the skewed pipeline in configs/skew.yaml: a fleet whose
// readings pass through an expensive scoring step into a join with a
// reference fleet. skewedBefore is one second before skewedNow, so rates are
// the differences of the counters.

func skewedStatus(uptime float64, scale int64) api.Status {
	sub := func(i int, in, out, bpMS, queued, lagMS int64) api.Subtask {
		return api.Subtask{Index: i, RecordsIn: in * scale, RecordsOut: out * scale, BackpressureMS: bpMS * scale, Queued: queued,
			WatermarkUnixMS: skewedTime(uptime) - lagMS}
	}
	op := func(id string, lagMS int64, subs ...api.Subtask) api.Operator {
		return api.Operator{ID: id, Parallelism: len(subs), Subtasks: subs,
			WatermarkUnixMS: skewedTime(uptime) - lagMS, WatermarkLagMS: lagMS}
	}
	drift := op("drift", 3_400,
		api.Subtask{Index: 0, RecordsIn: 1100 * scale, Queued: 3, WatermarkUnixMS: skewedTime(uptime) - 3_400, Alignment: &api.Alignment{
			CheckpointID: 42, StartedMS: 90_100, ElapsedMS: 1600, BufferedRecords: 41, Blocking: true,
			Channels: []api.Channel{
				{From: "score/0", Queued: 3},
				{From: "reference/0", Arrived: true, AtMS: 90_100},
			}}},
		api.Subtask{Index: 1, RecordsIn: 1190 * scale, WatermarkUnixMS: skewedTime(uptime) - 3_300, Alignment: &api.Alignment{
			CheckpointID: 42, StartedMS: 91_580, ElapsedMS: 120, BufferedRecords: 2, Unaligned: true,
			Channels: []api.Channel{
				{From: "score/0", Arrived: true, AtMS: 91_580},
				{From: "reference/0", Queued: 1},
			}}})
	drift.LateRecords = 4
	acked := func(id string, atMS int64) api.Ack { return api.Ack{Subtask: id, Acked: true, AtMS: atMS} }
	return api.Status{
		Agent: "gw-07", Pipeline: "configs/skew.yaml", State: "running", Mode: "exactly-once",
		UptimeSeconds: uptime, TimeUnixMS: skewedTime(uptime),
		Checkpoints: api.Checkpoints{Completed: 41, Failed: 1, Late: 1, InProgress: 1, IntervalMS: 2_000,
			LastCompleted: &api.CheckpointInfo{ID: 41, Status: "completed", DurationMS: 1_200, SizeBytes: 73_400, AlignmentMS: 1_100, Incremental: true, Late: true}},
		RestoredFrom: &api.Restored{ID: 17, Source: "local"},
		DeadLetters:  3, IngestLag: 1200,
		Memory: api.Memory{Resident: 46_500_000, HeapLive: 18_200_000, HeapGoal: 36_400_000, Limit: 96 << 20},
		Disk:   api.Disk{WrittenBytes: 2_100_000, Syncs: 5_300, PerDayBytes: 41_000_000, PerDaySpanSeconds: 3600},
		Operators: []api.Operator{
			op("fleet", 1_100, sub(0, 0, 2000, 970, 0, 1_100)),
			op("reference", 1_000, sub(0, 0, 300, 0, 0, 1_000)),
			op("score", 3_400, sub(0, 2000, 1990, 0, 512, 3_400)),
			drift,
			op("drift-out", 3_400, sub(0, 12, 0, 0, 0, 3_400)),
		},
		InFlight: []api.InFlight{{ID: 42, ElapsedMS: 1710, Acked: 3, Total: 6, Subtasks: []api.Ack{
			acked("fleet/0", 2), acked("reference/0", 3), acked("score/0", 105),
			{Subtask: "drift/0"}, {Subtask: "drift/1"}, {Subtask: "drift-out/0"}}}},
		History: []api.CheckpointInfo{
			{ID: 37, Status: "completed", TriggeredUnixMS: 1_794_999_996_000, DurationMS: 140, SizeBytes: 52_000,
				AlignmentMS: 0, StartDelayMS: 3, SyncMS: 0, AsyncMS: 130, Unaligned: true, InFlightBytes: 18_400},
			{ID: 38, Status: "completed", TriggeredUnixMS: 1_794_999_998_000, DurationMS: 520, SizeBytes: 50_100,
				AlignmentMS: 500, StartDelayMS: 4, SyncMS: 0, AsyncMS: 12, Unaligned: true, TimedOut: true, InFlightBytes: 2_300},
			{ID: 39, Status: "completed", TriggeredUnixMS: 1_795_000_000_000, DurationMS: 95, SizeBytes: 48_100,
				AlignmentMS: 81, StartDelayMS: 85, SyncMS: 0, AsyncMS: 1, Upload: "failed"},
			{ID: 40, Status: "failed", Cause: "expired", TriggeredUnixMS: 1_795_000_002_000, DurationMS: 60_000},
			{ID: 41, Status: "completed", TriggeredUnixMS: 1_795_000_064_000, DurationMS: 1_200, SizeBytes: 73_400,
				AlignmentMS: 1_100, StartDelayMS: 5, SyncMS: 1, AsyncMS: 3, Incremental: true, Upload: "uploaded", Late: true},
		},
		Stalls: []api.Stall{
			{CheckpointID: 38, Subtask: "drift/0", WaitedFor: "score/0", StartedUnixMS: 1_794_999_998_004, DurationMS: 500, Backlog: 610, Outcome: "timed out"},
			{CheckpointID: 39, Subtask: "drift/1", WaitedFor: "reference/0", StartedUnixMS: 1_795_000_000_085, DurationMS: 81, Backlog: 9, Outcome: "aligned"},
			{CheckpointID: 40, Subtask: "drift/0", WaitedFor: "score/0", StartedUnixMS: 1_795_000_002_010, DurationMS: 59_990, Backlog: 48_000, BufferedRecords: 3_100, Outcome: "abandoned"},
			{CheckpointID: 41, Subtask: "drift/0", WaitedFor: "score/0", StartedUnixMS: 1_795_000_064_005, DurationMS: 1_100, Backlog: 1_020, BufferedRecords: 88, Outcome: "aligned"},
		},
	}
}

// skewedTime is the agent's clock at uptime: 11:07:46 UTC at 91 s.
func skewedTime(uptime float64) int64 { return 1_795_000_066_000 + int64((uptime-91)*1000) }

var (
	skewedBefore = skewedStatus(90, 10)
	skewedNow    = skewedStatus(91, 11)
)

// settled is st with no alignment in progress, taken ago after the
// end of its newest stall (#41's drift/0, 1.1s waiting for score/0).
func settled(st api.Status, ago time.Duration) api.Status {
	st.Operators = slices.Clone(st.Operators)
	for i := range st.Operators {
		op := &st.Operators[i]
		op.Subtasks = slices.Clone(op.Subtasks)
		for j := range op.Subtasks {
			op.Subtasks[j].Alignment = nil
		}
	}
	st.InFlight = nil
	last := st.Stalls[len(st.Stalls)-1]
	st.TimeUnixMS = last.EndedUnixMS() + ago.Milliseconds()
	return st
}

// crowdedStatus is skewedStatus with the operators of configs/demo.yaml
// beside the join's, thirteen in all: more than the wide layout's graph
// panel shows at 120x30.
func crowdedStatus(uptime float64, scale int64) api.Status {
	st := skewedStatus(uptime, scale)
	st.Operators = slices.Clone(st.Operators)
	for i, id := range []string{"hot", "device-avg", "hot-per-site", "alarm", "averages", "alerts", "alarms", "site-rollup"} {
		n := int64(100 * (i + 1))
		st.Operators = append(st.Operators, api.Operator{ID: id, Parallelism: 1, Subtasks: []api.Subtask{
			{RecordsIn: n * scale, RecordsOut: n / 2 * scale, BackpressureMS: int64(20*i) * scale, Queued: int64(i)}}})
	}
	return st
}

// renamed is st with operators renamed (old id to new), also where
// alignments name their inputs.
func renamed(st api.Status, ids map[string]string) api.Status {
	name := func(id string) string {
		if n, ok := ids[id]; ok {
			return n
		}
		return id
	}
	st.Operators = slices.Clone(st.Operators)
	for i := range st.Operators {
		op := &st.Operators[i]
		op.ID = name(op.ID)
		op.Subtasks = slices.Clone(op.Subtasks)
		for j := range op.Subtasks {
			a := op.Subtasks[j].Alignment
			if a == nil {
				continue
			}
			renamedA := *a
			renamedA.Channels = slices.Clone(a.Channels)
			for k := range renamedA.Channels {
				c := &renamedA.Channels[k]
				if op, index, ok := strings.Cut(c.From, "/"); ok {
					c.From = name(op) + "/" + index
				}
			}
			op.Subtasks[j].Alignment = &renamedA
		}
	}
	return st
}

// lostAt is the stream breaking at agent-clock second s of the fixtures'
// history (11:07:44 UTC is 1_795_000_064).
func lostAt(s int64, attempt int, err error) lostMsg {
	return lostMsg{err: err, attempt: attempt, at: time.Unix(s, 0)}
}

// noAgent is what a real client says when no agent has started on its
// socket, /run/cairn-test/cairn.sock: there is no such file.
func noAgent(t *testing.T) error {
	t.Helper()
	const socket = "/run/cairn-test/cairn.sock"
	if _, err := os.Stat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s is there (%v): the fixture needs it not to be", socket, err)
	}
	_, err := api.NewClient(socket).Status(context.Background())
	return err
}

// refused is what a real client says of a socket nothing listens on, as
// an agent killed leaves it: cairn.sock, in a directory the test works in
// while it dials (the tests of this package run one at a time).
func refused(t *testing.T) error {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	l, err := net.Listen("unix", "cairn.sock")
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	_, err = api.NewClient("cairn.sock").Status(context.Background())
	return err
}
