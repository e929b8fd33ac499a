package main

import (
	"context"
	"io"

	"github.com/quiver-ingest/quiver/bench"
)

// runBench runs the benchmark harness, the same program as quiverbench.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return bench.Main(ctx, args, stdout, stderr)
}
