// Package server assembles a Quiver server from a validated config: it
// builds every endpoint's writer from the sink registry, opens the
// transaction coordinator (journal under data_dir), the Flight service, the
// gRPC listener (limits, TLS, interceptors, health service) and the HTTP
// operations listener (/metrics, /healthz, /readyz, status page), and runs
// their lifecycle down to a graceful shutdown.
//
// Config loading and validation live in server/config; the quiver binary in
// server/cmd/quiver. This package may import everything of the module; no
// package imports it but the binary.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	flightpb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/quiver-ingest/quiver/flightsvc"
	"github.com/quiver-ingest/quiver/internal/descseal"
	"github.com/quiver-ingest/quiver/internal/devbroker"
	"github.com/quiver-ingest/quiver/internal/maintain"
	"github.com/quiver-ingest/quiver/internal/membudget"
	"github.com/quiver-ingest/quiver/internal/redact"
	"github.com/quiver-ingest/quiver/server/config"
	"github.com/quiver-ingest/quiver/server/endpoint"
	"github.com/quiver-ingest/quiver/server/status"
	"github.com/quiver-ingest/quiver/txn"
	"github.com/quiver-ingest/quiver/writers"
)

// Options are the server's dependencies. Zero values are documented per
// field.
type Options struct {
	// Logger; nil discards.
	Logger *slog.Logger
	// Allocator for every Arrow buffer the server makes; nil means
	// memory.DefaultAllocator. Tests pass a checked allocator.
	Allocator memory.Allocator
	// Sinks must be the registry the config was loaded with; nil means
	// Sinks().
	Sinks *writers.Registry
	// Version is shown by the status page and quiver_build_info; "" means
	// "dev".
	Version string
	// ShutdownTimeout is how long Serve lets streams drain after its
	// context ends before cancelling them; zero means 30 seconds.
	ShutdownTimeout time.Duration
	// EndpointRetryMin and EndpointRetryMax bound the backoff between
	// attempts to open an endpoint whose sink could not be opened; zero
	// means 1 second and 1 minute.
	EndpointRetryMin, EndpointRetryMax time.Duration
	// TracerProvider receives the server's spans; nil means the OTLP
	// exporter of the config's tracing section, or no traces when it has
	// none. Tests pass an in-memory one.
	TracerProvider trace.TracerProvider
	// StatusSampleEvery is the status page's throughput resolution; zero
	// means 10 seconds.
	StatusSampleEvery time.Duration
	// StatusStuckAfter: the status page flags a transaction precommitted
	// longer as stuck; zero means 5 minutes.
	StatusStuckAfter time.Duration
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	// Every log line of the server loses the credentials of URIs.
	o.Logger = slog.New(redact.Handler(o.Logger.Handler()))
	if o.Allocator == nil {
		o.Allocator = memory.DefaultAllocator
	}
	if o.Sinks == nil {
		o.Sinks = Sinks()
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	return o
}

// closeTimeout bounds closing the writers during Shutdown, whatever is left
// of the caller's deadline: they must be closed, and must not hang forever.
const closeTimeout = 10 * time.Second

// Server is one Quiver server. Build it with New, run it with Start (or
// Serve), stop it with Shutdown; Shutdown may be called from any goroutine,
// also while Start runs. FlightAddr and HTTPAddr are valid once Start has
// returned.
type Server struct {
	cfg       *config.Config
	opts      Options
	logger    *slog.Logger
	tls       *tls.Config
	reg       *prometheus.Registry
	budget    *membudget.Budget
	endpoints []flightsvc.Endpoint
	handles   []*endpoint.Writer // endpoints[i].Writer, typed
	recorders []*status.Recorder // endpoints[i]'s observer
	runners   []*maintain.Runner // the endpoints' table maintenance
	// stopMaint ends background maintenance; maintained waits for it.
	stopMaint  context.CancelFunc
	maintained sync.WaitGroup
	// tp is the tracer provider, nil without traces; sdk is it when the
	// server built it (and must flush it at shutdown).
	tp      trace.TracerProvider
	sdk     *sdktrace.TracerProvider
	started time.Time

	startOnce sync.Once
	startErr  error
	// Set by Start before it returns; read-only afterwards.
	kafka     *devbroker.Cluster // embedded_kafka; nil when disabled
	coord     *txn.Coordinator
	svc       *flightsvc.Service
	grpc      *grpc.Server
	health    *health.Server
	http      *http.Server
	flightLn  net.Listener
	httpLn    net.Listener
	serveErr  chan error     // the first unexpected Serve failure of either listener
	served    sync.WaitGroup // the two Serve goroutines and the status board
	board     *status.Board
	stopBoard context.CancelFunc

	// serving is true from the end of Start until Shutdown begins.
	serving      atomic.Bool
	shutdownOnce sync.Once
	shutdownErr  error
}

// New builds a server for cfg, which must come from config.Load with the
// same sink registry as opts.Sinks. It loads the TLS files and builds every
// endpoint's writer, unopened; it binds nothing and starts no goroutine.
func New(cfg *config.Config, opts Options) (*Server, error) {
	opts = opts.withDefaults()
	tc, err := tlsConfig(cfg.TLS)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo(opts.Version),
	)
	budget, err := membudget.New(membudget.Options{
		Limit:            cfg.Limits.MemoryBytes,
		MaxOpenFiles:     cfg.Limits.MaxOpenFiles,
		AdmissionTimeout: cfg.Limits.AdmissionTimeout,
		ClientFiles:      clientFiles(cfg),
	})
	if err != nil {
		return nil, fmt.Errorf("server: limits: %w", err)
	}
	reg.MustRegister(budget.Collectors()...)
	if err := registerOpsMetrics(reg, cfg); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, opts: opts, logger: opts.Logger, tls: tc, reg: reg, budget: budget, tp: opts.TracerProvider, serveErr: make(chan error, 2)}
	if s.tp == nil && cfg.Tracing.Enabled() {
		if s.sdk, err = newTracerProvider(cfg.Tracing, opts.Version); err != nil {
			return nil, fmt.Errorf("server: tracing: %w", err)
		}
		s.tp = s.sdk
	}
	if s.endpoints, s.handles, s.recorders, s.runners, err = servingEndpoints(cfg, opts, reg, budget, s.tp); err != nil {
		s.stopTracing(context.Background())
		return nil, err
	}
	return s, nil
}

