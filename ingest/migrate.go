package ingest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cairn-edge/cairn/seglog"
)

// MigrateBoltLogs moves the ingest logs and dead letters that cairn kept in
// one bbolt file (ingest.db, before the segmented logs) into the logs
// directory dir, keeping every message at its offset, and removes the file.
// It does nothing without the file. The new logs are made as
// seglog.MoveInto makes a directory, safe across a crash; a file written
// to after it was moved (by an older cairn) is an error, not removed. It
// reports whether it moved anything.
func MigrateBoltLogs(dbPath, dir string, opts LogOptions) (bool, error) {
	moved, err := seglog.MoveInto(dbPath, dir, func(tmp string) error {
		db, err := bolt.Open(dbPath, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
		if err != nil {
			return err
		}
		defer db.Close()
		logs, err := OpenLogs(tmp, opts)
		if err != nil {
			return err
		}
		err = db.View(func(tx *bolt.Tx) error { return migrateBolt(tx, logs) })
		return errors.Join(err, logs.Close())
	})
	if err != nil {
		return false, fmt.Errorf("moving the ingest log %s into %s: %w", dbPath, dir, err)
	}
	if err := os.Remove(dbPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return moved, err
	}
	return moved, nil
}

// The bbolt file's layout: a bucket per log of 8-byte big-endian offsets
// to messages (encodeBoltMessage); in boltLogMeta the offset each log was
// truncated to; in boltDeadLetters the dead letters as JSON.
var (
	boltLogMeta     = []byte("log-meta")
	boltDeadLetters = []byte("dead-letters")
)

// migrateBolt copies every log and the dead letters of tx into logs.
func migrateBolt(tx *bolt.Tx, logs *Logs) error {
	meta := tx.Bucket(boltLogMeta)
	return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		switch {
		case bytes.Equal(name, boltLogMeta):
			return nil
		case bytes.Equal(name, boltDeadLetters):
			var dls []DeadLetter
			err := b.ForEach(func(_, v []byte) error {
				var dl DeadLetter
				if err := json.Unmarshal(v, &dl); err != nil {
					return fmt.Errorf("a dead letter: %w", err)
				}
				dls = append(dls, dl)
				return nil
			})
			if err != nil {
				return err
			}
			_, err = logs.StoreDeadLetters(dls)
			return err
		}
		l, err := logs.Log(string(name))
		if err != nil {
			return err
		}
		first := uint64(1)
		if meta != nil {
			if v := meta.Get(name); len(v) == 8 {
				first = max(first, binary.BigEndian.Uint64(v))
			}
		}
		c := b.Cursor()
		if k, _ := c.First(); len(k) == 8 {
			first = max(first, binary.BigEndian.Uint64(k))
		}
		if err := l.SkipTo(first); err != nil {
			return err
		}
		// Groups of messages logged together (the same receipt time).
		var group []Message
		next := first
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(k) != 8 || binary.BigEndian.Uint64(k) != next {
				return fmt.Errorf("log %s: key %x where offset %d was due", name, k, next)
			}
			m, err := decodeBoltMessage(v)
			if err != nil {
				return fmt.Errorf("log %s at %d: %w", name, next, err)
			}
			if len(group) > 0 && (len(group) == 1000 || !m.Received.Equal(group[0].Received)) {
				if err := l.write(group); err != nil {
					return err
				}
				group = group[:0]
			}
			group = append(group, m)
			next++
		}
		if err := l.write(group); err != nil {
			return err
		}
		if err := l.seg.Sync(); err != nil {
			return err
		}
		if l.Next() != next {
			return fmt.Errorf("log %s: migrated up to offset %d, want %d", name, l.Next(), next)
		}
		return nil
	})
}

// decodeBoltMessage decodes a message of the bbolt file: packet id (2
// bytes), payload sum (8, unused now), receipt time in Unix nanoseconds
// (8), topic length (2), topic, payload; all big-endian. The payload
// points into v.
func decodeBoltMessage(v []byte) (Message, error) {
	if len(v) < 20 {
		return Message{}, errors.New("short message record")
	}
	tl := int(binary.BigEndian.Uint16(v[18:]))
	if len(v) < 20+tl {
		return Message{}, errors.New("short message record")
	}
	return Message{
		PacketID: binary.BigEndian.Uint16(v),
		Received: time.Unix(0, int64(binary.BigEndian.Uint64(v[10:]))).Truncate(time.Millisecond),
		Topic:    string(v[20 : 20+tl]),
		Payload:  v[20+tl:],
	}, nil
}
