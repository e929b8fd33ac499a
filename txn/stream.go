package txn

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/quiver-ingest/quiver/writers"
)

// Stream is one transactional DoPut stream joined to a transaction. Its
// methods are safe for concurrent use.
type Stream struct {
	c *Coordinator
	t *txn // nil when replayed
	// replayOf is the committed transaction a replayed stream replays,
	// when the coordinator still holds it: its rows are compared at the
	// replay's commit (checkReplayLocked).
	replayOf *txn
	// bounded: its Stage counts against the transaction's owner's
	// Options.MaxStagedPerOwner (the stream's caller is no admin).
	bounded bool
	// digest is the digest of the rows the stream sent (SetDigest);
	// digested, that it was set.
	digest   uint64
	digested bool
	endpoint string
	key      writers.TxnKey
	ended    atomic.Bool
	cancel   context.CancelCauseFunc // of Context; nil before
}

// Replayed reports that the stream's epoch is at or below the last epoch the
// writer committed on the endpoint: the caller must read and acknowledge
// the stream's batches without writing them.
func (s *Stream) Replayed() bool { return s.t == nil }

// Key is the transaction key to pass to writers.Writer.Write.
func (s *Stream) Key() writers.TxnKey { return s.key }

// Context returns ctx, cancelled when the transaction is aborted before
// the stream's Done (expired, rolled back, fenced) with an ErrWrongState
// cause saying why: rows the stream writes after that would never be
// committed. Call it once, before writing.
func (s *Stream) Context(ctx context.Context) context.Context {
	if s.t == nil {
		return ctx
	}
	ctx, s.cancel = context.WithCancelCause(ctx)
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if s.t.state == StateAborted {
		s.cancel(s.t.abortedErr())
	} else {
		if s.t.cuts == nil {
			s.t.cuts = make(map[*Stream]context.CancelCauseFunc)
		}
		s.t.cuts[s] = s.cancel
	}
	return ctx
}

// Busy marks the stream as working on the server's side (waiting for
// memory, writing a batch) until the returned func is called: the
// transaction's ttl measures how long its client leaves it idle, so it
// does not run meanwhile, and restarts when the work ends. Call the pair
// also when a message arrives (the client is active).
func (s *Stream) Busy() (done func()) {
	if s.t == nil {
		return func() {}
	}
	s.c.mu.Lock()
	s.t.busy++
	s.c.mu.Unlock()
	return func() {
		s.c.mu.Lock()
		s.t.busy--
		if s.t.state == StateOpen {
			s.c.refreshLocked(s.t)
		}
		s.c.mu.Unlock()
	}
}

