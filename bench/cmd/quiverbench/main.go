// Command quiverbench measures Quiver's ingestion throughput and latency
// with the standard workload, optionally against a bare arrow-go Flight
// server in the same run (--baseline). Run it with
//
//	go run ./bench/cmd/quiverbench --baseline --streams 1,4
//
// It is the same program as `quiver bench`; see package bench for the
// flags and docs/benchmarks.md for what the numbers mean.
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
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := bench.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "quiverbench:", err)
		os.Exit(1)
	}
}
