package server

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quiver-ingest/quiver/flightsvc"
	"github.com/quiver-ingest/quiver/server/config"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/kafka/embedded"
)

// buildEndpoints builds every endpoint's writer, unopened. Each writer gets
// a logger and a registerer carrying its endpoint's name.
func buildEndpoints(cfg *config.Config, sinks *writers.Registry, logger *slog.Logger, reg prometheus.Registerer, alloc memory.Allocator) ([]flightsvc.Endpoint, error) {
	eps := make([]flightsvc.Endpoint, 0, len(cfg.Endpoints))
	for _, e := range cfg.Endpoints {
		sink, err := sinks.Lookup(e.Sink)
		if err != nil {
			return nil, fmt.Errorf("server: endpoint %q: %w", e.Name, err)
		}
		w, err := sink.New(e.Settings, writers.Env{
			Endpoint:   e.Name,
			ConfigDir:  cfg.Dir,
			DataDir:    cfg.DataDir,
			Logger:     logger.With("endpoint", e.Name),
			Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"endpoint": e.Name}, reg),
			Allocator:  alloc,
		})
		if err != nil {
			return nil, fmt.Errorf("server: endpoint %q (sink %s): %w", e.Name, e.Sink, err)
		}
		eps = append(eps, flightsvc.Endpoint{Name: e.Name, Sink: e.Sink, Mode: e.Settings.Mode(), Writer: w})
	}
	return eps, nil
}

// CheckResult is the outcome of probing one endpoint's sink.
type CheckResult struct {
	Endpoint string
	Sink     string
	// Err is nil when the probe passed.
	Err error
}

// Check probes cfg without serving anything, for `quiver check`: the TLS
// files load, and every endpoint's writer builds and passes Writer.Check.
// Writers are never opened, so nothing is written. A TLS problem is the
// returned error; endpoint problems are in the results, one per endpoint in
// config order. ctx bounds the probes.
func Check(ctx context.Context, cfg *config.Config, opts Options) ([]CheckResult, error) {
	opts = opts.withDefaults()
	if _, err := tlsConfig(cfg.TLS); err != nil {
		return nil, err
	}
	// Kafka endpoints may point at the embedded broker: stand one up for
	// the probes, unless its port is taken (a running server's broker
	// then answers them).
	if k := cfg.EmbeddedKafka; k.Enabled {
		if c, err := embedded.Start(embedded.Options{Listen: k.Listen, Partitions: k.Partitions}); err == nil {
			defer c.Close()
		}
	}
	// A throwaway registry: probing must not clash with a running server's.
	reg := prometheus.NewRegistry()
	results := make([]CheckResult, 0, len(cfg.Endpoints))
	for _, e := range cfg.Endpoints {
		r := CheckResult{Endpoint: e.Name, Sink: e.Sink}
		one := *cfg
		one.Endpoints = []config.Endpoint{e}
		eps, err := buildEndpoints(&one, opts.Sinks, opts.Logger, reg, opts.Allocator)
		if err == nil {
			err = eps[0].Writer.Check(ctx)
		}
		r.Err = err
		results = append(results, r)
	}
	return results, nil
}
