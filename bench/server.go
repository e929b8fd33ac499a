package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/quiver-ingest/quiver/server"
	"github.com/quiver-ingest/quiver/server/config"
)

// stopTimeout bounds Stop's graceful shutdown.
const stopTimeout = time.Minute

// Start serves Quiver in process with every registered sink: Flight and
// HTTP on 127.0.0.1:0 (see FlightAddr), the journal in dataDir, warn-level
// logs, and the endpoints given as YAML list items (each starting
// "  - "). dir is the folder the configuration is read relative to. The
// caller stops the server with Stop.
func Start(ctx context.Context, dir, dataDir, endpoints string) (*server.Server, error) {
	return StartWith(ctx, dir, dataDir, "", endpoints)
}

// StartWith is Start with more top-level YAML (whole lines, such as
// "limits: {max_message_bytes: 4MiB}\n").
func StartWith(ctx context.Context, dir, dataDir, top, endpoints string) (*server.Server, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\nhttp_listen: 127.0.0.1:0\ndata_dir: %s\nlog: {level: warn}\n%sendpoints:\n", dataDir, top)
	b.WriteString(endpoints)
	reg := server.Sinks()
	cfg, err := config.Parse([]byte(b.String()), dir, reg)
	if err != nil {
		return nil, err
	}
	srv, err := server.New(cfg, server.Options{Sinks: reg})
	if err != nil {
		return nil, err
	}
	if err := srv.Start(ctx); err != nil {
		return nil, err
	}
	return srv, nil
}

// Stop shuts srv down gracefully, within a minute, even when ctx is
// already cancelled (an interrupted benchmark still flushes and closes
// its sinks).
func Stop(ctx context.Context, srv *server.Server) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	return srv.Shutdown(sctx)
}

// startDiscard serves Quiver in process (Start) with one discard endpoint
// called endpoint, its journal in a temporary folder. stop shuts it down
// and removes the folder.
func startDiscard(ctx context.Context, endpoint string) (addr string, stop func() error, err error) {
	dir, err := os.MkdirTemp("", "quiverbench-")
	if err != nil {
		return "", nil, fmt.Errorf("bench: in-process quiver: %w", err)
	}
	srv, err := Start(ctx, dir, filepath.Join(dir, "data"), fmt.Sprintf("  - {name: %q, sink: discard}\n", endpoint))
	if err != nil {
		return "", nil, errors.Join(fmt.Errorf("bench: in-process quiver: %w", err), os.RemoveAll(dir))
	}
	return srv.FlightAddr(), func() error { return errors.Join(Stop(ctx, srv), os.RemoveAll(dir)) }, nil
}
