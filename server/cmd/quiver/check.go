package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/quiver-ingest/quiver/internal/redact"
	"github.com/quiver-ingest/quiver/server"
)

// runCheck validates --config and probes every endpoint's sink without
// opening or writing anything. It prints one line per endpoint,
// "ok  NAME (SINK)" or "FAIL NAME (SINK): ERROR", and fails unless every
// probe passed. A config error is printed instead (by main) and fails.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config `FILE` to check")
	timeout := fs.Duration("timeout", 30*time.Second, "give up probing after this long")
	cfg, err := loadConfig(fs, args, path)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	results, err := server.Check(ctx, cfg, server.Options{})
	if err != nil {
		return err
	}
	failed := 0
	for _, r := range results {
		if r.Err != nil {
			failed++
			fmt.Fprintf(stdout, "FAIL %s (%s): %s\n", r.Endpoint, r.Sink, redact.Text(r.Err.Error()))
			continue
		}
		fmt.Fprintf(stdout, "ok  %s (%s)\n", r.Endpoint, r.Sink)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d endpoints failed their probe", failed, len(results))
	}
	return nil
}
