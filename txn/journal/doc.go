// Package journal is the transaction coordinator's write-ahead log: segment
// files of CRC-32C framed records under one directory, appended with group
// commit (concurrent appends share one fdatasync), recovered after a crash
// (a torn tail is truncated, corruption elsewhere is a *CorruptionError),
// kept consistent across failed appends (it recovers once the disk takes
// writes again, and stops when its directory is removed) and compacted by starting a new segment with a snapshot of the live state.
//
// The journal knows frames, not meanings: a Record is a type byte and an
// opaque payload, both defined by package txn. The byte layout is documented
// in docs/journal-format.md; change it only together with that page and the
// version in the segment header.
//
// This package imports nothing of Quiver.
package journal
