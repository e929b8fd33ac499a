package bench

import (
	"errors"
	"fmt"
	"net"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
)

// baselineServer is the bare arrow-go Flight server Quiver is compared
// with: it decodes every batch, drops it, and answers the same acks as
// Quiver (one per batch, then a final one), so that the one client code
// path measures both. Any descriptor is accepted.
type baselineServer struct {
	flight.BaseFlightServer
	mem memory.Allocator
}

func (s *baselineServer) DoPut(stream flight.FlightService_DoPutServer) error {
	rdr, err := flight.NewRecordReader(stream, ipc.WithAllocator(s.mem))
	if err != nil {
		return err
	}
	defer rdr.Release()
	var batch, total int64
	var ack []byte
	for rdr.Next() {
		rows := rdr.RecordBatch().NumRows()
		total += rows
		ack = fmt.Appendf(ack[:0], `{"batch":%d,"rows":%d}`, batch, rows)
		if err := stream.Send(&flight.PutResult{AppMetadata: ack}); err != nil {
			return err
		}
		batch++
	}
	if err := rdr.Err(); err != nil {
		return err
	}
	return stream.Send(&flight.PutResult{AppMetadata: fmt.Appendf(nil, `{"committed":true,"rows":%d}`, total)})
}

// StartBaseline serves a baselineServer on 127.0.0.1:0 accepting messages
// up to maxMsgBytes. stop ends it and waits for its goroutine.
func StartBaseline(mem memory.Allocator, maxMsgBytes int) (addr string, stop func() error, err error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("bench: baseline server: %w", err)
	}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(maxMsgBytes))
	flight.RegisterFlightServiceServer(gs, &baselineServer{mem: mem})
	done := make(chan error, 1)
	go func() { done <- gs.Serve(lis) }()
	return lis.Addr().String(), func() error {
		gs.Stop()
		if err := <-done; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("bench: baseline server: %w", err)
		}
		return nil
	}, nil
}
