package txn

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/quiver-ingest/quiver/writers"
)

// Precommit asks every participant to make its staged data durable and
// returns their descriptors; journaled before it returns. Precommit of a
// precommitted transaction returns the same result (deadline refreshed);
// of a committed one, its status with Replayed. While a stream is still
// writing, or after a stream failed, or once aborted, it is ErrWrongState.
// For an unknown transaction whose epoch is at or below an epoch the writer
// committed (on any endpoint) it answers precommitted with Replayed and no
// participants; other unknown transactions are ErrNotFound. With an Access
// (WithAccess), a transaction touching a refused endpoint is
// ErrPermissionDenied.
//
// When a sink's Precommit fails, the error is returned (class kept) and
// the transaction stays open: the client may retry precommit (sinks'
// Precommit is repeatable) or roll back.
func (c *Coordinator) Precommit(ctx context.Context, writer string, epoch int64) (st Status, err error) {
	ctx, span := c.startSpan(ctx, "quiver.precommit", writer, epoch)
	defer func() { endSpan(span, st, err) }()
	return c.precommit(ctx, writer, epoch)
}

func (c *Coordinator) precommit(ctx context.Context, writer string, epoch int64) (Status, error) {
	id, err := checkID(ctx, "precommit", writer, epoch)
	if err != nil {
		return Status{}, err
	}
	t := c.lockTxn(id)
	if t == nil {
		c.mu.Lock()
		replay := c.committedAnywhereLocked(writer, epoch)
		c.mu.Unlock()
		if replay {
			return Status{Writer: writer, Epoch: epoch, State: StatePrecommitted, Replayed: true}, nil
		}
		return Status{}, writers.Errorf(writers.ErrNotFound, "txn: no transaction %s on this server: begin it or write to it first", id)
	}
	defer t.op.Unlock()
	c.mu.Lock()
	if err := c.mayUseLocked(ctx, "precommit", t); err != nil {
		c.mu.Unlock()
		return Status{}, err
	}
	if t.state != StateCommitted {
		if err := checkAttemptLocked(ctx, "precommit", t); err != nil {
			c.mu.Unlock()
			return Status{}, err
		}
	}
	switch {
	case t.state == StatePrecommitted || t.state == StateCommitted:
		if t.state == StatePrecommitted {
			c.refreshLocked(t)
		}
		st := c.statusLocked(t)
		st.Replayed = st.Replayed || t.state == StateCommitted
		c.mu.Unlock()
		return st, nil
	case t.state == StateAborted:
		c.mu.Unlock()
		return Status{}, writers.Errorf(writers.ErrWrongState, "txn: precommit %s: the transaction was aborted: begin it again to replay the epoch", id)
	case t.streams > 0:
		n := t.streams
		c.mu.Unlock()
		return Status{}, writers.Errorf(writers.ErrWrongState, "txn: precommit %s: %d stream(s) still writing: precommit once they have ended", id, n)
	case t.poison != "":
		poison := t.poison
		c.mu.Unlock()
		return Status{}, writers.Errorf(writers.ErrWrongState, "txn: precommit %s: a stream of this transaction failed (%s): roll back and replay the epoch", id, poison)
	}
	// Joins wait for op, which we hold, so parts and rows are stable.
	eps := slices.Sorted(maps.Keys(t.parts))
	parts := make([]recordPart, len(eps))
	for i, ep := range eps {
		parts[i] = newRecordPart(ep, t.parts[ep])
	}
	ttl := t.ttl
	c.mu.Unlock()

	if err := c.precommitParts(ctx, t, parts); err != nil {
		return Status{}, err
	}
	now := c.now()
	rec := &record{typ: recPrecommit, Writer: writer, Epoch: epoch, At: now, TTLMillis: ttl.Milliseconds(), Deadline: now.Add(ttl), Participants: parts}
	err = c.log(func() {
		t.replayed = len(parts) == 0 && c.committedAnywhereLocked(writer, epoch)
	}, rec)
	if err != nil {
		return Status{}, err
	}
	c.crashAt(crashAfterPrecommit)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statusLocked(t), nil
}

// precommitParts runs the participants' Precommit concurrently and fills
// in their descriptors.
func (c *Coordinator) precommitParts(ctx context.Context, t *txn, parts []recordPart) error {
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i := range parts {
		wg.Go(func() {
			p := &parts[i]
			defer c.recoverSink(&errs[i], "precommit", t.id, p.Endpoint)
			w, err := c.writerOf(p.Endpoint)
			if err != nil {
				errs[i] = err
				return
			}
			d, err := w.Precommit(ctx, t.key())
			if err != nil {
				errs[i] = fmt.Errorf("txn: precommit %s on endpoint %q: %w (the transaction stays open: retry precommit or roll back)", t.id, p.Endpoint, err)
				return
			}
			p.Descriptor = d
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
