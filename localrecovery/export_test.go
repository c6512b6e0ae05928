package localrecovery

import (
	"bytes"
	"encoding/binary"
	"errors"

	bolt "go.etcd.io/bbolt"
)

// Damage helpers for tests that play a disk that went wrong; the store must
// be closed.

// FlipNewestBlob flips one bit in the middle of the first chunk of the
// newest completed checkpoint's first snapshot, and returns the checkpoint's
// id.
func FlipNewestBlob(path string) (uint64, error) {
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var id uint64
	err = db.Update(func(tx *bolt.Tx) error {
		k, v := tx.Bucket(bucketCheckpoints).Cursor().Last()
		if k == nil {
			return errors.New("no completed checkpoint")
		}
		m, err := decodeRecord(v)
		if err != nil {
			return err
		}
		id = m.ID
		a := m.Subtasks[0]
		snap := tx.Bucket(bucketSnapshots).Bucket(blobPrefix(m.ID, a.Task.String())).Bucket([]byte{0, 0, 0, 0})
		if snap == nil {
			return errors.New("no state to flip")
		}
		key := binary.BigEndian.AppendUint32(nil, 0)
		chunk := bytes.Clone(snap.Get(key))
		if len(chunk) == 0 {
			return errors.New("no state to flip")
		}
		chunk[len(chunk)/2] ^= 0x08
		return snap.Put(key, chunk)
	})
	return id, err
}

// DeleteNewestRecord deletes the newest completion record and returns its
// checkpoint's id.
func DeleteNewestRecord(path string) (uint64, error) {
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var id uint64
	err = db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketCheckpoints).Cursor()
		k, _ := c.Last()
		if k == nil {
			return errors.New("no completed checkpoint")
		}
		id = binary.BigEndian.Uint64(k)
		return c.Delete()
	})
	return id, err
}

// UsedBytes is how much of the file the store's pages use.
func UsedBytes(path string) (int64, error) {
	m, err := checkFile(path)
	return int64(m.highPage) * int64(m.pageSize), err
}
