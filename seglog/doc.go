// Package seglog is an append-only log of checksummed records in segment
// files, shaped for flash storage: appends go to the end of one file, a
// Sync is one fdatasync of it, and the front of the log is dropped by
// deleting whole files. Nothing is ever rewritten in place, so the only
// page a sync writes again is the one the previous sync left half full.
//
// Every record covers one or more consecutive offsets (a record may hold a
// group of messages). Offsets start where the log was created (Reset) and
// only grow.
//
// # Files
//
// A log is a directory of segments named by their first offset,
// <first:20 digits>.seg. A segment starts with a 20-byte header:
//
//	magic "CRNL", version 1, three zero bytes,
//	first offset (8 bytes, little-endian), CRC-32C of the 16 bytes before
//
// and holds records one after the other, each framed as
//
//	length of the data (4 bytes LE), CRC-32C (4 bytes LE),
//	offset of the record (8 bytes LE), count of offsets (uvarint), data
//
// where the checksum covers everything after it: offset, count and data. A
// record whose checksum fails is never returned.
//
// # Durability and power cuts
//
// Append hands records to the operating system; Sync makes everything
// appended durable (fdatasync, and an fsync of the directory after a new
// segment was created) and only then lets readers see it. A segment is
// synced before the next one is created, so after a power cut only the
// newest segment can end in a torn write: bytes at its end that do not
// verify, followed by none that do. Open cuts them, and logs the cut as a
// warning: nothing in them was synced, so nothing was acknowledged. A
// newest segment whose header does not verify, with no record after it
// that does, was created and cut off before its first sync: holding no
// more than the start of its header and zeros, it is removed; holding
// other bytes (a file put there, bit rot), it is set aside untouched as
// <name>.damaged-N, which is no segment's name. Either way, as a warning.
// A failed write or sync rolls the log back to its last sync (the kernel
// may have dropped the pages of a failed fdatasync), so a retry never
// leaves the same data twice.
//
// # Damage in the middle of a log
//
// Bytes that do not verify followed by a record that does, or anywhere in
// a segment before the newest (which was synced whole before the next one
// was made), are damage, not a torn write: bit rot, a sector lost. The
// log reads past them: a Read returns the offsets their records held as
// one Record with Damage set, then the records after, which resynchronise
// at the first frame that verifies and covers the offsets due. A segment
// that ends before the next begins (cut short, or the file removed) loses
// the offsets between the same way. Open cuts nothing for damage. Each
// range lost is logged as an error and told to Options.OnDamage once. A
// segment header that does not verify is damage too, and its records are
// read by their own checksums from the offset the file's name gives; a
// header that verifies and names another format or offset is no segment
// of this log, and fails Open with ErrCorrupt.
//
// # Wear
//
// A Meter counts what the log makes the kernel write back, in 4 KiB pages as
// the kernel counts a process's writes (/proc/PID/io write_bytes): the
// pages an append dirties that the previous sync cleaned, and the syncs.
package seglog
