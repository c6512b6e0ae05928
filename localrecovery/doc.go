// Package localrecovery will keep checkpoints in one bbolt file under the
// data directory: snapshot blobs in checksummed chunks, completion records
// written last, the persisted id counter, retention, incremental chains, and
// the choice of the newest intact checkpoint to restore (DESIGN.md sections
// 2 and 4). It implements checkpoint.Store.
//
// Not built yet; see the issue "Local checkpoints in bbolt".
package localrecovery
