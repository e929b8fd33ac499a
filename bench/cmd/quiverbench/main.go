// Command quiverbench measures Quiver's ingestion throughput and latency
// with the standard workload, optionally against a bare arrow-go Flight
// server in the same run (--baseline). Run it with
//
//	go run ./bench/cmd/quiverbench --baseline --streams 1,4
//
// --scenario merge-insert measures the Lance sink's merge_insert against
// LanceDB's mergeInsert instead (package writers/lance/mergebench; needs
// node and npm):
//
//	go run ./bench/cmd/quiverbench --scenario merge-insert --base-rows 2000000 --merge-rows 200000
//
// --scenario upsert measures the Delta sink's upsert, copy-on-write and
// with deletion vectors (package writers/delta/upsertbench; --lancedb
// adds LanceDB's mergeInsert of the same changelog, needing node and npm):
//
//	go run ./bench/cmd/quiverbench --scenario upsert --table-rows 2000000 --change-rows 200000 --lancedb
//
// The ingest scenario is the same program as `quiver bench`; see package
// bench for the flags and docs/benchmarks.md for what the numbers mean.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/quiver-ingest/quiver/bench"
	"github.com/quiver-ingest/quiver/writers/delta/upsertbench"
	"github.com/quiver-ingest/quiver/writers/lance/mergebench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := bench.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, mergebench.Scenario(), upsertbench.Scenario())
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "quiverbench:", err)
		os.Exit(1)
	}
}
