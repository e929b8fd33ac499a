// Package deltalayout is how a writer lays rows out as Delta data files:
// partition values as add.partitionValues spells them and the Hive-style
// directories they name (FormatPartitionValue, ParsePartitionValue,
// PartitionDir), the add.stats JSON of a file (BuildStats) and the columns
// whose statistics the table's files carry (StatsColumnsOf).
//
// It imports deltalog for the table schema and error classes; deltalog
// must not import it. It must not import writers/delta, flightsvc, server
// or txn.
package deltalayout
