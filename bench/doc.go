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
// The sink benchmarks (bench/cmd/deltabench, kafkabench, upsertbench) use
// its workload and the small helpers they share: ParseStreams, Median and
// MedianBy, NewTable, ReleaseAll and TotalIPCBodyBytes; bench/benchkit
// holds their in-process server and command plumbing.
package bench
