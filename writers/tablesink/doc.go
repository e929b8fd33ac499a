// Package tablesink is what Quiver's table sinks (Delta, Lance) share
// around their format packages: a writer's per-key stages (Stages), its
// storage root (Root, OpenPinned, Pins), the staging pipeline (Staged
// encodes a key's rows on a pool of goroutines or inline into Files,
// which keeps a file per partition, rolls it by size and charges what it
// buffers to the memory budget; each file is an Upload, invisible until
// committed) and the commit loop (Commit.Loop: plan again on conflict up
// to a bound, a lost write's unknown outcome wrapped as
// writers.OutcomeUnknownError, every outcome counted). A table sink is a
// format package (deltalog, lancetable) plus an adapter: its data File,
// its admission and partition split, and one commit attempt;
// docs/design.md lists what a new one implements.
//
// The package knows nothing of any format: it imports writers and
// storage alone.
package tablesink
