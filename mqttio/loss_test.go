package mqttio

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/ingest"
	"github.com/cairn-edge/cairn/runtime"
)

// lineWriter sends each log line written to it.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) { w <- string(p); return len(p), nil }

// TestSourceRefusesALogWhoseFrontIsGone: a fresh start (no checkpoint) on
// an ingest log truncated by a checkpoint that is gone would lose the
// state of the messages below its first offset; the source refuses,
// naming the flag, and with AcceptStateLoss starts at the first offset.
func TestSourceRefusesALogWhoseFrontIsGone(t *testing.T) {
	logs, err := ingest.OpenLogs(filepath.Join(t.TempDir(), "ingest"), ingest.LogOptions{SegmentBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	l, err := logs.Log("mqtt/0")
	if err != nil {
		t.Fatal(err)
	}
	for range ingest.RedeliveryWindow/100 + 20 {
		group := make([]ingest.Message, 100)
		for i := range group {
			group[i] = ingest.Message{Topic: "sensors/a", Payload: []byte(strings.Repeat("x", 20))}
		}
		if _, err := l.Append(group); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Truncate(l.Next()); err != nil || l.First() <= 1 {
		t.Fatalf("Truncate: %v; first offset %d", err, l.First())
	}
	run := func(ctx context.Context, accept bool, log *slog.Logger) error {
		var b graph.Builder
		src := b.Source("mqtt", 1, NewSource(SourceConfig{Name: "mqtt", Logs: logs, AcceptStateLoss: accept, Topics: []string{"sensors/+"},
			Client: ClientConfig{Broker: "tcp://127.0.0.1:1", ClientID: "loss", Logger: log}}))
		b.Operator("record", 1, newRecorder(1).operator, []graph.Input{graph.In(src, graph.Rebalance())})
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		job, err := runtime.New(topo, runtime.Options{Checkpoints: checkpoint.DefaultConfig(), Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		return job.Run(ctx)
	}
	err = run(t.Context(), false, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "ingest log mqtt/0 starts at offset") || !strings.Contains(err.Error(), "--accept-state-loss") {
		t.Fatalf("fresh start on a truncated log: %v", err)
	}
	// Accepted: the source opens (and goes on to look for its broker,
	// which is not there) and the job runs until it is stopped.
	lines := make(lineWriter, 1024)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, true, slog.New(slog.NewTextHandler(lines, nil))) }()
	for line := range lines {
		if strings.Contains(line, "accepting lost state") {
			break
		}
	}
	cancel()
	go func() {
		for range lines {
		}
	}()
	if err := <-done; err != nil {
		t.Fatalf("accepted start: %v", err)
	}
}

// TestCheckOffset: where a start at a checkpoint's offset would lose
// state or acknowledged messages, the source refuses; elsewhere it starts.
func TestCheckOffset(t *testing.T) {
	logs, err := ingest.OpenLogs(filepath.Join(t.TempDir(), "ingest"), ingest.LogOptions{SegmentBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	empty, err := logs.Log("empty/0")
	if err != nil {
		t.Fatal(err)
	}
	full, err := logs.Log("full/0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := full.Append([]ingest.Message{{Topic: "a", Payload: []byte("1")}, {Topic: "a", Payload: []byte("2")}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		log       *ingest.Log
		offset    uint64
		elsewhere bool
		refused   string
	}{
		{empty, 0, false, ""},
		{empty, 1, false, ""},
		{empty, 40, false, "ingest log empty/0 is empty, but the checkpoint restored had read it to offset 40"},
		{empty, 40, true, ""}, // a savepoint's or another device's offsets
		{full, 3, false, ""},
		{full, 2, false, ""},
	} {
		s := &source{cfg: SourceConfig{Name: strings.TrimSuffix(c.log.Name(), "/0")}, log: c.log}
		err := s.checkOffset(c.offset, c.elsewhere)
		if c.refused == "" && err != nil || c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused) || !strings.Contains(err.Error(), "--accept-state-loss")) {
			t.Errorf("%s at offset %d (elsewhere %v): %v, want refused %q", c.log.Name(), c.offset, c.elsewhere, err, c.refused)
		}
	}
}
