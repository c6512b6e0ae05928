package bench

import (
	"fmt"
	"time"

	"github.com/cairn-edge/cairn/ingest"
)

// IngestConfig sizes the ingest scenario.
type IngestConfig struct {
	// Dir receives the ingest log's file; required.
	Dir string
	// Messages are appended in groups of GroupSize (defaults 200,000 and
	// 1000, the source's group commit).
	Messages  int
	GroupSize int
	// SingleMessages are appended one per fsynced append, for the
	// comparison; default 200.
	SingleMessages int
}

// IngestResult compares durable appends to the ingest log in groups with
// appends of one message at a time, in one log file.
type IngestResult struct {
	Messages       int     `json:"messages"`
	GroupSize      int     `json:"group_size"`
	MessagesPerSec float64 `json:"messages_per_sec"`
	// SingleMessagesPerSec is the rate with an fsync per message.
	SingleMessages       int     `json:"single_messages"`
	SingleMessagesPerSec float64 `json:"single_messages_per_sec"`
	// GroupCommitSpeedupRatio is the grouped rate over the single rate.
	GroupCommitSpeedupRatio float64 `json:"group_commit_speedup_ratio"`
}

func (*IngestResult) Scenario() string { return "ingest" }

func (r *IngestResult) Rows() []Row {
	return []Row{
		{"messages", num(float64(r.Messages))},
		{fmt.Sprintf("messages/s, fsync per group of %d", r.GroupSize), num(r.MessagesPerSec)},
		{"messages/s, fsync per message", num(r.SingleMessagesPerSec)},
		{"group commit speedup (grouped / single)", fmt.Sprintf("%.1f", r.GroupCommitSpeedupRatio)},
	}
}

// Ingest appends telemetry messages to a fresh ingest log in Dir.
func Ingest(cfg IngestConfig) (*IngestResult, error) {
	if cfg.Messages <= 0 {
		cfg.Messages = 200_000
	}
	if cfg.GroupSize <= 0 {
		cfg.GroupSize = 1000
	}
	if cfg.SingleMessages <= 0 {
		cfg.SingleMessages = 200
	}
	logs, err := ingest.OpenLogs(ingest.Dir(cfg.Dir), ingest.LogOptions{})
	if err != nil {
		return nil, err
	}
	defer logs.Close()
	grouped, err := logs.Log("bench/grouped")
	if err != nil {
		return nil, err
	}
	single, err := logs.Log("bench/single")
	if err != nil {
		return nil, err
	}
	groups := max(1, cfg.Messages/cfg.GroupSize)
	res := &IngestResult{Messages: groups * cfg.GroupSize, GroupSize: cfg.GroupSize, SingleMessages: cfg.SingleMessages}
	d, err := AppendGroups(grouped, TelemetryGroup(cfg.GroupSize), groups)
	if err != nil {
		return nil, err
	}
	res.MessagesPerSec = perSec(res.Messages, d)
	if d, err = AppendGroups(single, TelemetryGroup(1), cfg.SingleMessages); err != nil {
		return nil, err
	}
	res.SingleMessagesPerSec = perSec(cfg.SingleMessages, d)
	res.GroupCommitSpeedupRatio = ratio(res.MessagesPerSec, res.SingleMessagesPerSec)
	return res, nil
}

// TelemetryGroup returns n messages of about 100 bytes, readings of a
// sensor fleet of 100 devices.
func TelemetryGroup(n int) []ingest.Message {
	group := make([]ingest.Message, n)
	for i := range group {
		topic := fmt.Sprintf("sensors/d%03d/telemetry", i%100)
		p := []byte(fmt.Sprintf(`{"device":"d%03d","temp":21.5,"humidity":40,"seq":%08d}`, i%100, i))
		group[i] = ingest.Message{Topic: topic, Payload: p, Received: time.Now(), PacketID: uint16(i)}
	}
	return group
}

// AppendGroups appends group to l times times, one fsynced append
// each, and returns the time it took.
func AppendGroups(l *ingest.Log, group []ingest.Message, times int) (time.Duration, error) {
	start := time.Now()
	for range times {
		if _, err := l.Append(group); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}
