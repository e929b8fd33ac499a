package flightsvc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/quiver-ingest/quiver/flightsvc/groupcommit"
	"github.com/quiver-ingest/quiver/writers"
)

// Answers of a continuous stream (PutResult app_metadata).
type (
	streamOpenAck struct {
		Writer     string `json:"writer"`
		DurableSeq *int64 `json:"durable_seq"`
	}
	streamDurableAck struct {
		DurableSeq *int64 `json:"durable_seq"`
		Version    *int64 `json:"version,omitempty"`
		Rows       int64  `json:"rows"`
		Closed     bool   `json:"closed,omitempty"`
	}
)

// seqOrNull is seq for an answer: null when it is none.
func seqOrNull(seq int64) *int64 {
	if seq == groupcommit.NoSeq {
		return nil
	}
	return &seq
}

func durableAck(a groupcommit.Ack, closed bool) streamDurableAck {
	ack := streamDurableAck{DurableSeq: seqOrNull(a.DurableSeq), Rows: a.Rows, Closed: closed}
	if a.Version != writers.NoVersion {
		ack.Version = &a.Version
	}
	return ack
}

// putContinuous runs a continuous stream (docs/flight.md, "Continuous
// streams"); it owns ps. The writer name is claimed for streams
// (txn.Coordinator.ClaimStreamWriter), the stream opens in the endpoint's
// group committer, which fences an open stream of the same writer, and
// the first answer tells the writer's durable seq. Batches are written
// into the current group as they arrive; every group commit that makes
// some of them durable is answered; when the client ends the stream, its
// last rows are committed and the last answer says closed. A stream that
// fails or is cancelled leaves what it wrote to be committed: its seqs
// make a resend harmless.
func (s *Service) putContinuous(ctx context.Context, stream flight.FlightService_DoPutServer, ps *putStream, t putTarget) error {
	ep := ps.ep
	log := s.log.With("endpoint", ep.Name, "writer", t.writer)
	if ep.group == nil {
		ps.release()
		return writers.Errorf(writers.ErrWrongState, "doput: endpoint %q (sink %q) does not take continuous streams: use auto-commit puts or transactions", ep.Name, ep.Sink)
	}
	actx, err := s.withAccess(ctx) // the token's writer names
	if err == nil {
		err = s.coord.ClaimStreamWriter(actx, t.writer)
	}
	if err != nil {
		ps.release()
		return fmt.Errorf("doput: endpoint %q: %w", ep.Name, err)
	}
	gs, durable, err := ep.group.Open(ctx, t.writer)
	if err != nil {
		ps.release()
		return fmt.Errorf("doput: endpoint %q: open the stream of writer %q: %w", ep.Name, t.writer, err)
	}
	if err := sendJSON(stream, streamOpenAck{Writer: t.writer, DurableSeq: seqOrNull(durable)}); err != nil {
		gs.Abandon()
		ps.release()
		return err
	}
	log.Debug("continuous stream opened", "durable_seq", durable)

	ps.seqs = true
	ps.drain = func(ctx context.Context, stream flight.FlightService_DoPutServer, queue <-chan queued) (pumped, error) {
		return s.drainContinuous(ctx, stream, ps, gs, queue)
	}
	p, err := s.pump(ctx, stream, ps)
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int64("quiver.rows", p.rows))
	if err != nil {
		gs.Abandon()
		logFailure(log, "continuous stream failed; what it wrote is committed, a resend from its durable seq is deduplicated", p.rows, err)
		return err
	}
	// The client has ended the stream: its last rows are committed
	// within an interval, even if it leaves meanwhile.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	last, err := gs.Close(cctx)
	if err != nil {
		return fmt.Errorf("doput: endpoint %q: writer %q: %w", ep.Name, t.writer, err)
	}
	log.Debug("continuous stream closed", "rows", p.rows, "batches", p.batches, "durable_seq", last.DurableSeq)
	return sendJSON(stream, durableAck(last, true))
}

