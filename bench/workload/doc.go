// Package workload is the standard workload of every figure in
// docs/benchmarks.md: its schema, a deterministic generator, the sources
// of the upsert and merge-insert benchmarks, and the IPC body size of
// batches (the unit of MB/s). It imports Arrow alone, so that sink tests
// and benchmarks use the very same rows without depending on the
// benchmark harness (package bench) or the server.
package workload
