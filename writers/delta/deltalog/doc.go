// Package deltalog is the Delta Lake transaction-log protocol as a library:
// actions and their NDJSON commit encoding, log replay into a Snapshot
// (JSON commits, classic and multi-part Parquet checkpoints,
// _last_checkpoint as a hint), table-feature gating (CheckReadable,
// CheckWritable), table creation, optimistic-concurrency commits with the
// conflict rules of Delta's optimistic concurrency, Parquet checkpoints,
// Arrow ⇄ Delta type mapping, per-file statistics JSON, partition-value /
// path encoding, and deletion vectors (reading every stored form, writing
// deletion-vector files; Z85 and portable roaring64, byte-compatible with
// Spark's).
//
// Storage is reached through the small Store interface, which
// *storage.Bucket satisfies. Nothing in this package keeps state between
// calls: a *Snapshot is immutable once returned and may be shared by
// goroutines; Update returns a new Snapshot.
//
// Errors wrap one writers error class: ErrUnsupported (a table feature
// Quiver lacks) and malformed input wrap writers.ErrInvalid, a missing table
// wraps writers.ErrNotFound, a lost commit race that cannot be rebased wraps
// writers.ErrConflict (*ConflictError carries the details), and storage
// failures wrap writers.ErrUnavailable.
package deltalog
