package flightsvc

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/util"

	"github.com/quiver-ingest/quiver/flightsvc/groupcommit"
	"github.com/quiver-ingest/quiver/flightsvc/ipccheck"
	"github.com/quiver-ingest/quiver/internal/membudget"
	"github.com/quiver-ingest/quiver/internal/rowdigest"
	"github.com/quiver-ingest/quiver/writers"
)

// queueDepth is how many decoded batches may wait for the writer: one is
// enough for decoding the next batch to overlap writing the current one.
const queueDepth = 1

// putStream is one DoPut stream on its way to its endpoint's writer.
type putStream struct {
	ep    *endpoint
	rdr   *ipc.Reader
	guard *recvGuard
	key   writers.TxnKey
	write bool // false: a replayed epoch, read and acknowledged only
	// busy marks the stream's transaction busy while the server works
	// for it (txn.Stream.Busy): its ttl runs only while it waits for
	// its client. Auto-commit streams have none.
	busy func() (done func())
	// turn waits for the stream's turn to write a batch among the streams
	// of its transaction on the endpoint (txn.Stream.Turn). Auto-commit
	// streams have their own key and none.
	turn func(ctx context.Context) (done func(), err error)
	// stage counts a batch's bytes against its transaction's owner before
	// it is written (txn.Stream.Stage, limits.client_staged_bytes).
	// Auto-commit streams have none.
	stage func(n int64) error
	// digest, set for a transactional stream whose replays are compared
	// (txn.Coordinator.DigestsRows), makes the receiver sum the digests
	// of the batches it receives into rowsDigest (read once pump
	// succeeded).
	digest     bool
	rowsDigest uint64
	// seqs, set for a continuous stream, makes the receiver read each
	// batch's seq from its app_metadata (queued.seq).
	seqs bool
	// drain takes the queued batches instead of Service.drain (a
	// continuous stream's, stream.go), answering on stream.
	drain func(ctx context.Context, stream flight.FlightService_DoPutServer, queue <-chan queued) (pumped, error)
	// unacked counts the batches received and not yet acknowledged, and
	// acked is when the last ack was sent (Unix ns): a client waiting for
	// acks is not idle, and its idle time starts with the last one.
	unacked, acked atomic.Int64
}

// serverWork marks the stream busy until the returned func is called.
func (ps *putStream) serverWork() (done func()) {
	if ps.busy == nil {
		return func() {}
	}
	return ps.busy()
}

// release releases the reader and gives back what the guard holds.
func (ps *putStream) release() {
	ps.rdr.Release()
	ps.guard.close()
}

// queued is a received batch on its way to the writer. It holds a
// reference on rec and held bytes of the endpoint's memory share, both
// given back by release, exactly once.
type queued struct {
	rec  arrow.RecordBatch
	size int64 // the bytes of its Arrow buffers
	// held is what it is charged: its buffers point into the message they
	// were decoded from, which stays in memory whole as long as any of
	// them does, however little of it they cover.
	held int64
	// seq is a continuous stream's batch's seq, groupcommit.NoSeq when it
	// has none (and in other streams).
	seq int64
}

func (q queued) release(ps *putStream) {
	q.rec.Release()
	ps.guard.acct.Release(membudget.Decoded, q.held)
	ps.ep.m.buffered.Sub(float64(q.held))
}

// pumped counts what a pump saw.
type pumped struct {
	rows    int64 // rows received and acknowledged
	written int64 // rows passed to Write
	batches int64
}