// buildInfo is quiver_build_info{version, goversion} = 1.
func buildInfo(version string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "quiver_build_info",
		Help:        "Always 1; the labels name the running build.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}

// Start binds both listeners, opens the writers and the coordinator
// (replaying the journal), and starts serving; it returns once the server
// answers calls, with the gRPC health status SERVING. An endpoint whose
// sink cannot be opened does not stop it: that endpoint answers
// Unavailable or FailedPrecondition with the reason until a background
// retry opens it (package endpoint). ctx bounds the
// opening only, it is not kept. On error everything Start opened is closed
// again. Start may be called once; a second call returns the first result.
func (s *Server) Start(ctx context.Context) error {
	s.startOnce.Do(func() { s.startErr = s.start(ctx) })
	return s.startErr
}

func (s *Server) start(ctx context.Context) (err error) {
	// Bind first: a taken port should fail before the journal is touched.
	if s.flightLn, err = net.Listen("tcp", s.cfg.Listen); err != nil {
		return writers.Errorf(writers.ErrUnavailable, "server: listen %s: %w (is another server running? change listen)", s.cfg.Listen, err)
	}
	if s.httpLn, err = net.Listen("tcp", s.cfg.HTTPListen); err != nil {
		s.flightLn.Close()
		return writers.Errorf(writers.ErrUnavailable, "server: http_listen %s: %w (is another server running? change http_listen)", s.cfg.HTTPListen, err)
	}
	var opened []flightsvc.Endpoint
	defer func() {
		if err != nil {
			s.flightLn.Close()
			s.httpLn.Close()
			s.closeWriters(ctx, opened)
			if s.coord != nil {
				s.coord.Close()
			}
			s.stopKafka()
		}
	}()
	// The embedded broker starts before the writers open: Kafka endpoints
	// may point at it.
	if k := s.cfg.EmbeddedKafka; k.Enabled {
		if s.kafka, err = devbroker.Start(devbroker.Options{Listen: k.Listen, Partitions: k.Partitions}); err != nil {
			return writers.Errorf(writers.ErrUnavailable, "server: embedded_kafka: %w", err)
		}
		s.logger.Info("embedded kafka listening", "addrs", s.kafka.Addrs(), "partitions", k.Partitions)
	}
	for _, e := range s.endpoints {
		if err := e.Writer.Open(ctx); err != nil {
			return fmt.Errorf("server: open endpoint %q (sink %s): %w", e.Name, e.Sink, err)
		}
		opened = append(opened, e)
	}
	s.coord, err = txn.Open(ctx, txn.Options{
		Dir:           filepath.Join(s.cfg.DataDir, "journal"),
		TTL:           s.cfg.Txn.TTL,
		MaxTTLOfBegin: s.cfg.Txn.MaxTTL,
		ReplayCheck:   txn.ReplayCheck(s.cfg.Txn.ReplayCheck),
		// A key generated into data_dir (descriptorKey: no configured
		// key) is this server's alone: no other server can commit its
		// descriptors.
		DiscardPrecommitted: s.cfg.Txn.DescriptorKey.IsZero(),
		MaxOpenPerOwner:     s.cfg.Limits.ClientMaxTransactions,
		MaxStagedPerOwner:   s.cfg.Limits.ClientStagedBytes,
		OneEpoch:            flightsvc.IsSQLWriter,
		Logger:              s.logger.With("component", "txn"),
		Registerer:          s.reg,
		TracerProvider:      s.tp,
	}, flightsvc.EndpointWriters(s.endpoints))
	if err != nil {
		return fmt.Errorf("server: open transaction journal: %w", err)
	}
	key, err := s.descriptorKey()
	if err != nil {
		return err
	}
	s.svc, err = flightsvc.New(flightsvc.Options{
		Endpoints:           s.endpoints,
		Coordinator:         s.coord,
		Allocator:           s.opts.Allocator,
		Logger:              s.logger.With("component", "flight"),
		Registerer:          s.reg,
		MaxMessageBytes:     s.cfg.Limits.MaxMessageBytes,
		Memory:              s.budget,
		StreamIdleTimeout:   s.cfg.Limits.StreamIdleTimeout,
		FirstMessageTimeout: s.cfg.Limits.FirstMessageTimeout,
		ClientMaxStreams:    s.cfg.Limits.ClientMaxStreams,
		ClientMemoryBytes:   s.cfg.Limits.ClientMemoryBytes,
		Tokens:              tokens(s.cfg.Auth),
		DescriptorKey:       key,
		Version:             s.opts.Version,
		SQLCatalog:          s.cfg.FlightSQL.Catalog,
		SQLDBSchema:         s.cfg.FlightSQL.DBSchema,
	})
	if err != nil {
		return fmt.Errorf("server: flight service: %w", err)
	}

	s.tuneGC()
	metrics := newGRPCMetrics(s.reg)
	s.grpc = newGRPCServer(s.svc.MaxRecvMsgSize(), s.cfg.Limits.MaxStreams, s.tls, s.svc.Authenticate, metrics, s.logger.With("component", "grpc"), tracingOption(s.tp)...)
	s.svc.Register(s.grpc)
	// The health server answers SERVING for "" (the whole server) and for
	// the Flight service by name, from now until Shutdown.
	s.health = health.NewServer()
	s.health.SetServingStatus(flightpb.FlightService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	metrics.InitializeMetrics(s.grpc)
	s.started = time.Now()
	s.board = s.newBoard()
	s.http = s.newHTTPServer(s.reg)

	s.serving.Store(true)
	var mctx context.Context
	mctx, s.stopMaint = context.WithCancel(context.Background())
	for _, r := range s.runners {
		s.maintained.Go(func() { r.Run(mctx) })
	}
	var bctx context.Context
	bctx, s.stopBoard = context.WithCancel(context.Background())
	s.served.Add(3)
	go func() {
		defer s.served.Done()
		s.board.Run(bctx)
	}()
	go func() {
		defer s.served.Done()
		if err := s.grpc.Serve(s.flightLn); err != nil {
			s.serveErr <- fmt.Errorf("server: flight listener: %w", err)
		}
	}()
	go func() {
		defer s.served.Done()
		if err := s.http.Serve(s.httpLn); !errors.Is(err, http.ErrServerClosed) {
			s.serveErr <- fmt.Errorf("server: http listener: %w", err)
		}
	}()
	// Endpoints that could not be opened retry from now on; once one
	// opens, and before it serves, its sink gets the precommitted parts
	// it must protect; then the commits decided for it before a restart
	// are finished.
	for _, h := range s.handles {
		h.Retry(func(w writers.Writer) { s.coord.Keep(h.Name(), w) },
			func(ctx context.Context) { s.coord.Resume(ctx, h.Name()) })
	}
	s.logger.Info("flight listening", "addr", s.FlightAddr(), "tls", s.tls != nil, "auth", s.cfg.Auth != nil)
	s.logger.Info("http listening", "addr", s.HTTPAddr())
	return nil
}

// descriptorKeyFile is the key generated in data_dir when the config names
// none (docs/operations.md, "The descriptor key").
const descriptorKeyFile = "descriptor.key"

// descriptorKey returns txn.descriptor_key_file's key, or the one in
// data_dir, generated on the first start. Called once the journal holds
// data_dir's lock, so no other server creates it concurrently.
func (s *Server) descriptorKey() (descseal.Key, error) {
	if !s.cfg.Txn.DescriptorKey.IsZero() {
		return s.cfg.Txn.DescriptorKey, nil
	}
	path := filepath.Join(s.cfg.DataDir, descriptorKeyFile)
	key, err := descseal.LoadOrCreateKeyFile(path)
	if err != nil {
		return descseal.Key{}, writers.Errorf(writers.ErrInvalid, "server: descriptor key %s: %w (fix or delete the file, or set txn.descriptor_key_file)", path, err)
	}
	return key, nil
}

// tokens converts the configured tokens for flightsvc; nil disables auth.
func tokens(a *config.Auth) []flightsvc.Token {
	if a == nil {
		return nil
	}
	out := make([]flightsvc.Token, len(a.Tokens))
	for i, t := range a.Tokens {
		out[i] = flightsvc.Token{Name: t.Name, Secret: t.Secret, Endpoints: t.Endpoints, Actions: t.Actions, Writers: t.Writers}
	}
	return out
}

// FlightAddr is the bound Flight address (the real port when listen asked
// for port 0), or "" when Start was not called.
func (s *Server) FlightAddr() string { return addr(s.flightLn) }

// HTTPAddr is the bound HTTP address, or "" when Start was not called.
func (s *Server) HTTPAddr() string { return addr(s.httpLn) }

func addr(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}

// Serve starts the server and runs it until ctx ends or a listener fails,
// then shuts it down, giving streams Options.ShutdownTimeout to finish.
// It returns the listener failure, or the shutdown's error.
func (s *Server) Serve(ctx context.Context) error {
	if err := s.Start(ctx); err != nil {
		return err
	}
	var failed error
	select {
	case <-ctx.Done():
		s.logger.Info("shutting down", "cause", context.Cause(ctx), "timeout", s.opts.ShutdownTimeout)
	case failed = <-s.serveErr:
		s.logger.Error("listener failed, shutting down", "err", failed)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownTimeout)
	defer cancel()
	return errors.Join(failed, s.Shutdown(sctx))
}

// Shutdown stops the server gracefully, as http.Server.Shutdown does: it
// reports NOT_SERVING (gRPC health, /readyz), stops accepting connections
// and lets running calls finish until ctx ends. Then it cancels the calls
// still running: flightsvc rolls back their unfinished auto-commit streams,
// so no half stream is ever published. Finally it closes the writers and,
// last, the coordinator and its journal.
//
// It returns an error wrapping ctx's cause when calls had to be cancelled.
// Shutdown is idempotent and safe to call concurrently (later calls wait
// for the first and return its result); it may be called without Start.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() { s.shutdownErr = s.shutdown(ctx) })
	return s.shutdownErr
}

func (s *Server) shutdown(ctx context.Context) error {
	defer s.stopTracing(ctx) // last: the shutdown's own spans are flushed too
	// Wait out a concurrent Start, and make a later one fail.
	s.startOnce.Do(func() { s.startErr = errors.New("server: shut down before start") })
	if s.startErr != nil {
		return nil
	}
	s.serving.Store(false)
	s.health.Shutdown()

	// Continuous streams do not end on their own: they end with
	// Unavailable once their last rows are committed.
	var errs []error
	if err := s.svc.StopStreams(ctx); err != nil {
		errs = append(errs, fmt.Errorf("server: shutdown: %w", err))
	}
	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		s.logger.Warn("shutdown deadline reached: cancelling the calls still running")
		s.grpc.Stop() // waits for the handlers (WaitForHandlers)
		<-stopped
		errs = append(errs, fmt.Errorf("server: shutdown: calls still running at the deadline were cancelled (unfinished streams rolled back): %w", context.Cause(ctx)))
	}
	// DoPut receive goroutines may outlive their handlers briefly; they
	// hold Arrow memory and write to the writers about to close.
	s.svc.Close()
	if s.http.Shutdown(ctx) != nil {
		s.http.Close() // the deadline passed: drop the remaining scrapes
	}
	s.stopBoard()
	s.served.Wait()
	s.stopMaint() // a run in progress is abandoned: its files stay unreferenced, for a vacuum
	s.maintained.Wait()
	errs = append(errs, s.closeWriters(ctx, s.endpoints))
	s.stopKafka() // after the writers: they may still talk to it
	if err := s.coord.Close(); err != nil {
		errs = append(errs, fmt.Errorf("server: close transaction journal: %w", err))
	}
	s.logger.Info("stopped")
	return errors.Join(errs...)
}

