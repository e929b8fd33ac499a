// Package flightsvc is Quiver's Arrow Flight service: descriptors, DoPut
// sessions and acks, DoAction dispatch, ListFlights/GetFlightInfo/GetSchema,
// per-call permission checks and the one mapping from error classes to gRPC
// codes.
//
// THIS FILE IS THE AGREED API SKELETON used by server/. The implementation
// replaces the bodies; keep signatures unless server/ changes with them.
package flightsvc

import (
	"context"
	"log/slog"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/quiver-ingest/quiver/txn"
	"github.com/quiver-ingest/quiver/writers"
)

// Endpoint is one configured endpoint.
type Endpoint struct {
	Name   string
	Sink   string // sink kind ("discard", "delta", ...)
	Mode   string // write mode, "" when the sink has none
	Writer writers.Writer
}

// Token is one bearer token and what it may do.
type Token struct {
	Name      string
	Secret    string
	Endpoints []string // endpoint names or "*"
	Actions   []string // action types or "*"
}

// Options configure the service.
type Options struct {
	Endpoints   []Endpoint
	Coordinator *txn.Coordinator
	// Allocator for decoding incoming batches; nil means memory.DefaultAllocator.
	Allocator memory.Allocator
	// Logger; nil discards.
	Logger *slog.Logger
	// Registerer for quiver_ endpoint metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// MaxMessageBytes bounds one IPC message body (ipc.WithBodySizeLimit);
	// zero means 64 MiB.
	MaxMessageBytes int64
	// EndpointBufferBytes is each endpoint's in-flight budget; a stream over
	// it blocks. Zero means 512 MiB.
	EndpointBufferBytes int64
	// Tokens; nil disables auth.
	Tokens []Token
}

// Service implements flight.FlightServer.
type Service struct{}

// New builds the service.
func New(opts Options) (*Service, error) { panic("unimplemented") }

// Register registers the Flight service on gs.
func (s *Service) Register(gs *grpc.Server) { panic("unimplemented") }

// Authenticate is a go-grpc-middleware auth.AuthFunc: it checks the bearer
// token (when auth is enabled) and stores the caller in the context for the
// per-endpoint and per-action checks. Health-service calls are not routed
// through it.
func (s *Service) Authenticate(ctx context.Context) (context.Context, error) {
	panic("unimplemented")
}

// Health probes every endpoint's sink (writers.Writer.Check): name → nil or
// the error.
func (s *Service) Health(ctx context.Context) map[string]error { panic("unimplemented") }
