// Package wire is the one codec of cairn's binary formats: subtask
// snapshots and the state values in them, channel state, the checkpoint
// store's records and its checkpoint id mark, a sink's state, the ingest
// log's groups, savepoints. A format is a sequence of fields that an
// Encoder appends to a byte slice and a Decoder reads back in the same
// order; the format's own code says which fields, in which order.
//
// The fields:
//
//   - a header: the format's magic (a few bytes naming it) and a version
//     byte. A format's bytes never change within a version: a change is a
//     new version, and its decoder goes on reading the old ones. A format
//     kept inside another, or inside a checksummed record that says what
//     it holds, needs no header of its own;
//   - unsigned and signed varints (encoding/binary's uvarints and zig-zag
//     varints);
//   - bytes and booleans; fixed-width integers, little-endian unless the
//     name says big-endian, and float64s as their IEEE 754 bits,
//     little-endian;
//   - length-prefixed bytes and strings: a uvarint length, then the bytes;
//   - counts: a uvarint that says how many elements follow.
//
// A Decoder never panics and never trusts a length or count beyond its
// input: a length longer than the bytes left, or a count of more elements
// than the bytes left can hold (given the fewest bytes an element takes),
// is an error. Decoding allocates nothing but its errors: the bytes it
// returns alias its input, and a format's decoder, which may allocate for
// the elements of a count and copy what it keeps, allocates no more than
// its input's size allows. Its error is sticky: after the first, every
// read returns a zero value, and the error says what was wrong at which
// byte.
package wire
