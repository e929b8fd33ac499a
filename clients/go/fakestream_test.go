package quiver

import (
	"context"
	"encoding/json"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeStreams is the fake's continuous-stream state and fault knobs
// (guarded by fakeServer.mu). Endpoint "reject" refuses a stream's first
// batch (InvalidArgument); endpoint "epochs" refuses the opening
// (FailedPrecondition).
type fakeStreams struct {
	writers map[string]*fakeWriter
	// commitEvery commits (and answers) once that many batches are
	// pending; 0: only when a test sends on commit, and at close.
	commitEvery int
	// commit: a send makes the current stream commit what it holds.
	commit chan struct{}
	// failAfter: the stream that accepts this seq fails with Unavailable
	// right after (once; -1: never), committing its pending batches first,
	// without answering, if commitBeforeFail.
	failAfter        int64
	commitBeforeFail bool
	// refuseOpens: openings to refuse with Unavailable.
	refuseOpens int
	// closeGate, when set, holds the closed answer until it is closed;
	// atGate says a stream waits there.
	closeGate chan struct{}
	atGate    bool
	// noClosedAnswer ends streams at the client's end without the closed
	// answer (a broken server).
	noClosedAnswer bool
	// conns holds the seqs each stream connection received, replays
	// included, in order.
	conns [][]int64
}

// fakeWriter is one writer's committed state.
type fakeWriter struct {
	durable   int64   // -1: never committed
	committed []int64 // seqs in commit order
	version   int64
	gen       int                     // streams opened; the current one fences older ones
	fence     context.CancelCauseFunc // ends the current stream
}

// doStream serves a continuous stream; it owns rdr.
func (f *fakeServer) doStream(stream flight.FlightService_DoPutServer, rdr *flight.Reader, endpoint, writer string) error {
	ctx, fence := context.WithCancelCause(stream.Context())
	defer fence(nil)
	fs := &f.streams
	f.mu.Lock()
	if fs.refuseOpens > 0 || endpoint == "epochs" {
		code := codes.FailedPrecondition
		if fs.refuseOpens > 0 {
			fs.refuseOpens--
			code = codes.Unavailable
		}
		f.mu.Unlock()
		rdr.Release()
		return status.Errorf(code, "fake: stream of %q refused", writer)
	}
	w := fs.writers[writer]
	if w == nil {
		w = &fakeWriter{durable: -1}
		fs.writers[writer] = w
	}
	if w.fence != nil {
		w.fence(status.Errorf(codes.Aborted, "fake: stream of writer %q fenced by a newer one", writer))
	}
	w.gen++
	gen := w.gen
	w.fence = fence
	opened := w.durable
	conn := len(fs.conns)
	fs.conns = append(fs.conns, []int64{})
	commitCh := fs.commit
	f.mu.Unlock()

	type batch struct {
		seq, rows int64
		err       error
	}
	batches := make(chan batch)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer rdr.Release()
		defer close(batches)
		for rdr.Next() {
			var m struct{ Seq *int64 }
			b := batch{rows: rdr.RecordBatch().NumRows()}
			if err := json.Unmarshal(rdr.LatestAppMetadata(), &m); err != nil || m.Seq == nil {
				b.err = status.Errorf(codes.InvalidArgument, "fake: batch without a seq: %q", rdr.LatestAppMetadata())
			} else {
				b.seq = *m.Seq
			}
			select {
			case batches <- b:
			case <-ctx.Done():
				return
			}
		}
		if err := rdr.Err(); err != nil {
			select {
			case batches <- batch{err: err}:
			case <-ctx.Done():
			}
		}
	}()

	if err := sendAck(stream, map[string]any{"writer": writer, "durable_seq": seqOrNull(opened)}); err != nil {
		return err
	}
	var pending []batch
	prev := int64(-1)
	// commit makes pending durable and, if answer, says so.
	commit := func(answer, closed bool) error {
		f.mu.Lock()
		if w.gen != gen {
			f.mu.Unlock()
			return status.Error(codes.Aborted, "fake: fenced")
		}
		var rows int64
		for _, b := range pending {
			w.committed = append(w.committed, b.seq)
			w.durable = b.seq
			rows += b.rows
		}
		if len(pending) > 0 {
			w.version++
		}
		ans := map[string]any{"durable_seq": seqOrNull(w.durable), "version": w.version, "rows": rows}
		if closed {
			ans["closed"] = true
		}
		f.mu.Unlock()
		pending = nil
		if !answer {
			return nil
		}
		return sendAck(stream, ans)
	}
	for {
		var (
			b  batch
			ok bool
		)
		select {
		case b, ok = <-batches:
		case <-commitCh:
			if err := commit(true, false); err != nil {
				return err
			}
			continue
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if !ok { // the client ended its side
			f.mu.Lock()
			gate, noClosed := fs.closeGate, fs.noClosedAnswer
			fs.atGate = gate != nil
			f.mu.Unlock()
			if gate != nil {
				select {
				case <-gate:
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
			if noClosed {
				return commit(true, false)
			}
			return commit(true, true)
		}
		if b.err != nil {
			return b.err
		}
		if endpoint == "reject" {
			return status.Error(codes.InvalidArgument, "fake: endpoint reject refuses every batch")
		}
		f.mu.Lock()
		fs.conns[conn] = append(fs.conns[conn], b.seq)
		fail := fs.failAfter == b.seq
		if fail {
			fs.failAfter = -1
		}
		before, every := fs.commitBeforeFail, fs.commitEvery
		f.mu.Unlock()
		switch {
		case b.seq <= opened:
			continue // a replay of a durable batch
		case b.seq <= prev:
			return status.Errorf(codes.InvalidArgument, "fake: seq %d after %d", b.seq, prev)
		}
		prev = b.seq
		pending = append(pending, b)
		if fail {
			if before {
				if err := commit(false, false); err != nil {
					return err
				}
			}
			return status.Error(codes.Unavailable, "fake: storage hiccup")
		}
		if every > 0 && len(pending) >= every {
			if err := commit(true, false); err != nil {
				return err
			}
		}
	}
}

func seqOrNull(seq int64) any {
	if seq < 0 {
		return nil
	}
	return seq
}

// writerState returns a copy of writer's committed seqs and durable seq.
func (f *fakeServer) writerState(writer string) (committed []int64, durable int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.streams.writers[writer]
	if w == nil {
		return nil, -1
	}
	return append([]int64(nil), w.committed...), w.durable
}

// streamConns returns a copy of the seqs each connection received.
func (f *fakeServer) streamConns() [][]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([][]int64, len(f.streams.conns))
	for i, c := range f.streams.conns {
		out[i] = append([]int64(nil), c...)
	}
	return out
}
