// Package deltalog is the Delta Lake transaction-log protocol as a library:
// actions and their NDJSON commit encoding, log replay into a Snapshot
// (JSON commits, classic and multi-part Parquet checkpoints, V2
// checkpoints and their sidecars, _last_checkpoint as a hint), table-feature
// gating (CheckReadable, CheckWritable), table creation, optimistic-concurrency
// commits with the conflict rules of Delta's optimistic concurrency,
// checkpoints, log cleanup (ExpiredLogFiles), the table schema and its Arrow ⇄
// Delta type mapping, column mapping, identity columns, constraints and row
// tracking as the log states them, reading per-file statistics and add.path
// encoding.
//
// What it leaves to others: deletion-vector files are package dv
// (deltalog/dv), which imports this one; how a writer lays rows out as data
// files (partition values and directories, statistics JSON and which
// columns carry it) is package deltalayout. This package must not import
// either, nor writers/delta, flightsvc, server or txn.
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