// stopTracing flushes and stops the tracer provider the server built, if
// any; a collector that is down is not the shutdown's failure.
func (s *Server) stopTracing(ctx context.Context) {
	if s.sdk == nil {
		return
	}
	if err := s.sdk.Shutdown(ctx); err != nil {
		s.logger.Warn("tracing: spans not exported at shutdown", "err", err)
	}
}

// stopKafka stops the embedded broker, if it runs.
func (s *Server) stopKafka() {
	if s.kafka != nil {
		s.kafka.Close()
		s.kafka = nil
	}
}

// closeWriters closes eps' writers with closeTimeout of their own: ctx may
// already be over, and a writer left open would leak.
func (s *Server) closeWriters(ctx context.Context, eps []flightsvc.Endpoint) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	var errs []error
	for _, e := range eps {
		if err := e.Writer.Close(cctx); err != nil {
			errs = append(errs, fmt.Errorf("server: close endpoint %q: %w", e.Name, err))
		}
	}
	return errors.Join(errs...)
}

// clientFiles is the file writer slots one token may wait for
// (limits.client_open_files): 0, no bound, without auth, where there
// are no tokens to share the slots among.
func clientFiles(cfg *config.Config) int64 {
	if cfg.Auth == nil {
		return 0
	}
	return cfg.Limits.ClientFiles()
}