// drainContinuous writes a continuous stream's queued batches into its
// group and answers the group commits that make them durable.
func (s *Service) drainContinuous(ctx context.Context, stream flight.FlightService_DoPutServer, ps *putStream, gs *groupcommit.Stream, queue <-chan queued) (pumped, error) {
	ep := ps.ep
	var p pumped
	for {
		select {
		case <-ctx.Done():
			return p, context.Cause(ctx)
		case <-gs.Ready():
			if err := answer(stream, gs); err != nil {
				return p, fmt.Errorf("doput: endpoint %q: %w", ep.Name, err)
			}
		case q, ok := <-queue:
			if !ok {
				// The receiver cancels before closing on error.
				return p, context.Cause(ctx)
			}
			rows := q.rec.NumRows()
			start := time.Now()
			dropped, err := gs.Write(ctx, q.rec, q.seq, q.size)
			ep.m.write.Observe(time.Since(start).Seconds())
			q.release(ps)
			if groupcommit.Stopping(err) {
				// The server stops: the last group's answer comes before
				// the stream's end.
				return p, finalAnswers(ctx, stream, gs)
			}
			if err != nil {
				return p, fmt.Errorf("doput: endpoint %q: write batch %d: %w", ep.Name, p.batches, err)
			}
			if !dropped {
				p.written += rows
				ep.m.rows.Add(float64(rows))
				ep.m.bytes.Add(float64(q.size))
				ep.m.batches.Inc()
			}
			ps.acked.Store(time.Now().UnixNano())
			ps.unacked.Add(-1)
			p.rows += rows
			p.batches++
		}
	}
}

// finalAnswers sends the answers gs still has, until it ends with the
// error it returns.
func finalAnswers(ctx context.Context, stream flight.FlightService_DoPutServer, gs *groupcommit.Stream) error {
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-gs.Ready():
			if err := answer(stream, gs); err != nil {
				return err
			}
		}
	}
}

// answer sends the durable answer gs has ready, if any; an error is the
// stream's end, or a failed send.
func answer(stream flight.FlightService_DoPutServer, gs *groupcommit.Stream) error {
	ack, ok, err := gs.Take()
	if err != nil || !ok {
		return err
	}
	return sendJSON(stream, durableAck(ack, false))
}

// TakesStreams reports whether endpoint takes continuous streams.
func (s *Service) TakesStreams(endpoint string) bool {
	ep := s.eps[endpoint]
	return ep != nil && ep.group != nil
}

// ContinuousStreams describes endpoint's open continuous streams (none
// when it takes none), for the status page.
func (s *Service) ContinuousStreams(endpoint string) []groupcommit.StreamStatus {
	if !s.TakesStreams(endpoint) {
		return nil
	}
	return s.eps[endpoint].group.Streams()
}

// batchSeq reads a continuous stream's batch's seq from its app_metadata:
// {"seq":N} with N an integer >= 0, or groupcommit.NoSeq when the
// metadata is empty or an object without "seq". Other keys are ignored;
// anything else (a seq that is not an integer >= 0, null included, or
// bytes after the object) is ErrInvalid.
func batchSeq(meta []byte) (int64, error) {
	if len(bytes.TrimSpace(meta)) == 0 {
		return groupcommit.NoSeq, nil
	}
	var m map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(meta))
	if err := d.Decode(&m); err != nil || m == nil || d.More() {
		return 0, writers.Errorf(writers.ErrInvalid, `app_metadata is not one JSON object {"seq":N}`)
	}
	raw, ok := m["seq"]
	if !ok {
		return groupcommit.NoSeq, nil
	}
	seq, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || seq < 0 {
		return 0, writers.Errorf(writers.ErrInvalid, `app_metadata "seq" must be an integer >= 0, got %.40s`, raw)
	}
	return seq, nil
}

// sendJSON sends v as one PutResult's app_metadata.
func sendJSON(stream flight.FlightService_DoPutServer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return stream.Send(&flight.PutResult{AppMetadata: b})
}
