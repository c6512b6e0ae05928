// Package boltcheck is for tests of cairn's checkpoint store, a bbolt
// file (<data_dir>/checkpoints.db): bbolt's consistency check of the file
// that a restart opens, and the damage the recovery tests do to it.
package boltcheck

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Check runs bbolt's consistency check (Tx.Check) on the file at path,
// opened read-only; nil if there is no file. Call it when no agent has
// the file open to write.
func Check(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		if len(errs) > 0 {
			return fmt.Errorf("%s fails bbolt's check: %w", path, errors.Join(errs...))
		}
		return nil
	})
}

// CutToHalf truncates the file at path to half the pages its newest
// transaction uses, as a copy that stopped half way would leave it.
func CutToHalf(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return err
	}
	var size int64
	ps := int64(db.Info().PageSize)
	err = db.View(func(tx *bolt.Tx) error {
		size = tx.Size()
		return nil
	})
	db.Close()
	if err != nil {
		return err
	}
	return os.Truncate(path, size/2/ps*ps)
}

// FlipNewest flips a bit in the middle of the largest value of the last
// top-level bucket, in key order, that holds a value of 64 bytes or more:
// in cairn's store, a snapshot's chunk or the completion record of the
// newest checkpoint, whose checksum then fails.
func FlipNewest(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return err
	}
	var value []byte
	err = db.View(func(tx *bolt.Tx) error {
		c := tx.Cursor()
		for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
			b := tx.Bucket(k)
			if b == nil {
				continue
			}
			b.ForEach(func(_, v []byte) error {
				if len(v) > len(value) {
					value = bytes.Clone(v)
				}
				return nil
			})
			if len(value) >= 64 {
				return nil
			}
			value = nil
		}
		return errors.New("no value to flip")
	})
	db.Close()
	if err != nil {
		return err
	}
	// Where the value is in the file (bbolt copies an inline bucket's
	// values that are not aligned, so their pointers may not tell).
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	at := bytes.Index(data, value)
	if at < 0 || bytes.Contains(data[at+1:], value) {
		return errors.New("the value to flip is not in the file once")
	}
	data[at+len(value)/2] ^= 0x08
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data[at+len(value)/2:at+len(value)/2+1], int64(at+len(value)/2))
	return errors.Join(err, f.Close())
}
