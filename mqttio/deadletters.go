package mqttio

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/cairn-edge/cairn/seglog"
)

// DeadLetter is a message that could not be decoded, or a record an
// operator rejected, kept with the reason.
type DeadLetter struct {
	// Operator is the subtask ("id/subtask") that rejected the record;
	// empty for a message its source could not decode.
	Operator string `json:"operator,omitempty"`
	Source   string `json:"source,omitempty"`
	Offset   uint64 `json:"offset"`
	Topic    string `json:"topic"`
	Payload  []byte `json:"payload"`
	Reason   string `json:"reason"`
}

const (
	// deadLetterDir is the dead letters' log, in the ingest logs'
	// directory.
	deadLetterDir     = "dead-letters"
	deadLetterSegment = 1 << 20
	// maxDeadLetterBytes bounds the dead letters kept: beyond it the
	// oldest go, a segment at a time.
	maxDeadLetterBytes = 16 << 20
)

// deadLetterStore keeps dead letters in a log of their own, as JSON, one
// record each. A source's dead letters are stored in offset order, so
// that a replay of its log, which finds the same ones again, stores none
// twice.
type deadLetterStore struct {
	mu     sync.Mutex
	log    *seglog.Log
	stored map[string]uint64 // source → the highest offset stored
}

func openDeadLetters(dir string, opts seglog.Options) (*deadLetterStore, error) {
	l, err := seglog.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	d := &deadLetterStore{log: l, stored: make(map[string]uint64)}
	var bad error
	err = l.Read(l.First(), func(r seglog.Record) bool {
		var dl DeadLetter
		if bad = json.Unmarshal(r.Data, &dl); bad != nil {
			return false
		}
		d.stored[dl.Source] = max(d.stored[dl.Source], dl.Offset)
		return true
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	return d, nil
}

// add stores the dead letters not stored yet, durably.
func (d *deadLetterStore) add(dls []DeadLetter) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	added := 0
	for _, dl := range dls {
		if stored, ok := d.stored[dl.Source]; ok && dl.Operator == "" && dl.Offset <= stored {
			continue
		}
		v, err := json.Marshal(dl)
		if err != nil {
			return err
		}
		if _, err := d.log.Append(1, v); err != nil {
			return fmt.Errorf("storing dead letters: %w", err)
		}
		added++
	}
	if added == 0 {
		return nil
	}
	if err := d.log.Sync(); err != nil {
		return fmt.Errorf("storing dead letters: %w", err)
	}
	for _, dl := range dls {
		if dl.Operator == "" {
			d.stored[dl.Source] = max(d.stored[dl.Source], dl.Offset)
		}
	}
	return d.log.TrimTo(maxDeadLetterBytes)
}

// list returns up to limit dead letters, oldest first.
func (d *deadLetterStore) list(limit int) ([]DeadLetter, error) {
	var out []DeadLetter
	var bad error
	err := d.log.Read(d.log.First(), func(r seglog.Record) bool {
		var dl DeadLetter
		if bad = json.Unmarshal(r.Data, &dl); bad != nil {
			return false
		}
		out = append(out, dl)
		return len(out) < limit
	})
	if err == nil {
		err = bad
	}
	return out, err
}

func (d *deadLetterStore) close() error { return d.log.Close() }

// deadLetters stores dead letters; a replay stores each of a source once.
func (d *Logs) deadLetters(dls []DeadLetter) error { return d.dead.add(dls) }

// StoreRejected stores, durably, a dead letter of an operator
// (DeadLetter.Operator set). A replay after a crash may store it again.
func (d *Logs) StoreRejected(dl DeadLetter) error { return d.dead.add([]DeadLetter{dl}) }

// DeadLetters returns up to limit stored dead letters, oldest first.
func (d *Logs) DeadLetters(limit int) ([]DeadLetter, error) { return d.dead.list(limit) }
