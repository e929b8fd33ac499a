package flightsvc

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/quiver-ingest/quiver/internal/membudget"
	"github.com/quiver-ingest/quiver/txn"
	"github.com/quiver-ingest/quiver/writers"
)

// finishTimeout bounds the commit or rollback of an auto-commit stream once
// the stream has ended: it runs without the stream's context, so that a
// client leaving at that moment neither cuts a commit in half nor leaves
// staged data behind.
const finishTimeout = 5 * time.Minute

// Final acks of DoPut (the last PutResult's app_metadata).
type (
	committedAck struct {
		Committed bool   `json:"committed"`
		Rows      int64  `json:"rows"`
		Version   *int64 `json:"version,omitempty"`
	}
	stagedAck struct {
		Staged   bool   `json:"staged,omitempty"`
		Replayed bool   `json:"replayed,omitempty"`
		Rows     int64  `json:"rows"`
		Writer   string `json:"writer"`
		Epoch    int64  `json:"epoch"`
	}
)

// DoPut receives one stream of record batches.
//
// The first message carries the descriptor and the schema. A PATH
// descriptor ["<endpoint>"] is an auto-commit stream: its batches are
// written under a private key and published by one sink commit when the
// stream ends, or, if it fails or the client cancels, rolled back so that
// nothing is published. A CMD descriptor {"endpoint","writer","epoch"}
// (strict JSON) joins the rows to that transaction; a replayed epoch is
// read and acknowledged without writing.
// A Flight SQL CommandStatementIngest is a stream of either kind, with
// Flight SQL's acks (sqlingest.go).
//
// Before anything is written the stream's schema is checked against the
// endpoint's (writers.CheckStreamSchema), and every later schema message against
// the first; a mismatch is InvalidArgument naming the column.
//
// Hostile input fails its stream, never the process. The descriptor and
// the caller's permission are checked before any IPC data is decoded;
// every IPC header is checked, bounded, against the bytes present and the
// stream's schema before arrow-go decodes it (package ipccheck); every batch is
// validated in full (offsets, lengths, null counts, children, dictionary
// indices) before it reaches the writer. A refused message is
// InvalidArgument naming the batch (and column), and the stream is rolled
// back. A panic in the writer fails the stream with Internal.
//
// Acks: one PutResult per batch, app_metadata {"batch":N,"rows":R} with N
// the 0-based batch index and R that batch's rows, then a final one:
// {"committed":true,"rows":TOTAL,"version":V} (version omitted for sinks
// without versions), {"staged":true,"rows","writer","epoch"} or
// {"replayed":true,"rows","writer","epoch"}. An auto-commit stream without
// rows commits nothing and answers {"committed":true,"rows":0}.
//
// Receiving and writing overlap: a receiver goroutine decodes the next
// batch while the handler writes the current one and sends its ack. Batches
// in flight are charged to the endpoint's buffer budget, and the receiver
// blocks while the budget is spent.
func (s *Service) DoPut(stream flight.FlightService_DoPutServer) error {
	return Status(s.doPut(stream))
}

func (s *Service) doPut(stream flight.FlightService_DoPutServer) error {
	ctx := stream.Context()
	tok, err := s.caller(ctx)
	if err != nil {
		return err
	}
	c, err := s.clients.open(clientName(tok, ctx))
	if err != nil {
		return err
	}
	defer s.clients.close(c)
	if tok != nil {
		// The file writer slots its writes take count against the token
		// (limits.client_open_files).
		ctx = membudget.WithQuota(ctx, c.quota)
	}
	// Who may write where is settled from the first message's descriptor
	// before any IPC byte is decoded: a caller without a grant gets
	// nothing decoded.
	deadline := time.Now().Add(s.first)
	first, err := s.recvBy(stream, deadline, "descriptor")
	if errors.Is(err, io.EOF) {
		return errNoSchema
	}
	if err != nil {
		return err
	}
	t, err := parsePutDescriptor(first.GetFlightDescriptor())
	if err != nil {
		return err
	}
	// endpoint checks the caller's grant (before the endpoint's existence).
	ep, err := s.endpoint(ctx, t.endpoint)
	if err != nil {
		return fmt.Errorf("doput: %w", err)
	}
	// Name the stream on its span (the gRPC server span, when traces are on).
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("quiver.endpoint", ep.Name), attribute.String("quiver.writer", t.writer), attribute.Int64("quiver.epoch", t.epoch))

	if t.ingest != nil {
		if err := s.checkIngest(ctx, ep, &t); err != nil {
			return err
		}
		stream = sqlAckStream{stream}
	}
	// A descriptor sent alone is followed by the schema within the same
	// deadline: every later wait for a message is timed by the guard's
	// idle timer, which starts with the schema, and a stream that sent its
	// descriptor and went silent would hold a whole message's reservation
	// until its client left.
	read := 0 // messages before the schema (a descriptor sent alone)
	if len(first.GetDataHeader()) == 0 {
		if first, err = s.recvBy(stream, deadline, "schema"); errors.Is(err, io.EOF) {
			return errNoSchema
		}
		if err != nil {
			return err
		}
		if len(first.GetDataHeader()) == 0 {
			return writers.Errorf(writers.ErrInvalid, "doput: message 2 carries no IPC header: after the descriptor, every message must be a schema, dictionary or record batch")
		}
		read++
	}

	guard := &recvGuard{stream: stream, first: first, messages: read, limit: s.maxMsg, reservation: s.recvCap(), dictLimit: ep.Memory.Limit(), mem: s.mem, ctx: ctx, acct: ep.Memory.Account(c.quota)}
	rdr, err := ipc.NewReaderFromMessageReader(&guardMessages{guard: guard}, ipc.WithAllocator(s.mem), ipc.WithBodySizeLimit(s.maxMsg))
	if err != nil {
		guard.close()
		if errors.Is(err, io.EOF) {
			return errNoSchema
		}
		return streamError(err)
	}
	ps := &putStream{ep: ep, rdr: rdr, guard: guard}
	// pump takes ps over; until then it is ours to release.
	owned := true
	defer func() {
		if owned {
			ps.release()
		}
	}()
	if err := writers.CheckStreamSchema(ctx, ep.Writer, rdr.Schema()); err != nil {
		return fmt.Errorf("doput: endpoint %q: %w", ep.Name, err)
	}
	guard.schema = rdr.Schema()

	ep.m.streams.Inc()
	defer ep.m.streams.Dec()
	owned = false
	switch {
	case t.stream:
		return s.putContinuous(ctx, stream, ps, t)
	case t.txn:
		return s.putTxn(ctx, stream, ps, t)
	}
	return s.putAuto(ctx, stream, ps)
}

