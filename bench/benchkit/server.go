// Package benchkit starts the full Quiver server in process for the sink
// benchmarks (bench/cmd/deltabench, kafkabench, writers/delta/upsertbench,
// writers/lance/mergebench) and measures their peak RSS. It is apart
// from package bench because it imports server, which imports every sink,
// while the sinks' own in-package tests (writers/delta, writers/parquetio)
// import bench for the standard workload: bench importing server would be
// an import cycle.
package benchkit

import (
	"context"
	"fmt"
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
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\nhttp_listen: 127.0.0.1:0\ndata_dir: %s\nlog: {level: warn}\nendpoints:\n", dataDir)
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
