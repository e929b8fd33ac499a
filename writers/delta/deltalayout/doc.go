// Package deltalayout is how a batch of rows becomes Delta data files:
// the table's column mapping between logical and physical names and
// widened types (ColumnMap, CheckMappedColumns), splitting rows by
// partition and the values and Hive-style directories of partitions
// (Partitioner, FormatPartitionValue, ParsePartitionValue, PartitionDir),
// identity column values (IdentityAllocator, IdentityFill), CHECK
// constraints and invariants checked on the rows (Layout.CheckRows),
// row tracking's materialized columns (RowTracking), column names Delta
// accepts (CheckNames), the schema of incoming rows against the table's
// (Reconcile) and rows conformed to a file schema (Conform), and the
// add.stats JSON of a file (FileStatsJSON, BuildStats) for the columns the
// table collects statistics of (StatsColumnsOf). Layout gathers what one
// Delta schema's files need.
//
// It holds no state of a writer beyond the identity values one hands out.
// It imports deltalog for the table schema, actions and error classes;
// deltalog must not import it. It must not import writers/delta,
// flightsvc, server or txn.
package deltalayout
