// Package groupcommit lands the continuous streams of one endpoint in its
// sink (docs/flight.md, "Continuous streams"). Every commit interval, or
// as soon as commit_bytes are staged, the rows all open streams of the
// endpoint wrote on this server are published by one sink commit that
// also records each stream writer's last seq (writers.SeqCommitter), and
// each stream learns how far its writer is durable.
//
// A [Committer] is one endpoint's: its streams write, in turn, into the
// current group's auto-commit key; a loop swaps the group for a fresh one
// and publishes the old one while the next fills. Commits run one at a
// time, so durable seqs only grow; when one falls behind, Write blocks
// once the next group holds commit_bytes (backpressure, never an error for
// load alone).
//
// It knows the writers contract only: not gRPC, not the transaction
// coordinator, not a sink package.
package groupcommit