// Turn waits until no other stream of the transaction is writing to the
// stream's endpoint and returns the func that ends this stream's turn:
// several streams may join one transaction, but a sink never sees Write
// of one key concurrent with itself (writers.Writer), so their batches
// take turns. It returns ctx's cause if ctx ends first. A replayed
// stream writes nothing and never waits.
func (s *Stream) Turn(ctx context.Context) (done func(), err error) {
	if s.t == nil {
		return func() {}, nil
	}
	s.c.mu.Lock()
	p := s.t.parts[s.endpoint]
	if p.turn == nil {
		p.turn = make(chan struct{}, 1)
	}
	turn := p.turn
	s.c.mu.Unlock()
	select {
	case turn <- struct{}{}:
		return func() { <-turn }, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// SetDigest records the digest of the rows the stream sent (the sum of
// rowdigest.Of over its batches), compared with what the epoch committed
// when the epoch is replayed (txn.replay_check). Call it before Done. A
// stream that gives none is compared by its row count only.
func (s *Stream) SetDigest(d uint64) { s.digest, s.digested = d, true }

// Done ends the stream. rows is the number of rows written (for a
// replayed stream, the rows it sent: compared with the commit's). A non-nil err
// means the stream failed part-way: its rows may be partly staged, so the
// transaction is poisoned (precommit fails with ErrWrongState telling the
// client to roll back and replay the epoch). When the transaction was
// aborted while the stream wrote (expired, fenced, rolled back), the last
// stream's Done rolls back the sinks, and Done of a stream that saw no
// error returns the abort's (ErrWrongState): the stream must not be
// acknowledged as staged. Done is idempotent; later calls return nil.
func (s *Stream) Done(rows int64, err error) error {
	if !s.ended.CompareAndSwap(false, true) {
		return nil
	}
	sent := tally{rows: rows, digest: s.digest, undigested: !s.digested}
	if s.t == nil {
		if s.replayOf != nil && err == nil {
			s.c.mu.Lock()
			s.replayOf.noteReplayLocked(s.endpoint, sent)
			s.c.mu.Unlock()
		}
		return nil
	}
	c, t := s.c, s.t
	if s.cancel != nil {
		defer s.cancel(nil)
	}
	c.mu.Lock()
	delete(t.cuts, s)
	var aborted error
	if err == nil && t.state == StateAborted {
		aborted = t.abortedErr()
	}
	t.streams--
	if p := t.parts[s.endpoint]; p != nil {
		p.add(sent)
	}
	if err != nil && t.poison == "" {
		t.poison = fmt.Sprintf("endpoint %q: %v", s.endpoint, err)
	}
	if t.live() {
		c.refreshLocked(t)
	}
	discard := t.streams == 0 && len(t.discard) > 0
	c.mu.Unlock()
	if discard {
		if err := c.discardParts(context.Background(), t); err != nil {
			c.logger.Warn("txn: rolling back an aborted transaction after its last stream", "txn", t.id.String(), "err", err)
		}
	}
	return aborted
}

// Join attaches a transactional DoPut stream to (writer, epoch) on endpoint.
// If the epoch is at or below the last epoch the writer committed on
// endpoint (asked of the sink through CommittedEpoch and remembered), or
// the transaction is committed, the returned stream is Replayed. A stream
// naming an attempt (WithAttempt) joins that attempt only: another one is
// ErrWrongState, and so is joining it once precommitted or aborted. A
// stream naming none joins the open attempt begun on its own connection
// (WithConn). With no transaction, an aborted one, or an open attempt of
// another connection (or recovered after a restart) that staged no row,
// it begins a new attempt, fencing the old one: a client replaying an
// epoch after a crash never joins what the crashed one staged. An attempt
// of another connection holding acknowledged rows (open, or precommitted
// with its commit not decided) is neither joined nor dropped: ErrWrongState
// asks the client to begin (which fences) or to name the attempt. Joining an attempt a stream of which failed is
// ErrWrongState; an unknown endpoint ErrNotFound. Beginning fences older
// open epochs of the writer. ctx bounds the sink and journal calls of
// Join only; with an Access (WithAccess), joining requires every endpoint
// of the transaction, and beginning it those Begin requires. The caller
// must call Done.
func (c *Coordinator) Join(ctx context.Context, writer string, epoch int64, endpoint string) (*Stream, error) {
	id, err := checkID(ctx, "join", writer, epoch)
	if err != nil {
		return nil, err
	}
	if _, err := c.writerOf(endpoint); err != nil {
		return nil, err
	}
	if err := c.refuseStreamWriter("join", writer); err != nil {
		return nil, err
	}
	key := writers.TxnKey{Writer: writer, Epoch: epoch}
	last, err := c.lastCommitted(ctx, writer, endpoint)
	if err != nil {
		return nil, err
	}
	if epoch <= last {
		c.mu.Lock()
		defer c.mu.Unlock()
		s := &Stream{c: c, endpoint: endpoint, key: key}
		if t := c.txns[id]; t != nil && t.state == StateCommitted {
			s.replayOf = t
		}
		return s, nil
	}
	t, created, err := c.lockOrCreate(id, StateOpen, c.startCheck(ctx, "join"))
	if err != nil {
		return nil, err
	}
	defer t.op.Unlock()
	if created {
		if err := c.start(ctx, t, true, c.ttl, endpoint); err != nil {
			return nil, err
		}
	} else {
		c.mu.Lock()
		state, poison, joined := t.state, t.poison, t.parts[endpoint] != nil
		others := slices.Collect(maps.Keys(t.parts))
		err := c.mayUseLocked(ctx, "join", t)
		if err == nil && state != StateCommitted {
			err = checkAttemptLocked(ctx, "join", t)
		}
		// A context without a connection (not a Flight call) is taken for
		// the one that began the attempt.
		sameConn := connOf(ctx) == "" || connOf(ctx) == t.conn
		var staged int64
		for _, p := range t.parts {
			staged += p.rows
		}
		anonymous := attemptOf(ctx) == "" && state != StateCommitted && t.decision == nil
		// A put naming no attempt from another connection begins anew
		// only where that drops no acknowledged row: a crashed client's
		// stream cut mid-way, or an attempt that staged nothing. Else the
		// client must say which it means: begin (fencing), or the attempt.
		restart := anonymous && (state == StateAborted || !sameConn && state == StateOpen && staged == 0)
		ambiguous := anonymous && !sameConn && !restart && state != StateAborted
		ttl := t.ttl // a new attempt keeps the ttl the epoch was begun with
		c.mu.Unlock()
		switch {
		case err != nil:
			return nil, err
		case state == StateCommitted:
			return &Stream{c: c, endpoint: endpoint, key: key, replayOf: t}, nil
		case ambiguous:
			return nil, writers.Errorf(writers.ErrWrongState, "txn: %s: its attempt %s was begun on another connection and is %s with %d acknowledged rows: a put naming no attempt neither joins nor drops them; begin the epoch again to replay it (fencing that attempt), or name the attempt in the descriptor", id, orNone(t.attempt), state, staged)
		case restart:
			if state != StateAborted {
				if err := c.fence(ctx, t, "a put from another connection"); err != nil {
					return nil, err
				}
			}
			if err := c.start(ctx, t, false, ttl, endpoint); err != nil {
				return nil, err
			}
		case state == StatePrecommitted:
			return nil, writers.Errorf(writers.ErrWrongState, "txn: %s is precommitted: no stream can join it any more; commit or roll it back, and write new data under a newer epoch", id)
		case state == StateAborted:
			return nil, writers.Errorf(writers.ErrWrongState, "txn: %s was aborted: begin it again to replay the epoch", id)
		case poison != "":
			return nil, writers.Errorf(writers.ErrWrongState, "txn: %s: a stream of this transaction failed (%s): roll back and replay the epoch", id, poison)
		case !joined:
			if err := c.refuseSharedTable(id, endpoint, others); err != nil {
				return nil, err
			}
			rec := &record{typ: recJoin, Writer: writer, Epoch: epoch, At: c.now(), Endpoint: endpoint}
			if err := c.log(nil, rec); err != nil {
				return nil, err
			}
		}
	}
	c.mu.Lock()
	t.streams++
	c.refreshLocked(t)
	c.mu.Unlock()
	caller := callerOf(ctx)
	return &Stream{c: c, t: t, endpoint: endpoint, key: key, bounded: !caller.Admin}, nil
}

// refuseSharedTable refuses endpoint joining transaction id when one of
// its endpoints (others) writes the same table (writers.Targeted): the
// sinks record the epoch in the table under the writer, so the second
// endpoint's commit would take the epoch for committed and publish
// nothing.
func (c *Coordinator) refuseSharedTable(id txnID, endpoint string, others []string) error {
	w, err := c.writerOf(endpoint)
	if err != nil {
		return err
	}
	tw, ok := writers.Find[writers.Targeted](w)
	if !ok || tw.Target() == "" {
		return nil
	}
	target := tw.Target()
	for _, other := range others {
		ow, err := c.writerOf(other)
		if err != nil {
			continue // gone since it joined: its own commit fails
		}
		if o, ok := writers.Find[writers.Targeted](ow); ok && o.Target() == target {
			return writers.Errorf(writers.ErrInvalid, "txn: %s: endpoints %q and %q write the same table (%s): a transaction writes a table through one endpoint; send these rows through %q, or in another epoch", id, other, endpoint, target, other)
		}
	}
	return nil
}

// Stage counts n more bytes written by the stream into its transaction,
// before they are written: with Options.MaxStagedPerOwner, bytes beyond
// what the transaction's owner may have staged in its live transactions
// are ErrExhausted naming limits.client_staged_bytes. The bytes count
// until the transaction is committed or aborted.
func (s *Stream) Stage(n int64) error {
	if s.t == nil {
		return nil
	}
	c, t := s.c, s.t
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.live() {
		return nil // its writes fail on their own (Context)
	}
	if s.bounded && c.maxStaged > 0 && t.owner != "" && c.stagedBy[t.owner]+n > c.maxStaged {
		return writers.Errorf(writers.ErrExhausted, "txn: %s: %q has %d bytes staged in its open transactions, and %d more would pass its quota of %d (limits.client_staged_bytes): commit or roll back some first", t.id, t.owner, c.stagedBy[t.owner], n, c.maxStaged)
	}
	t.staged += n
	if t.owner != "" {
		c.stagedBy[t.owner] += n
	}
	return nil
}

// unstageLocked stops counting the bytes of t, which is no longer live.
func (c *Coordinator) unstageLocked(t *txn) {
	if t.staged == 0 {
		return
	}
	if t.owner != "" {
		if c.stagedBy[t.owner] -= t.staged; c.stagedBy[t.owner] <= 0 {
			delete(c.stagedBy, t.owner)
		}
	}
	t.staged = 0
}
