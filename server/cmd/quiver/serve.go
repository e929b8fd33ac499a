package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"time"

	"github.com/quiver-ingest/quiver/server"
	"github.com/quiver-ingest/quiver/server/config"
)

// shutdownTimeout is how long serve lets streams drain after SIGINT/SIGTERM.
const shutdownTimeout = 30 * time.Second

// runServe runs the server of --config until ctx ends (main cancels it on
// SIGINT/SIGTERM), then shuts down gracefully. Logs go to stderr; the
// "flight listening" and "http listening" lines carry the bound addresses.
func runServe(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config `FILE` (YAML; see docs/ and examples/quickstart.yaml)")
	cfg, err := loadConfig(fs, args, path)
	if err != nil {
		return err
	}
	srv, err := server.New(cfg, server.Options{
		Logger:          server.NewLogger(stderr, cfg.Log),
		Version:         version,
		ShutdownTimeout: shutdownTimeout,
	})
	if err != nil {
		return err
	}
	return srv.Serve(ctx)
}

// loadConfig parses the flags of serve and check and loads --config.
func loadConfig(fs *flag.FlagSet, args []string, path *string) (*config.Config, error) {
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usageError{errors.New("unexpected arguments: " + fs.Arg(0))}
	}
	if *path == "" {
		return nil, usageError{errors.New("--config FILE is required")}
	}
	return config.Load(*path, server.Sinks())
}
