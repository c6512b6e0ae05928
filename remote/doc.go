// Package remote copies completed checkpoints to S3-compatible object
// storage and reads them back, so that a device whose disk is lost, or a
// replacement device, can resume from the last uploaded checkpoint
// (docs/DESIGN.md sections 1 and 6).
//
// An Uploader uploads completed checkpoints on its own goroutine, from a
// bounded queue: it never delays processing or local completion, and when
// it falls behind it skips to the newest completed checkpoint and says so.
// A checkpoint's blobs are uploaded first, its manifest last: the manifest
// is the remote completion record, so an uploaded manifest always names
// blobs that are there (invariant I4). Retention mirrors the local store's:
// the newest Retain uploaded checkpoints and the blobs they reference are
// kept, the rest is deleted.
//
// A Device is one device's uploaded checkpoints as a read-only
// checkpoint.Store, for a restore (package recovery): Completed lists them
// newest first and ReadState verifies every blob's size and CRC-32C
// against its handle, so a damaged object fails the restore of its
// checkpoint, which falls back to an older one (invariant I9).
//
// # Bucket layout
//
//	<prefix>/<device>/checkpoints/<id, 20 digits>.json
//	        the manifest: {"format":1,"crc32c":N,"manifest":{...}}, where
//	        crc32c is the CRC-32C of the manifest's JSON as stored
//	<prefix>/<device>/state/<state handle key>
//	        one subtask snapshot, byte for byte as the local store holds it
//
// Blobs shared by an incremental chain are uploaded once per process. An
// upload first reads the blobs it will send into memory (the checkpoint's
// new state: about one snapshot's worth), so that a link slower than the
// local store's retention still gets the checkpoint across.
// Checkpoint ids never repeat on a device (invariant I6), so an object is
// never rewritten with other contents; device names must be unique among
// the agents that share a bucket and prefix.
//
// Credentials are given to Open and never logged or put in errors.
package remote