// errNoSchema is a stream that ended before its schema came.
var errNoSchema = writers.Errorf(writers.ErrInvalid, "doput: the stream ended before its schema: send the descriptor and the schema first")

// recvBy reads a stream's next message before deadline, what (the
// descriptor or the schema) naming it in the error: the first messages,
// which name the endpoint and carry the schema, must come within
// limits.first_message_timeout. Nothing is reserved for them in advance:
// a reservation would be held by streams that never send (15 silent
// streams held a 1 GiB budget, blocking every endpoint). gRPC holds at
// most one message of a stream (MaxRecvMsgSize) as it arrives,
// limits.client_max_streams bounds the streams, and the guard charges the
// message at its size once the endpoint is known. A stream still silent
// at the deadline fails with DeadlineExceeded: its Recv goroutine returns
// when gRPC cancels the stream, after the handler. It holds nothing of the
// allocator or the budget, so Close does not wait for it (which could not
// be ordered before Close's wait anyway: the handler may start while the
// server stops).
func (s *Service) recvBy(stream flight.FlightService_DoPutServer, deadline time.Time, what string) (*flight.FlightData, error) {
	type result struct {
		fd  *flight.FlightData
		err error
	}
	got := make(chan result, 1)
	go func() {
		fd, err := stream.Recv()
		got <- result{fd, err}
	}()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case r := <-got:
		return r.fd, r.err
	case <-timer.C:
		s.log.Info("doput: a stream sent no "+what+" in time; closed", "timeout", s.first)
		return nil, fmt.Errorf("doput: no %s within %s of the stream's start (limits.first_message_timeout): send the descriptor and schema as soon as the stream opens: %w", what, s.first, context.DeadlineExceeded)
	}
}

// putAuto runs an auto-commit stream; it owns ps.
func (s *Service) putAuto(ctx context.Context, stream flight.FlightService_DoPutServer, ps *putStream) error {
	ep := ps.ep
	key := writers.AutoKey(rand.Text())
	ps.key, ps.write = key, true
	log := s.log.With("endpoint", ep.Name, "stream", key.Writer)
	log.Debug("auto-commit stream started")
	start := time.Now()

	p, err := s.pump(ctx, stream, ps)
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int64("quiver.rows", p.rows))
	if err != nil {
		s.abort(ctx, ep, key, log)
		logFailure(log, "auto-commit stream failed, nothing published", p.rows, err)
		return err
	}
	if p.rows == 0 {
		s.abort(ctx, ep, key, log)
		return sendFinal(stream, committedAck{Committed: true})
	}

	commitStart := time.Now()
	info, err := s.commitAuto(ctx, ep, key)
	ep.m.commit.Observe(time.Since(commitStart).Seconds())
	if err != nil {
		ep.m.commits.WithLabelValues(resultFailed).Inc()
		if !errors.Is(err, writers.ErrOutcomeUnknown) {
			// The commit did not happen: drop the staged data. With an
			// unknown outcome it may have, and rolling back could remove
			// published data.
			s.abort(ctx, ep, key, log)
		}
		log.Warn("auto-commit failed", "rows", p.rows, "err", err)
		return err
	}
	ep.m.commits.WithLabelValues(resultCommitted).Inc()
	log.Debug("auto-commit stream committed", "rows", p.rows, "batches", p.batches, "version", info.Version, "duration", time.Since(start))
	ack := committedAck{Committed: true, Rows: p.rows}
	if info.Version != writers.NoVersion {
		ack.Version = &info.Version
	}
	return sendFinal(stream, ack)
}

