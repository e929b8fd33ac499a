// Package tablesink is what Quiver's table sinks (Delta, Lance) share
// around their format packages: a writer's per-key stages (Stages), its
// storage root (OpenRoot, Probe) and the commit loop (Commit.Loop: plan
// again on conflict up to a bound, a lost write's unknown outcome wrapped
// as writers.OutcomeUnknownError, every outcome counted). A table sink is
// a format package (deltalog, lanceformat) plus an adapter that stages
// files per key and plans one commit attempt; docs/design.md lists what a
// new one implements.
//
// The package knows nothing of any format: it imports writers and
// storage alone.
package tablesink
