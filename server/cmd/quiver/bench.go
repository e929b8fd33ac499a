package main

import (
	"context"
	"io"

	"github.com/quiver-ingest/quiver/bench"
	"github.com/quiver-ingest/quiver/bench/scenario/ingest"
)

// runBench runs the ingest scenario of quiverbench (the other scenarios
// need test support the quiver binary does not link: run quiverbench).
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return bench.Main(ctx, args, stdout, stderr, ingest.Scenario())
}
