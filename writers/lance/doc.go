// Package lance is the Lance sink (`sink: lance`): it appends Arrow
// batches to a Lance dataset (file format 2.0) that LanceDB reads, with
// exactly-once transactions.
//
// Precommit finishes the key's data files (durable under data/, invisible:
// no manifest names them) and returns a JSON descriptor of the new
// fragments. Commit publishes every descriptor's fragments in one Lance
// Append version (the dataset's first version, an Overwrite, when the
// commit creates it) whose transaction properties record quiver.writer and
// quiver.epoch. Commit reads those properties back through the version
// history, so a replayed epoch changes nothing. Lost commit races are
// rebased by lanceformat when Lance's conflict rules allow it.
//
// Only mode append is implemented; merge_insert is validated but refused
// until the Lance part 2 issue lands. See docs/lance.md.
package lance
