// Package bench is Quiver's load generator: the standard workload (the
// schema and deterministic generator every measured figure in
// docs/benchmarks.md uses), N concurrent DoPut streams through the Go
// client, and a bare arrow-go Flight server that decodes and drops every
// batch, measured in the same run as the baseline.
//
// Main is the one entry point of both `quiverbench` (bench/cmd/quiverbench)
// and `quiver bench`. With no --addr, Main starts Quiver in process (the
// Flight service, a coordinator on a temporary journal and one discard
// endpoint), which is why this package imports flightsvc, txn and
// writers/discard besides clients/go; with --addr it drives any running
// server.
//
// --scenario selects another benchmark than ingestion: a Scenario the
// command passes to Main (quiverbench passes the Lance merge-insert one,
// writers/lance/mergebench, and the Delta upsert one,
// writers/delta/upsertbench, which need the whole server and so cannot
// live here).
//
// The sink benchmarks (bench/cmd/deltabench, kafkabench,
// writers/delta/upsertbench, writers/lance/mergebench) use its workload and the small helpers they
// share: ParseStreams, Median and MedianBy, NewTable, ReleaseAll,
// TotalIPCBodyBytes, WithIDs and MergeSource (the merge benchmark's
// sources); bench/benchkit holds their in-process server, peak RSS and
// command plumbing.
package bench
