// Package bench is the harness of Quiver's benchmarks: Main, the command
// line of quiverbench and `quiver bench`, which runs one Scenario (each a
// package of bench/scenario) picked by --scenario; the load driver Run (N
// concurrent DoPut streams of the standard workload through the Go client,
// with throughput and ack latencies); a bare arrow-go Flight server that
// decodes and drops every batch, measured in the same run as the
// baseline; Start, which serves Quiver in process through the same server
// assembly as the quiver binary (package server: every sink, the
// interceptors, the coordinator); and the small helpers scenarios share
// (Median, MedianBy, NewTable, TempDir, PeakRSS).
//
// The workload itself is package bench/workload, which imports Arrow
// alone so that sink tests can use it.
package bench
