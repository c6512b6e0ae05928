package ingest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cairn-edge/cairn/seglog"
)

// DeadLetter is a message that could not be decoded, or a record an
// operator rejected, kept with the reason.
type DeadLetter struct {
	// Cause says why there is a dead letter (Cause*); empty in those an
	// older cairn stored, whose cause CauseOf infers.
	Cause string `json:"cause,omitempty"`
	// Operator is the subtask ("id/subtask") that rejected the record;
	// empty for a message its source could not decode.
	Operator string `json:"operator,omitempty"`
	Source   string `json:"source,omitempty"`
	Offset   uint64 `json:"offset"`
	Topic    string `json:"topic"`
	// Payload is the message or record, its first MaxDeadLetterPayload
	// bytes (DeadLetterPayload); Size is its whole length.
	Payload []byte `json:"payload"`
	Size    int    `json:"size,omitempty"`
	Reason  string `json:"reason"`
	// Time is when it was stored; zero in those an older cairn stored.
	Time time.Time `json:"time,omitzero"`
}

// The causes of dead letters (DeadLetter.Cause), in the order cairn
// shows them.
const (
	// CauseUndecodable: a message its source could not decode.
	CauseUndecodable = "undecodable"
	// CauseBadTime: a message whose event time its source refused: ahead
	// of the gateway's clock by more than max_future, behind it by more
	// than max_past, or before min_time (a device clock that is wrong).
	CauseBadTime = "bad_time"
	// CauseDamaged: messages lost to damage in the ingest log.
	CauseDamaged = "damaged"
	// CauseRejected: a record an operator rejected.
	CauseRejected = "rejected"
	// CauseUnpublishable: a record a sink rejected, whose topic no
	// broker takes, or that JSON cannot hold.
	CauseUnpublishable = "unpublishable"
)

// Causes are the causes of dead letters, in the order cairn shows them.
var Causes = []string{CauseUndecodable, CauseBadTime, CauseDamaged, CauseRejected, CauseUnpublishable}

// CauseOf is dl's cause: its own, or for one an older cairn stored
// without, a source's undecodable and an operator's rejected.
func CauseOf(dl *DeadLetter) string {
	switch {
	case dl.Cause != "":
		return dl.Cause
	case dl.Operator == "":
		return CauseUndecodable
	}
	return CauseRejected
}

// MaxDeadLetterPayload is how much of a message or record a dead letter
// keeps: enough to see what was wrong, not so much that a flood of junk
// fills the memory or the flash.
const MaxDeadLetterPayload = 4 << 10

// DeadLetterPayload returns what a dead letter keeps of p (a copy of its
// first MaxDeadLetterPayload bytes) and p's length.
func DeadLetterPayload(p []byte) ([]byte, int) {
	return bytes.Clone(p[:min(len(p), MaxDeadLetterPayload)]), len(p)
}

// StoredDeadLetter is a dead letter and its place in the store: the next
// read from Seq+1 on returns only those stored after it.
type StoredDeadLetter struct {
	Seq uint64
	DeadLetter
}

// ShownDeadLetter is a dead letter as cairn shows it, in one shape on a
// source's dead_letter_topic and in `cairn deadletters --json`
// (agent/api.DeadLetter, which a test holds to it): JSON of lower-case
// fields, the payload as text, or base64 where it is no UTF-8 text.
type ShownDeadLetter struct {
	// Seq is its place in the store; 0 for one not stored (an
	// at-most-once source's).
	Seq uint64 `json:"seq"`
	// Time is when it was stored; absent for those an older cairn stored.
	Time time.Time `json:"time,omitzero"`
	// Cause is why: one of Causes.
	Cause    string `json:"cause"`
	Source   string `json:"source,omitempty"`
	Operator string `json:"operator,omitempty"`
	Topic    string `json:"topic,omitempty"`
	Offset   uint64 `json:"offset,omitempty"`
	Reason   string `json:"reason"`
	// Payload is the message or record as kept: its first
	// MaxDeadLetterPayload bytes, as text, or in base64 where
	// PayloadEncoding says "base64"; PayloadBytes is its whole length.
	Payload         string `json:"payload"`
	PayloadEncoding string `json:"payload_encoding,omitempty"`
	PayloadBytes    int    `json:"payload_bytes"`
}

