// Package delta is the Delta Lake sink (`sink: delta`): it lands an
// endpoint's rows in a Delta table as Parquet data files and commits to
// the table's _delta_log, with exactly-once transactions through Delta's
// txn action. docs/delta.md describes its configuration and behaviour.
//
// Data flow: Write checks each stream's schema (column names:
// deltalayout.CheckNames) against the table, or against the table its
// first commit would create when it is missing (a table is created by the
// commit that publishes its first rows, never by a write), splits batches
// by partition (deltalayout.Partitioner) and hands them to the key's
// encoder goroutines (tablesink.Staged, write.go), which encode them into
// Parquet files (stage.go) streamed to storage (parquetio,
// tablesink.Upload), rolling files at target_file_bytes. Upserts
// (upsert.go, upsertmerge.go) match the changelog's keys against the
// table's files with package deltaupsert and write through the same
// stages. Precommit finishes the files and returns a self-contained JSON
// descriptor of their add actions (descriptor.go); Commit publishes any
// number of descriptors in one Delta commit with the writer's txn, through
// deltalog's optimistic concurrency. Optimize and Vacuum (optimize.go,
// vacuum.go) maintain the table.
//
// What it owns: the sink config, staging per key, the descriptor format,
// commit planning and maintenance. How rows become data files (column
// mapping, partitions, identity columns, constraints, row tracking, schema
// reconciliation, statistics) is package deltalayout; the upsert's key
// matching is package deltaupsert; the Delta protocol itself (log replay,
// commit files, conflicts, checkpoints, type mapping, stats parsing and
// path encoding) is package deltalog, and deletion-vector files package
// deltalog/dv; Parquet encoding is writers/parquetio; object storage is
// writers/storage. It must not import flightsvc, txn or server.
package delta
