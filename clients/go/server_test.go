package quiver_test

import (
	"context"
	"errors"
	"net"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/grpc"

	"github.com/quiver-ingest/quiver/flightsvc"
	"github.com/quiver-ingest/quiver/txn"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/discard"
)

// testServer is the real Flight service, coordinator and discard sink in
// process on 127.0.0.1:0, for the examples and integration tests.
type testServer struct {
	Addr string
	// Sinks are the endpoints' discard writers by name.
	Sinks map[string]*discard.Writer
	stop  func()
}

type serverConfig struct {
	mem memory.Allocator
	// schemas: endpoint name → fixed schema (nil: any).
	schemas map[string]*arrow.Schema
	tokens  []flightsvc.Token
}

type endpointSet map[string]*discard.Writer

func (s endpointSet) Writer(name string) (writers.Writer, bool) {
	w, ok := s[name]
	return w, ok
}

// startServer starts a server; it panics on failure (examples have no
// *testing.T). Stop it with stop.
func startServer(cfg serverConfig) *testServer {
	if cfg.mem == nil {
		cfg.mem = memory.DefaultAllocator
	}
	if cfg.schemas == nil {
		cfg.schemas = map[string]*arrow.Schema{"devnull": nil}
	}
	dir, err := os.MkdirTemp("", "quiver-client-test-")
	must(err)
	sinks := endpointSet{}
	var eps []flightsvc.Endpoint
	for name, schema := range cfg.schemas {
		sinks[name] = discard.New(schema)
		eps = append(eps, flightsvc.Endpoint{Name: name, Sink: "discard", Writer: sinks[name]})
	}
	coord, err := txn.Open(context.Background(), txn.Options{Dir: dir}, sinks)
	must(err)
	svc, err := flightsvc.New(flightsvc.Options{Endpoints: eps, Coordinator: coord, Allocator: cfg.mem, Tokens: cfg.tokens})
	must(err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(svc.MaxRecvMsgSize()),
		grpc.ChainUnaryInterceptor(auth.UnaryServerInterceptor(svc.Authenticate)),
		grpc.ChainStreamInterceptor(auth.StreamServerInterceptor(svc.Authenticate)))
	svc.Register(gs)
	done := make(chan error, 1)
	go func() { done <- gs.Serve(lis) }()
	return &testServer{Addr: lis.Addr().String(), Sinks: sinks, stop: func() {
		gs.Stop()
		if err := <-done; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			panic(err)
		}
		svc.Close()
		must(coord.Close())
		must(os.RemoveAll(dir))
	}}
}

func (s *testServer) Stop() { s.stop() }

func must(err error) {
	if err != nil {
		panic(err)
	}
}