// pump moves the batches of ps into its endpoint's writer under its key
// (or, when write is false, only counts them) and sends one ack per batch.
// It takes ps over and releases it.
//
// Two goroutines: a receiver reads (waiting for memory before each
// message, see recvGuard.reserve), decodes and validates batches, charges
// them to the endpoint's memory share and queues them; the calling goroutine writes
// them and sends the acks, so each of Recv and Send has one caller. The
// first error of either stops both and is returned. A panic in Write fails
// the stream like an error (a *writers.PanicError); a panic anywhere else
// on the writing side still gives back the batch being written and lets
// the receiver release the rest before it propagates.
//
// On success, and when the receiving side fails, the receiver has released
// rdr and its batches when pump returns. When the writing side fails
// first, pump returns at once although the receiver may still be blocked
// in Recv, waiting for a client that waits for acks: only the end of the
// handler makes gRPC cancel the stream and Recv return. The receiver then
// releases ps and whatever is still queued; Service.Close waits for it.
// A stream that waits longer than Options.StreamIdleTimeout for a message,
// or for its client to take an ack (ackSends), fails like one whose
// receiving side failed.
func (s *Service) pump(ctx context.Context, stream flight.FlightService_DoPutServer, ps *putStream) (pumped, error) {
	ep := ps.ep
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	queue := make(chan queued, queueDepth)
	// Closed when the writing side stops taking batches, however it stops
	// (deferred: a panic included), then the context is cancelled (the
	// defer above), which unblocks the receiver.
	writerDone := make(chan struct{})
	defer close(writerDone)

	ps.guard.ctx = ctx
	idle := func(what string) func() {
		return func() {
			if ps.seqs {
				// A quiet collector is not a failure: what it sent is
				// committed, and its client reconnects when it has more.
				cancel(writers.Errorf(writers.ErrUnavailable, "doput: endpoint %q: %s for %s (limits.stream_idle_timeout): the continuous stream was ended, what it sent is committed with its group; reconnect to send more", ep.Name, what, s.idle))
				return
			}
			cancel(fmt.Errorf("doput: endpoint %q: %s for %s (limits.stream_idle_timeout): the stream was cancelled and rolled back: %w", ep.Name, what, s.idle, context.DeadlineExceeded))
		}
	}
	ps.guard.armIdle(s.idle, func() bool {
		return ps.unacked.Load() > 0 || time.Since(time.Unix(0, ps.acked.Load())) < s.idle
	}, idle("no message"))
	if s.idle > 0 {
		noAck := idle("the client took no ack")
		stream = ackSends{stream, s.idle, func() {
			noAck()
			// The receiver may be waiting in Recv, which nothing
			// interrupts, for a message the client will not send.
			releaseQueued(ps, queue)
		}}
	}
	s.receivers.Add(1)
	go func() {
		defer s.receivers.Done()
		err := receive(ctx, ps, queue)
		ps.release()
		if err != nil {
			// Cancel before closing the queue, so that the writing side,
			// seeing the queue closed, finds the cause.
			cancel(err)
			// The stream failed: a batch still queued would only be
			// failed by the writing side, which may be stuck in an ack's
			// Send (ackSends) for as long as its client stays. It is
			// given back now.
			releaseQueued(ps, queue)
		}
		close(queue)
		// Batches the writing side did not take are released here, once
		// it has stopped taking them.
		<-writerDone
		for q := range queue {
			q.release(ps)
		}
	}()

	drain := ps.drain
	if drain == nil {
		drain = func(ctx context.Context, stream flight.FlightService_DoPutServer, queue <-chan queued) (pumped, error) {
			return s.drain(ctx, stream, ps, queue)
		}
	}
	p, err := drain(ctx, stream, queue)
	if err != nil {
		cancel(err)
	}
	// The first error wins: a write failing because the receiver's error
	// canceled it reports the receiver's error.
	if cause := context.Cause(ctx); cause != nil && err != nil {
		err = cause
	}
	return p, err
}

// releaseQueued releases the batches waiting in queue, without waiting
// for more; queue may be closed.
func releaseQueued(ps *putStream, queue <-chan queued) {
	for {
		select {
		case q, ok := <-queue:
			if !ok {
				return
			}
			q.release(ps)
		default:
			return
		}
	}
}

// ackSends bounds every Send of a stream's acks by the idle timeout. A
// client that stops reading acks fills its HTTP/2 window, then Send waits
// until the client reads or leaves, and nothing can interrupt it. The
// stream is cancelled instead (stuck), so that its receiving side gives
// back the batches and memory it holds; the handler ends with the Send.
type ackSends struct {
	flight.FlightService_DoPutServer
	timeout time.Duration
	stuck   func()
}

func (a ackSends) Send(r *flight.PutResult) error {
	var sent atomic.Bool
	t := time.AfterFunc(a.timeout, func() {
		if !sent.Load() { // not a Send that returned as the timer fired
			a.stuck()
		}
	})
	err := a.FlightService_DoPutServer.Send(r)
	sent.Store(true)
	t.Stop()
	return err
}

