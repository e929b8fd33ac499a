// Package lance is the Lance sink (`sink: lance`): it appends Arrow
// batches to a Lance dataset (file format 2.0) that LanceDB reads, or
// merges them into it (merge_insert, Lance's semantics), with exactly-once
// transactions.
//
// Write admits a stream's schema with Lance's own column-name rules
// (names.go) and stages its rows. Precommit finishes the key's data files (durable under data/, invisible:
// no manifest names them) and returns a JSON descriptor of the new
// fragments. Commit publishes every descriptor's fragments in one Lance
// Append version (the dataset's first version, an Overwrite, when the
// commit creates it: a dataset is created by the commit that publishes its
// first rows, never by a write) whose transaction properties record quiver.writer and
// quiver.epoch. Commit reads those properties back through the version
// history, so a replayed epoch changes nothing. Lost commit races are
// rebased by lancetable when Lance's conflict rules allow it.
//
// In mode merge_insert, Write buffers the transaction's source (hashing
// its keys as it arrives) and Precommit runs the merge against the latest
// version: it finds the target rows of the source keys in the endpoint's
// key index (keyindex.go: built once from the key columns, synced to
// other writers' commits, patched by its own commits, indexpatch.go),
// decides each source row as Lance's full-schema merge-insert executor
// does (mergeplan.go), writes updated and inserted rows as new fragments
// and the touched fragments' merged deletion files, and describes them.
// Commit publishes one Lance Update version after checking that every
// fragment the merge replaces or drops is unchanged since the precommit.
//
// Maintenance: Optimize compacts small fragments and materializes
// deletions in one Lance Rewrite version, as Lance's compaction plans it,
// leaving indexed fragments and those a precommitted merge touched
// (pins.go) alone; Vacuum removes old versions as cleanup_old_versions.
// See docs/lance.md.
package lance