// commitAuto precommits and commits an auto-commit stream's key. Precommit
// runs under the stream's context (a client leaving before it ends aborts
// the stream); Commit does not, so that it is never cut in half.
func (s *Service) commitAuto(ctx context.Context, ep *endpoint, key writers.TxnKey) (writers.CommitInfo, error) {
	desc, err := ep.Writer.Precommit(ctx, key)
	if err != nil {
		return writers.CommitInfo{}, fmt.Errorf("doput: endpoint %q: precommit: %w", ep.Name, err)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	info, err := ep.Writer.Commit(cctx, key, []writers.Descriptor{desc})
	if err != nil {
		return writers.CommitInfo{}, fmt.Errorf("doput: endpoint %q: commit: %w", ep.Name, err)
	}
	return info, nil
}

// abort rolls back an auto-commit stream's key, even when the client has
// gone, and counts the abort.
func (s *Service) abort(ctx context.Context, ep *endpoint, key writers.TxnKey, log *slog.Logger) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if err := ep.Writer.Rollback(rctx, key); err != nil {
		log.Warn("rollback of a failed auto-commit stream failed; the sink may keep staged data until it cleans up", "err", err)
	}
	ep.m.commits.WithLabelValues(resultAborted).Inc()
}

// writeSchemaOnly hands the sink one zero-row batch of the schema of a
// transactional stream that sent no batch: an empty epoch (a checkpointing
// engine's empty micro-batch) still commits, recording the epoch, and
// creates the table in that schema when there is none.
func (s *Service) writeSchemaOnly(ctx context.Context, ps *putStream) error {
	b := array.NewRecordBuilder(s.mem, ps.rdr.Schema())
	defer b.Release()
	return s.write(ctx, ps, queued{rec: b.NewRecordBatch()}, 0)
}

// putTxn runs a transactional stream; it owns ps. The stream is cut off
// when its transaction ends meanwhile (expired, rolled back, fenced):
// rows staged after that would never be committed.
func (s *Service) putTxn(ctx context.Context, stream flight.FlightService_DoPutServer, ps *putStream, t putTarget) error {
	ep := ps.ep
	log := s.log.With("endpoint", ep.Name, "writer", t.writer, "epoch", t.epoch)
	actx, err := s.withAccess(ctx)
	if err != nil {
		ps.release()
		return err
	}
	if t.ingest != nil {
		// A Flight SQL ingest joins a transaction BeginTransaction named,
		// which must exist and be the caller's (sqlingest.go).
		actx = serverNamed(actx)
	}
	actx = txn.WithAttempt(withConn(actx), t.attempt)
	st, err := s.coord.Join(actx, t.writer, t.epoch, ep.Name)
	if err != nil {
		ps.release()
		return fmt.Errorf("doput: join transaction %s@%d on endpoint %q: %w", t.writer, t.epoch, ep.Name, err)
	}
	replayed := st.Replayed()
	log.Debug("transactional stream started", "replayed", replayed)

	ps.key, ps.write, ps.busy, ps.turn, ps.stage = st.Key(), !replayed, st.Busy, st.Turn, st.Stage
	ps.guard.busy = st.Busy
	ps.digest = s.coord.DigestsRows()
	tctx := st.Context(ctx)
	p, err := s.pump(tctx, stream, ps)
	if err == nil && p.batches == 0 && ps.write {
		err = s.writeSchemaOnly(tctx, ps)
	}
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int64("quiver.rows", p.rows))
	done := p.written
	if replayed {
		done = p.rows // compared with what the epoch's commit published
	}
	if err == nil && ps.digest {
		st.SetDigest(ps.rowsDigest)
	}
	if derr := st.Done(done, err); err == nil {
		err = derr
	}
	if err != nil {
		logFailure(log, "transactional stream failed; the transaction must be rolled back and the epoch replayed", p.rows, err)
		return err
	}
	log.Debug("transactional stream ended", "rows", p.rows, "batches", p.batches)
	return sendFinal(stream, stagedAck{Staged: !replayed, Replayed: replayed, Rows: p.rows, Writer: t.writer, Epoch: t.epoch})
}

// logFailure logs a failed stream: at info, the client's problem, unless
// a panic failed it, which is logged as an error with its stack.
func logFailure(log *slog.Logger, msg string, rows int64, err error) {
	if stack := writers.PanicStack(err); stack != "" {
		log.Error(msg, "rows", rows, "err", err, "stack", stack)
		return
	}
	log.Info(msg, "rows", rows, "err", err)
}

func sendFinal(stream flight.FlightService_DoPutServer, ack any) error {
	if sql, ok := stream.(sqlAckStream); ok {
		return sql.final(ack)
	}
	b, err := json.Marshal(ack)
	if err != nil {
		return err
	}
	return stream.Send(&flight.PutResult{AppMetadata: b})
}

// streamError classifies an error reading the stream: errors that already
// have a class or status (ours, gRPC's, the context's) stay; anything else
// comes from decoding the client's IPC data and is invalid input.
func streamError(err error) error {
	if classified(err) {
		return err
	}
	return writers.Errorf(writers.ErrInvalid, "doput: cannot decode the stream: %w", err)
}
