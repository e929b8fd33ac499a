package quiver

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// PutTrace holds optional hooks called during one Put, in the manner of
// net/http/httptrace. BatchSend and SendDone run on the goroutine that
// called Put; BatchAck runs on Put's receiving goroutine, concurrently with
// them. Hooks must return quickly: they delay the stream.
type PutTrace struct {
	// BatchSend is called just before batch index (0-based) is sent.
	BatchSend func(index int, rows int64)
	// SendDone is called once the last batch and the end of the stream are
	// sent; the final ack follows once the server has committed.
	SendDone func()
	// BatchAck is called for each batch the server acknowledges.
	BatchAck func(BatchAck)
}

// PutOption configures one Put.
type PutOption func(*putConfig)

type putConfig struct{ trace PutTrace }

// WithTrace installs hooks on one Put (progress bars, latency probes).
func WithTrace(t PutTrace) PutOption { return func(c *putConfig) { c.trace = t } }

// Put streams every batch of r to endpoint as one auto-commit DoPut and
// returns the final ack once the rows are committed. It blocks until the
// server answers or ctx ends; cancelling ctx before the final ack makes the
// server roll the stream back. Batches are borrowed from r (read with Next,
// sent before the next Next) and r is not released.
//
// An error from the server keeps its gRPC status. If the connection drops
// after the last batch is sent, the outcome is unknown and a retry may land
// the rows twice; use a [Txn] for exactly-once.
func (c *Client) Put(ctx context.Context, endpoint string, r array.RecordReader, opts ...PutOption) (Ack, error) {
	desc := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{endpoint}}
	final, err := c.put(ctx, desc, r, opts)
	if err != nil {
		return Ack{}, fmt.Errorf("quiver: put to %q: %w", endpoint, err)
	}
	ack, err := final.commitAck()
	if err != nil {
		return Ack{}, fmt.Errorf("quiver: put to %q: %w", endpoint, err)
	}
	return ack, nil
}

// put runs one DoPut: the calling goroutine sends, a second goroutine
// receives acks (gRPC allows one of each per stream), and put returns only
// after both are done. It returns the final ack.
func (c *Client) put(ctx context.Context, desc *flight.FlightDescriptor, r array.RecordReader, opts []PutOption) (wireAck, error) {
	var cfg putConfig
	for _, opt := range opts {
		opt(&cfg)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.fc.DoPut(ctx)
	if err != nil {
		return wireAck{}, err
	}

	type received struct {
		final wireAck
		err   error
	}
	done := make(chan received, 1)
	go func() {
		final, err := receiveAcks(stream, cfg.trace.BatchAck)
		if err != nil {
			// Unblocks a sender waiting on flow control of a stream the
			// server will no longer read.
			cancel()
		}
		done <- received{final, err}
	}()

	sendErr := c.sendBatches(stream, desc, r, cfg.trace)
	// io.EOF from Send means the server ended the stream; its reason comes
	// from Recv. Any other send error (the reader failed, a local size
	// limit, ctx) leaves the server waiting for more: cancel so that it
	// rolls the stream back.
	sendFailed := sendErr != nil && !errors.Is(sendErr, io.EOF)
	if sendFailed {
		cancel()
	}
	rcv := <-done
	switch {
	case rcv.err != nil && !(sendFailed && status.Code(rcv.err) == codes.Canceled):
		// The server's own error (the receiver saw it first and cancelled
		// the sender, so the send error, if any, is only its echo).
		return wireAck{}, rcv.err
	case sendFailed:
		return wireAck{}, sendErr
	case sendErr != nil:
		return wireAck{}, errors.New("the server ended the stream before all batches were sent, without an error")
	}
	return rcv.final, nil
}

// sendBatches writes the schema (with desc), every batch of r and the end
// of the stream.
func (c *Client) sendBatches(stream flight.FlightService_DoPutClient, desc *flight.FlightDescriptor, r array.RecordReader, trace PutTrace) error {
	w := flight.NewRecordWriter(stream, ipc.WithSchema(r.Schema()), ipc.WithAllocator(c.mem))
	w.SetFlightDescriptor(desc)
	for i := 0; r.Next(); i++ {
		rec := r.RecordBatch()
		if trace.BatchSend != nil {
			trace.BatchSend(i, rec.NumRows())
		}
		if err := w.Write(rec); err != nil {
			_ = w.Close() // releases encoder state; the Write error is the one to report
			return err
		}
	}
	if err := r.Err(); err != nil {
		_ = w.Close()
		return fmt.Errorf("read batches: %w", err)
	}
	// Close sends the schema (and descriptor) if no batch did.
	if err := w.Close(); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	if trace.SendDone != nil {
		trace.SendDone()
	}
	return nil
}

// receiveAcks reads PutResults until the server ends the stream, calling
// onBatch for batch acks, and returns the final ack.
func receiveAcks(stream flight.FlightService_DoPutClient, onBatch func(BatchAck)) (wireAck, error) {
	var (
		final *wireAck
		index int
		acked int64
	)
	for {
		res, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			if final == nil {
				return wireAck{}, fmt.Errorf("stream ended after %d batch acks without a final ack; the outcome is unknown", index)
			}
			return *final, nil
		}
		if err != nil {
			return wireAck{}, err
		}
		a, err := decodeAck(res.GetAppMetadata())
		if err != nil {
			return wireAck{}, err
		}
		if a.Batch == nil {
			final = &a
			continue
		}
		acked += a.Rows
		if onBatch != nil {
			onBatch(BatchAck{Index: index, Batch: *a.Batch, Rows: a.Rows, TotalRows: acked})
		}
		index++
	}
}