// receive decodes and validates the batches of ps into queue until the
// stream ends. It runs on its own goroutine, which gRPC's recovery does
// not cover: a panic becomes its error.
func receive(ctx context.Context, ps *putStream, queue chan<- queued) (err error) {
	defer writers.Recover(&err)
	ep, rdr := ps.ep, ps.rdr
	// Next waits for memory before reading each message (backpressure on
	// this stream, never a dropped batch).
	for n := 0; rdr.Next(); n++ {
		rec := rdr.RecordBatch()
		if err := ipccheck.Validate(rec); err != nil {
			return writers.Errorf(writers.ErrInvalid, "doput: endpoint %q: batch %d: %w", ep.Name, n, err)
		}
		if ps.digest {
			ps.rowsDigest += rowdigest.Of(rec)
		}
		seq := groupcommit.NoSeq
		if ps.seqs {
			if seq, err = batchSeq(ps.guard.meta); err != nil {
				return fmt.Errorf("doput: endpoint %q: batch %d: %w", ep.Name, n, err)
			}
		}
		size := util.TotalRecordSize(rec)
		// The messages' bytes become the batch's (a compressed batch's
		// decompressed size was charged when it arrived, recvGuard.received):
		// its buffers may cover only part of its message (a hostile body
		// of slack), which it holds all the same.
		pending := ps.guard.takePending()
		held := max(size, pending)
		ps.guard.acct.Trade(membudget.Received, pending, membudget.Decoded, held)
		ep.m.buffered.Add(float64(held))
		rec.Retain() // rdr releases rec on its next Next
		q := queued{rec: rec, size: size, held: held, seq: seq}
		ps.unacked.Add(1)
		select {
		case queue <- q:
		case <-ctx.Done():
			q.release(ps)
			return ctx.Err()
		}
	}
	if err := rdr.Err(); err != nil {
		return streamError(err)
	}
	return nil
}

// drain writes queued batches and acknowledges each one.
func (s *Service) drain(ctx context.Context, stream flight.FlightService_DoPutServer, ps *putStream, queue <-chan queued) (pumped, error) {
	ep := ps.ep
	var p pumped
	for {
		var q queued
		select {
		case <-ctx.Done():
			return p, context.Cause(ctx)
		case next, ok := <-queue:
			if !ok {
				// The receiver cancels before closing on error.
				return p, context.Cause(ctx)
			}
			q = next
		}
		rows := q.rec.NumRows()
		done := ps.serverWork()
		err := s.write(ctx, ps, q, p.batches)
		done()
		if err != nil {
			return p, err
		}
		if ps.write {
			p.written += rows
		}
		ep.m.rows.Add(float64(rows))
		ep.m.bytes.Add(float64(q.size))
		ep.m.batches.Inc()
		if err := stream.Send(&flight.PutResult{AppMetadata: batchAck(p.batches, rows)}); err != nil {
			return p, err
		}
		ps.acked.Store(time.Now().UnixNano())
		ps.unacked.Add(-1)
		p.rows += rows
		p.batches++
	}
}

// write writes batch n of ps (unless ps.write is false) and releases it,
// whatever happens, a panic included. A panic in Write is its error.
func (s *Service) write(ctx context.Context, ps *putStream, q queued, n int64) error {
	ep := ps.ep
	defer q.release(ps)
	if !ps.write {
		return nil
	}
	if ps.stage != nil {
		if err := ps.stage(q.held); err != nil { // what a sink retaining the batch holds
			return fmt.Errorf("doput: endpoint %q: write batch %d: %w", ep.Name, n, err)
		}
	}
	if ps.turn != nil {
		done, err := ps.turn(ctx)
		if err != nil {
			return fmt.Errorf("doput: endpoint %q: write batch %d: %w", ep.Name, n, err)
		}
		defer done()
	}
	start := time.Now()
	err := func() (err error) {
		defer writers.Recover(&err)
		return ep.Writer.Write(ctx, ps.key, q.rec)
	}()
	ep.m.write.Observe(time.Since(start).Seconds())
	if err != nil {
		return fmt.Errorf("doput: endpoint %q: write batch %d: %w", ep.Name, n, err)
	}
	return nil
}

// batchAck is {"batch":n,"rows":rows}, built without reflection: it is
// sent for every batch.
func batchAck(n, rows int64) []byte {
	b := make([]byte, 0, 40)
	b = append(b, `{"batch":`...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, `,"rows":`...)
	b = strconv.AppendInt(b, rows, 10)
	return append(b, '}')
}
