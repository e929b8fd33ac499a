package server

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/quiver-ingest/quiver/flightsvc"
	"github.com/quiver-ingest/quiver/internal/devbroker"
	"github.com/quiver-ingest/quiver/internal/maintain"
	"github.com/quiver-ingest/quiver/internal/membudget"
	"github.com/quiver-ingest/quiver/server/config"
	"github.com/quiver-ingest/quiver/server/endpoint"
	"github.com/quiver-ingest/quiver/server/status"
	"github.com/quiver-ingest/quiver/txn"
	"github.com/quiver-ingest/quiver/writers"
)

// buildEndpoints builds every endpoint's writer, unopened. Each writer gets
// a logger and a registerer carrying its endpoint's name, and its share of
// budget (limits.endpoint_buffer_bytes), which flightsvc charges too; a
// nil budget (probes) gives none.
func buildEndpoints(cfg *config.Config, sinks *writers.Registry, logger *slog.Logger, reg prometheus.Registerer, alloc memory.Allocator, budget *membudget.Budget) ([]flightsvc.Endpoint, error) {
	eps := make([]flightsvc.Endpoint, 0, len(cfg.Endpoints))
	for _, e := range cfg.Endpoints {
		var share *membudget.Share
		if budget != nil {
			share = budget.Share(e.Name, cfg.Limits.EndpointBufferBytes)
		}
		build, err := writerBuilder(cfg, e, sinks, logger, reg, alloc, share)
		if err != nil {
			return nil, err
		}
		w, err := build()
		if err != nil {
			return nil, fmt.Errorf("server: endpoint %q (sink %s): %w", e.Name, e.Sink, err)
		}
		ep := flightsvc.Endpoint{Name: e.Name, Sink: e.Sink, Mode: e.Settings.Mode(), Writer: w, Memory: share}
		if sink, _ := sinks.Lookup(e.Sink); sink.Streams {
			ep.Stream = &e.Stream
		}
		eps = append(eps, ep)
	}
	return eps, nil
}

// writerBuilder returns the function that builds e's writer, unopened:
// once at start, and again for every attempt to reopen an endpoint whose
// sink could not be opened (see package endpoint). Every writer of the
// endpoint gets its memory share (nil: none).
func writerBuilder(cfg *config.Config, e config.Endpoint, sinks *writers.Registry, logger *slog.Logger, reg prometheus.Registerer, alloc memory.Allocator, share *membudget.Share) (func() (writers.Writer, error), error) {
	sink, err := sinks.Lookup(e.Sink)
	if err != nil {
		return nil, fmt.Errorf("server: endpoint %q: %w", e.Name, err)
	}
	env := writers.Env{
		Endpoint:    e.Name,
		ConfigDir:   cfg.Dir,
		DataDir:     cfg.DataDir,
		Logger:      logger.With("endpoint", e.Name),
		Registerer:  prometheus.WrapRegistererWith(prometheus.Labels{"endpoint": e.Name}, reg),
		Allocator:   alloc,
		Maintenance: e.Maintenance,
	}
	if share != nil {
		env.Memory = share
	}
	return func() (writers.Writer, error) { return sink.New(e.Settings, env) }, nil
}

// servingEndpoints builds every endpoint's writer, unopened, behind an
// endpoint.Writer that keeps the server up when the sink cannot be opened,
// observed by the status page's recorder and traced by tp (nil: no
// traces), and registers the gauges of its health (registerHealth). A
// writer that cannot be built (the sink refuses its settings) is an
// error.
func servingEndpoints(cfg *config.Config, opts Options, reg prometheus.Registerer, budget *membudget.Budget, tp trace.TracerProvider) ([]flightsvc.Endpoint, []*endpoint.Writer, []*status.Recorder, []*maintain.Runner, error) {
	sinks, logger, alloc := opts.Sinks, opts.Logger, opts.Allocator
	raw, err := buildEndpoints(cfg, sinks, logger, reg, alloc, budget)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var runners []*maintain.Runner
	limiter := maintain.NewLimiter() // one maintenance run at a time, server-wide
	eps := make([]flightsvc.Endpoint, len(raw))
	handles := make([]*endpoint.Writer, len(raw))
	recorders := make([]*status.Recorder, len(raw))
	for i, e := range raw {
		rebuild, err := writerBuilder(cfg, cfg.Endpoints[i], sinks, logger, reg, alloc, e.Memory)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		recorders[i] = status.NewRecorder(nil)
		observer := &commitCounter{Observer: recorders[i]}
		h := endpoint.New(e.Writer, endpoint.Options{
			Name: e.Name, Sink: e.Sink, Rebuild: rebuild, Logger: logger,
			MinBackoff: opts.EndpointRetryMin, MaxBackoff: opts.EndpointRetryMax,
			Observer: observer, TracerProvider: tp,
		})
		if sink, _ := sinks.Lookup(e.Sink); sink.Maintains.Any() {
			r, err := maintain.New(maintain.Options{
				Endpoint: e.Name, Writer: h, Ops: sink.Maintains, Config: cfg.Endpoints[i].Maintenance,
				UntrackedMinAge: txn.MaxTTL, Limiter: limiter,
				Logger:     logger.With("endpoint", e.Name, "component", "maintenance"),
				Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"endpoint": e.Name}, reg),
			})
			if err != nil {
				return nil, nil, nil, nil, err
			}
			observer.runner, e.Maintenance = r, r
			runners = append(runners, r)
		}
		if err := registerHealth(reg, e.Name, h); err != nil {
			return nil, nil, nil, nil, err
		}
		e.Writer = h
		eps[i], handles[i] = e, h
	}
	return eps, handles, recorders, runners, nil
}

// registerHealth registers the gauges of h's health:
// quiver_endpoint_up (the sink is open) and quiver_endpoint_degraded (it
// is open but its calls keep failing, endpoint.Writer.Degraded).
func registerHealth(reg prometheus.Registerer, name string, h *endpoint.Writer) error {
	gauges := []struct {
		name, help string
		value      func() bool
	}{
		{"quiver_endpoint_up", "1 while the endpoint's sink is open and serving, 0 while it could not be opened (the server retries).", h.Up},
		{"quiver_endpoint_degraded", "1 while the endpoint's sink is open but its last writes or commits failed (until a commit succeeds), 0 otherwise.",
			func() bool { return h.Degraded() != nil }},
	}
	for _, g := range gauges {
		gauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: g.name, Help: g.help, ConstLabels: prometheus.Labels{"endpoint": name},
		}, func() float64 {
			if g.value() {
				return 1
			}
			return 0
		})
		if err := reg.Register(gauge); err != nil {
			return fmt.Errorf("server: endpoint %q: register %s: %w", name, g.name, err)
		}
	}
	return nil
}

// commitCounter is an endpoint's observer: the status page's recorder,
// and the maintenance runner counting commits toward optimize_every.
type commitCounter struct {
	endpoint.Observer
	runner *maintain.Runner // nil: no maintenance
}

func (c *commitCounter) Committed(cm endpoint.Commit) {
	c.Observer.Committed(cm)
	if c.runner != nil {
		c.runner.Committed()
	}
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
		if c, err := devbroker.Start(devbroker.Options{Listen: k.Listen, Partitions: k.Partitions}); err == nil {
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
		eps, err := buildEndpoints(&one, opts.Sinks, opts.Logger, reg, opts.Allocator, nil)
		if err == nil {
			err = eps[0].Writer.Check(ctx)
		}
		r.Err = err
		results = append(results, r)
	}
	return results, nil
}