// Shown is dl as cairn shows it.
func (dl *StoredDeadLetter) Shown() ShownDeadLetter {
	size := dl.Size
	if size == 0 { // stored by an earlier cairn, whole
		size = len(dl.Payload)
	}
	out := ShownDeadLetter{Seq: dl.Seq, Time: dl.Time, Cause: CauseOf(&dl.DeadLetter), Source: dl.Source, Operator: dl.Operator, Topic: dl.Topic,
		Offset: dl.Offset, Reason: dl.Reason, Payload: string(dl.Payload), PayloadBytes: size}
	if !utf8.Valid(dl.Payload) {
		out.Payload, out.PayloadEncoding = base64.StdEncoding.EncodeToString(dl.Payload), "base64"
	}
	return out
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
// record each. A source's dead letters are stored in offset order, and so
// are an operator subtask's of each source log (its input from one log
// comes in log order), so that a replay of the log, which finds the same
// ones again, stores none twice.
type deadLetterStore struct {
	mu     sync.Mutex
	log    *seglog.Log
	stored map[string]uint64 // storedKey → the highest offset stored
	kept   map[string]int64  // cause → dead letters the log holds
	added  map[string]int64  // cause → dead letters stored since it was opened
}

// storedKey is what dead letters are stored in offset order by: their
// source, or the operator subtask and source; "" for those of an operator
// whose origin is not known, which a replay may store again.
func storedKey(dl *DeadLetter) string {
	switch {
	case dl.Operator == "":
		return dl.Source
	case dl.Source != "" && dl.Offset > 0:
		return dl.Operator + "\x00" + dl.Source
	}
	return ""
}

// openDeadLetterLog opens the dead letters' log in the logs directory dir:
// the one place it is opened, for a store or to read (ReadDeadLetters).
func openDeadLetterLog(dir string, opts seglog.Options) (*seglog.Log, error) {
	opts.SegmentBytes = deadLetterSegment
	l, err := seglog.Open(filepath.Join(dir, deadLetterDir), opts)
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	return l, nil
}

// openDeadLetters opens the dead letters' store in the logs directory dir.
func openDeadLetters(dir string, opts seglog.Options) (*deadLetterStore, error) {
	l, err := openDeadLetterLog(dir, opts)
	if err != nil {
		return nil, err
	}
	d := &deadLetterStore{log: l, stored: make(map[string]uint64), added: make(map[string]int64)}
	if err := d.scan(true); err != nil {
		l.Close()
		return nil, err
	}
	return d, nil
}

// scan reads the log through, counting what it keeps by cause, and, if
// keys, noting the offsets stored by key.
func (d *deadLetterStore) scan(keys bool) error {
	d.kept = make(map[string]int64)
	var bad error
	err := d.log.Read(d.log.First(), func(r seglog.Record) bool {
		if r.Damage != "" {
			return true // lost, and logged as such
		}
		var dl DeadLetter
		if bad = json.Unmarshal(r.Data, &dl); bad != nil {
			return false
		}
		d.kept[CauseOf(&dl)]++
		if k := storedKey(&dl); keys && k != "" {
			d.stored[k] = max(d.stored[k], dl.Offset)
		}
		return true
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return fmt.Errorf("dead letters: %w", err)
	}
	return nil
}

// counts returns, by cause, the dead letters the store keeps and those it
// stored since it was opened.
func (d *deadLetterStore) counts() (kept, added map[string]int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.kept), maps.Clone(d.added)
}

// add stores the dead letters not stored yet, durably, and returns those
// it stored.
func (d *deadLetterStore) add(dls []DeadLetter) ([]StoredDeadLetter, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var added []StoredDeadLetter
	now := time.Now().UTC()
	for _, dl := range dls {
		k := storedKey(&dl)
		if stored, ok := d.stored[k]; ok && k != "" && dl.Offset <= stored {
			continue
		}
		dl.Time = now
		v, err := json.Marshal(dl)
		if err != nil {
			return nil, err
		}
		seq, err := d.log.Append(1, v)
		if err != nil {
			return nil, fmt.Errorf("storing dead letters: %w", err)
		}
		added = append(added, StoredDeadLetter{Seq: seq, DeadLetter: dl})
	}
	if len(added) == 0 {
		return nil, nil
	}
	if err := d.log.Sync(); err != nil {
		return nil, fmt.Errorf("storing dead letters: %w", err)
	}
	for _, dl := range dls {
		if k := storedKey(&dl); k != "" {
			d.stored[k] = max(d.stored[k], dl.Offset)
		}
	}
	for _, dl := range added {
		d.kept[CauseOf(&dl.DeadLetter)]++
		d.added[CauseOf(&dl.DeadLetter)]++
	}
	first := d.log.First()
	if err := d.log.TrimTo(maxDeadLetterBytes); err != nil {
		return added, err
	}
	if d.log.First() != first { // the oldest went: count what is left
		return added, d.scan(false)
	}
	return added, nil
}

// list returns up to limit dead letters from seq from on (from the oldest
// kept, if those before from are gone), oldest first.
func (d *deadLetterStore) list(from uint64, limit int) ([]StoredDeadLetter, error) {
	return listDeadLetters(d.log, from, limit)
}

func listDeadLetters(l *seglog.Log, from uint64, limit int) ([]StoredDeadLetter, error) {
	var out []StoredDeadLetter
	var bad error
	err := l.Read(max(from, l.First()), func(r seglog.Record) bool {
		if r.Offset < from || r.Damage != "" {
			return true
		}
		dl := StoredDeadLetter{Seq: r.Offset}
		if bad = json.Unmarshal(r.Data, &dl.DeadLetter); bad != nil {
			bad = fmt.Errorf("dead letter %d: %w", r.Offset, bad)
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

// DeadLetterCounts returns, by cause (Causes), the dead letters kept in
// the logs' store, which `cairn deadletters` lists, and those stored since
// the logs were opened.
func (d *Logs) DeadLetterCounts() (kept, added map[string]int64) { return d.dead.counts() }

// StoreDeadLetters stores dead letters durably (one sync), and returns
// those it stored: a replay stores each of a source once.
func (d *Logs) StoreDeadLetters(dls []DeadLetter) ([]StoredDeadLetter, error) { return d.dead.add(dls) }

// StoreRejected stores, durably, a dead letter of an operator
// (DeadLetter.Operator set) whose record came from origin
// (graph.Record.Origin): its source log, offset and topic are filled in
// from it. One a replay after a crash rejects again is not stored again,
// but for a record whose origin is not known.
func (d *Logs) StoreRejected(dl DeadLetter, origin uint64) error {
	if origin != 0 {
		dl.Source, dl.Offset, dl.Topic, _ = d.Origin(origin)
	}
	_, err := d.dead.add([]DeadLetter{dl})
	return err
}

// DeadLetters returns up to limit stored dead letters from seq from on,
// oldest first.
func (d *Logs) DeadLetters(from uint64, limit int) ([]StoredDeadLetter, error) {
	return d.dead.list(from, limit)
}

// ReadDeadLetters is Logs.DeadLetters for the logs directory dir of an
// agent that is not running: the caller must hold its data directory's
// lock (a running agent writes the log's tail). It only reads: a torn
// tail is the agent's to cut when it starts.
func ReadDeadLetters(dir string, from uint64, limit int) ([]StoredDeadLetter, error) {
	if _, err := os.Stat(filepath.Join(dir, deadLetterDir)); errors.Is(err, os.ErrNotExist) {
		return nil, nil // none stored yet
	}
	// Read-only: whoever reads (root, perhaps) writes nothing into the
	// agent's directory, nor mends a torn tail that the agent mends itself.
	l, err := openDeadLetterLog(dir, seglog.Options{ReadOnly: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return listDeadLetters(l, from, limit)
}
