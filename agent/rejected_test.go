package agent

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairn-edge/cairn/agent/config"
	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/ingest"
)

// TestRejectionsSpeakOnceAPeriod checks what becomes of rejected records
// under each on_error: dead letters stored up to rejectStoredPerPeriod a
// period, one WARN line at a period's first and a summary of the rest once
// the period is over; drop stores nothing; fail fails.
func TestRejectionsSpeakOnceAPeriod(t *testing.T) {
	// In a bubble, whose clock moves only when the test sleeps.
	synctest.Test(t, func(t *testing.T) {
		cfg := &config.Config{Operators: []*config.Operator{
			{ID: "keep", OnError: config.OnErrorDeadLetter},
			{ID: "quiet", OnError: config.OnErrorDrop},
			{ID: "strict", OnError: config.OnErrorFail},
		}}
		var stored []ingest.DeadLetter
		var log bytes.Buffer
		r := newRejections(cfg, func(dl ingest.DeadLetter, _ uint64) error { stored = append(stored, dl); return nil },
			slog.New(slog.NewTextHandler(&log, nil)))
		start := time.Now()
		reject := func(op string, n int) {
			t.Helper()
			for i := range n {
				rec := graph.Record{Key: "dev", Time: int64(i), Payload: map[string]any{"seq": i}}
				if err := r.handle(checkpoint.TaskID{Operator: op, Subtask: 1}, &rec, errors.New("no humidity")); err != nil {
					t.Fatalf("%s: %v", op, err)
				}
			}
		}

		reject("keep", 25)
		reject("quiet", 25)
		lines := strings.Split(strings.TrimSpace(log.String()), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], `msg="operator rejected a record" operator=keep subtask=1 on_error=dead-letter reason="no humidity" stored=true`) ||
			!strings.Contains(lines[1], `operator=quiet subtask=1 on_error=drop reason="no humidity"`) {
			t.Fatalf("the log after a period's first rejections:\n%s", log.String())
		}
		if len(stored) != rejectStoredPerPeriod || stored[0].Operator != "keep/1" || stored[0].Reason != "no humidity" ||
			string(stored[0].Payload) != `{"key":"dev","time":0,"value":0,"payload":{"seq":0}}` {
			t.Fatalf("stored %d dead letters, the first %+v (%s); want %d of keep/1 with the record", len(stored), stored[0], stored[0].Payload, rejectStoredPerPeriod)
		}

		log.Reset()
		time.Sleep(rejectPeriod)
		reject("keep", 1)
		lines = strings.Split(strings.TrimSpace(log.String()), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], `msg="operator rejected more records" operator=keep on_error=dead-letter count=24 since=`+start.Format(time.RFC3339)+` stored=10`) ||
			!strings.Contains(lines[1], `msg="operator rejected a record" operator=keep`) {
			t.Fatalf("the log once a period is over:\n%s", log.String())
		}
		if len(stored) != rejectStoredPerPeriod+1 {
			t.Fatalf("stored %d dead letters, want one more in the new period", len(stored))
		}

		err := r.handle(checkpoint.TaskID{Operator: "strict"}, &graph.Record{}, errors.New("no humidity"))
		if err == nil || err.Error() != "operator strict rejected a record (on_error: fail): no humidity" {
			t.Fatalf("on_error: fail gave %v", err)
		}
	})
}

// TestSinkRejectionsAreDeadLetters: a sink has no on_error; what it
// rejects (a record whose topic no broker takes) is stored.
func TestSinkRejectionsAreDeadLetters(t *testing.T) {
	cfg := &config.Config{Sinks: []*config.Sink{{ID: "out"}}}
	var stored []ingest.DeadLetter
	var log bytes.Buffer
	r := newRejections(cfg, func(dl ingest.DeadLetter, _ uint64) error { stored = append(stored, dl); return nil },
		slog.New(slog.NewTextHandler(&log, nil)))
	reason := errors.New(`sink out: topic "out/a#b/count" is not a valid MQTT topic: contains the wildcard #`)
	if err := r.handle(checkpoint.TaskID{Operator: "out"}, &graph.Record{Key: "a#b", Value: 3}, reason); err != nil {
		t.Fatal(err)
	}
	if len(stored) != 1 || stored[0].Operator != "out/0" || stored[0].Reason != reason.Error() || string(stored[0].Payload) != `{"key":"a#b","time":0,"value":3}` {
		t.Fatalf("stored %+v, want the record as a dead letter of out/0", stored)
	}
	if !strings.Contains(log.String(), `msg="operator rejected a record" operator=out subtask=0 on_error=dead-letter`) {
		t.Fatalf("log:\n%s", log.String())
	}
}
