package agent

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/cairn-edge/cairn/agent/config"
	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/ingest"
)

// rejectPeriod is how often the agent speaks of an operator's rejected
// records: one WARN line a period with what it rejected since, and at most
// rejectStoredPerPeriod of them stored as dead letters. A device that
// sends a poison reading every second costs a line and a few syncs a
// minute, not one of each per reading; the count is exact
// (runtime.TaskMetrics.Rejected).
const (
	rejectPeriod          = time.Minute
	rejectStoredPerPeriod = 10
)

// rejections handles the records operators and sinks reject
// (runtime.Options.OnRejected) as each operator's on_error says; a sink's
// are dead letters.
type rejections struct {
	policy map[string]string // operator id → config.OnError*
	sinks  map[string]bool   // the ids of the sinks, whose dead letters are unpublishable output
	store  func(dl ingest.DeadLetter, origin uint64) error
	log    *slog.Logger

	mu  sync.Mutex
	ops map[string]*rejectCount
}

// rejectCount is what an operator rejected in the current period.
type rejectCount struct {
	start    time.Time
	more     int // rejected after the period's first, which was logged
	stored   int // stored as dead letters
	storeErr error
}

func newRejections(cfg *config.Config, store func(dl ingest.DeadLetter, origin uint64) error, log *slog.Logger) *rejections {
	r := &rejections{policy: make(map[string]string), sinks: make(map[string]bool), store: store, log: log, ops: make(map[string]*rejectCount)}
	for _, o := range cfg.Operators {
		r.policy[o.ID] = o.OnError
	}
	// A sink rejects a record whose topic no broker takes
	// (mqttio.CheckTopic): it is kept, as an operator's by default.
	for _, s := range cfg.Sinks {
		r.policy[s.ID] = config.OnErrorDeadLetter
		r.sinks[s.ID] = true
	}
	return r
}

// handle is runtime.Options.OnRejected.
func (r *rejections) handle(id checkpoint.TaskID, rec *graph.Record, err error) error {
	policy := r.policy[id.Operator]
	if policy == config.OnErrorFail {
		return fmt.Errorf("operator %s rejected a record (on_error: fail): %w", id.Operator, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	c := r.ops[id.Operator]
	first := c == nil || now.Sub(c.start) >= rejectPeriod
	if first {
		if c != nil {
			r.report(id.Operator, policy, c)
		}
		c = &rejectCount{start: now}
		r.ops[id.Operator] = c
	}
	stored := false
	if policy == config.OnErrorDeadLetter && c.stored < rejectStoredPerPeriod {
		if serr := r.store(r.deadLetterOf(id, rec, err), rec.Origin); serr != nil {
			c.storeErr = serr
		} else {
			c.stored++
			stored = true
		}
	}
	if !first {
		c.more++
		return nil
	}
	attrs := []any{"operator", id.Operator, "subtask", id.Subtask, "on_error", policy, "reason", err.Error()}
	if policy == config.OnErrorDeadLetter {
		attrs = append(attrs, "stored", stored)
	}
	if c.storeErr != nil {
		attrs = append(attrs, "store_err", c.storeErr.Error())
	}
	r.log.Warn("operator rejected a record", attrs...)
	return nil
}

// report logs what an operator rejected in period c after the first, once
// the period is over.
func (r *rejections) report(op, policy string, c *rejectCount) {
	if c.more == 0 {
		return
	}
	attrs := []any{"operator", op, "on_error", policy, "count", c.more, "since", c.start.Format(time.RFC3339)}
	if policy == config.OnErrorDeadLetter {
		attrs = append(attrs, "stored", c.stored)
	}
	if c.storeErr != nil {
		attrs = append(attrs, "store_err", c.storeErr.Error())
	}
	r.log.Warn("operator rejected more records", attrs...)
}

// deadLetterOf is the dead letter of rec, which id rejected for err: the
// record as JSON, cut as every dead letter is (ingest.DeadLetterPayload).
func (r *rejections) deadLetterOf(id checkpoint.TaskID, rec *graph.Record, err error) ingest.DeadLetter {
	payload, jerr := json.Marshal(struct {
		Key     string  `json:"key"`
		Time    int64   `json:"time"`
		Value   float64 `json:"value"`
		Payload any     `json:"payload,omitempty"`
	}{rec.Key, rec.Time, rec.Value, rec.Payload})
	if jerr != nil {
		payload = []byte(fmt.Sprintf("%q", fmt.Sprint(rec.Key, " ", rec.Time, " ", rec.Payload)))
	}
	dl := ingest.DeadLetter{Cause: ingest.CauseRejected, Operator: id.Operator + "/" + strconv.Itoa(id.Subtask), Reason: err.Error()}
	if r.sinks[id.Operator] {
		dl.Cause = ingest.CauseUnpublishable
	}
	dl.Payload, dl.Size = ingest.DeadLetterPayload(payload)
	return dl
}
