package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/grpc"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/flightsvc"
	"github.com/quiver-ingest/quiver/txn"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/discard"
)

// oneEndpoint is the txn.Endpoints of a server with a single endpoint.
type oneEndpoint struct {
	name string
	w    writers.Writer
}

func (e oneEndpoint) Writer(name string) (writers.Writer, bool) { return e.w, name == e.name }

// startQuiver serves Quiver in process on 127.0.0.1:0: the Flight service
// with one discard endpoint called endpoint, no auth, and a coordinator
// journaling in a temporary folder. It leaves out the production server's
// logging and metrics interceptors (per call, not per batch, so they do not
// change throughput). stop shuts it all down and removes the folder.
func startQuiver(ctx context.Context, mem memory.Allocator, endpoint string) (addr string, stop func() error, err error) {
	dir, err := os.MkdirTemp("", "quiverbench-")
	if err != nil {
		return "", nil, fmt.Errorf("bench: in-process quiver: %w", err)
	}
	var cleanups []func() error
	cleanup := func() error {
		var errs []error
		for i := len(cleanups) - 1; i >= 0; i-- {
			errs = append(errs, cleanups[i]())
		}
		return errors.Join(append(errs, os.RemoveAll(dir))...)
	}
	fail := func(err error) (string, func() error, error) {
		return "", nil, errors.Join(fmt.Errorf("bench: in-process quiver: %w", err), cleanup())
	}

	w := discard.New(nil)
	if err := w.Open(ctx); err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() error { return w.Close(context.WithoutCancel(ctx)) })
	coord, err := txn.Open(ctx, txn.Options{Dir: dir}, oneEndpoint{endpoint, w})
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, coord.Close)
	svc, err := flightsvc.New(flightsvc.Options{
		Endpoints:       []flightsvc.Endpoint{{Name: endpoint, Sink: "discard", Writer: w}},
		Coordinator:     coord,
		Allocator:       mem,
		MaxMessageBytes: quiver.DefaultMaxMessageBytes,
	})
	if err != nil {
		return fail(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	gs := grpc.NewServer(
		grpc.MaxRecvMsgSize(svc.MaxRecvMsgSize()),
		grpc.ChainUnaryInterceptor(auth.UnaryServerInterceptor(svc.Authenticate)),
		grpc.ChainStreamInterceptor(auth.StreamServerInterceptor(svc.Authenticate)),
	)
	svc.Register(gs)
	done := make(chan error, 1)
	go func() { done <- gs.Serve(lis) }()
	cleanups = append(cleanups, func() error {
		gs.Stop()
		err := <-done
		svc.Close() // waits for receive goroutines that outlive their handlers
		if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return err
		}
		return nil
	})
	return lis.Addr().String(), cleanup, nil
}
