package txn

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/quiver-ingest/quiver/writers"
)

// Rollback aborts an open or precommitted transaction and discards its
// staged data (once its streams have ended). Idempotent: rolling back an
// aborted transaction retries the sink rollbacks that failed, and the
// deletions of an aborted precommit's files (discardPrecommitted). Rolling back
// a committed transaction, or one whose commit is decided, is
// ErrWrongState; an unknown transaction answers aborted. When a sink
// rollback fails the transaction is aborted anyway and the error is
// returned with the status. With an Access (WithAccess), a transaction
// touching a refused endpoint is ErrPermissionDenied. The replay an
// epoch owes (its decided commit refused by every endpoint was undone)
// stays owed: see GiveUp.
func (c *Coordinator) Rollback(ctx context.Context, writer string, epoch int64) (Status, error) {
	return c.rollback(ctx, writer, epoch, false)
}

// GiveUp is Rollback that also gives up the replay the epoch owes: later
// epochs of the writer may then begin and commit, and the epoch's rows are
// lost unless it is replayed before them. Only this settles the debt
// short of committing the replay: a rollback cleaning up after a failed
// replay attempt (a client's error path) must not.
func (c *Coordinator) GiveUp(ctx context.Context, writer string, epoch int64) (Status, error) {
	return c.rollback(ctx, writer, epoch, true)
}

func (c *Coordinator) rollback(ctx context.Context, writer string, epoch int64, giveUp bool) (Status, error) {
	id, err := checkID(ctx, "rollback", writer, epoch)
	if err != nil {
		return Status{}, err
	}
	t := c.lockTxn(id)
	if t == nil { // an epoch owing its replay is never forgotten
		return Status{Writer: writer, Epoch: epoch, State: StateAborted}, nil
	}
	defer t.op.Unlock()
	c.mu.Lock()
	state, decided := t.state, t.decision != nil
	err = c.mayUseLocked(ctx, "rollback", t)
	if err == nil && checkAttemptLocked(ctx, "rollback", t) != nil {
		switch {
		case giveUp && t.live():
			// The replay is the epoch's to give up, but not another
			// attempt's rows: say so rather than answer as if done.
			err = writers.Errorf(writers.ErrWrongState, "txn: give up %s: attempt %s is current: roll that one back with give_up (or name no attempt)", id, orNone(t.attempt))
		case giveUp:
			// Aborted: nothing of another attempt is touched; the debt
			// is the epoch's, whichever attempt the caller names.
		default:
			// Another attempt is current: this one is gone already, and
			// the current one is not the caller's to roll back.
			st := c.statusLocked(t)
			c.mu.Unlock()
			return st, nil
		}
	}
	c.mu.Unlock()
	if err != nil {
		return Status{}, err
	}
	switch {
	case state == StateCommitted:
		return Status{}, writers.Errorf(writers.ErrWrongState, "txn: %s is committed: it cannot be rolled back", id)
	case decided:
		return Status{}, writers.Errorf(writers.ErrWrongState, "txn: the commit of %s is decided: it can no longer be rolled back; retry commit to finish it", id)
	case state == StateAborted:
		if giveUp {
			if err := c.giveUpReplay(t); err != nil {
				return Status{}, err
			}
		}
		err = c.discardParts(ctx, t)
		c.mu.Lock()
		retry := t.undiscarded
		t.undiscarded = nil
		c.mu.Unlock()
		c.discardPrecommitted(ctx, t, retry)
	default:
		// abort fails before changing the state only when the journal
		// does; afterwards the error is a sink rollback's.
		why := abortRollback
		if giveUp {
			why = abortGiveUp
		}
		if err = c.abort(ctx, t, why); c.isLive(t) {
			return Status{}, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statusLocked(t), err
}

// giveUpReplay journals that the client gives aborted t's epoch up (GiveUp)
// when it owes its replay (an abort record of it with GaveUp: applyLocked settles
// the debt), so that later epochs of the writer may begin, also after a
// restart.
func (c *Coordinator) giveUpReplay(t *txn) error {
	c.mu.Lock()
	owes := c.owesReplayLocked(t.id)
	c.mu.Unlock()
	if !owes {
		return nil
	}
	return c.log(nil, &record{typ: recAbort, Writer: t.id.writer, Epoch: t.id.epoch, At: c.now(), GaveUp: true})
}

// isLive reports whether t is open or precommitted.
func (c *Coordinator) isLive(t *txn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return t.live()
}

// abortCause is why a transaction is aborted, as its abort record says.
type abortCause int

const (
	abortFenced   abortCause = iota // a begin of the epoch or of a later one
	abortRollback                   // the client's rollback
	abortGiveUp                     // the client's rollback giving up a replay owed (GiveUp)
	abortExpired                    // idle past its ttl
	abortRefused                    // a decided commit every endpoint refused: owes its replay
)

// abort journals the abort of t (op held; open or precommitted, its commit
// not decided unless abortDecided undoes it) and rolls its participants
// back, now or when its last stream ends.
func (c *Coordinator) abort(ctx context.Context, t *txn, why abortCause) error {
	c.markFenced(ctx, t)
	precommitted := c.ownPrecommits(t)
	expired := why == abortExpired
	c.mu.Lock()
	gaveUp := why == abortGiveUp && c.owesReplayLocked(t.id)
	c.mu.Unlock()
	rec := &record{typ: recAbort, Writer: t.id.writer, Epoch: t.id.epoch, At: c.now(), Expired: expired,
		OwesReplay: why == abortRefused && c.owesOnUndo(t.id), GaveUp: gaveUp}
	err := c.log(func() { t.discard = slices.Sorted(maps.Keys(t.parts)) }, rec)
	if err != nil {
		return err
	}
	if expired {
		c.metrics.result(resultExpired)
	} else {
		c.metrics.result(resultAborted)
	}
	err = c.discardParts(ctx, t)
	c.discardPrecommitted(ctx, t, precommitted)
	return err
}

// ownPrecommits returns the descriptors of precommitted t (commit not
// decided) by endpoint, when the coordinator deletes the files of
// aborted precommits (Options.DiscardPrecommitted); nil otherwise.
func (c *Coordinator) ownPrecommits(t *txn) map[string]writers.Descriptor {
	if !c.discardPrecommits {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.state != StatePrecommitted || t.decision != nil {
		// An undone decision's files are left to vacuum: its undoing
		// rests on the sinks' committed epochs, whose memory is finite
		// (a vacuumed Lance history), and a wrong answer must not delete
		// files a published version names.
		return nil
	}
	descs := make(map[string]writers.Descriptor, len(t.parts))
	for ep, p := range t.parts {
		if p.desc != nil {
			descs[ep] = p.desc
		}
	}
	return descs
}

// discardPrecommitted deletes the files of an aborted precommit (descs,
// from ownPrecommits). A failure is logged and kept for the next Rollback
// to retry (until a restart: then the files stay, unreferenced, for
// vacuum).
func (c *Coordinator) discardPrecommitted(ctx context.Context, t *txn, descs map[string]writers.Descriptor) {
	if len(descs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.commitTimeout)
	defer cancel()
	for _, ep := range slices.Sorted(maps.Keys(descs)) {
		w, ok := c.eps.Writer(ep)
		if !ok {
			continue
		}
		if d, ok := writers.Find[writers.PrecommitDiscarder](w); ok {
			if err := d.DiscardPrecommitted(ctx, descs[ep]); err != nil {
				c.logger.Warn("txn: deleting the files of a rolled-back precommit failed; rolling it back again retries, else vacuum reclaims them", "txn", t.id.String(), "endpoint", ep, "err", err)
				c.mu.Lock()
				if t.undiscarded == nil {
					t.undiscarded = make(map[string]writers.Descriptor)
				}
				t.undiscarded[ep] = descs[ep]
				c.mu.Unlock()
			}
		}
	}
}

// discardParts rolls back the endpoints listed in t.discard, unless
// streams are still writing: Rollback must not race Write of the same key,
// so then the last Stream.Done does it. Failed endpoints stay listed for a
// later Rollback call.
func (c *Coordinator) discardParts(ctx context.Context, t *txn) error {
	return c.discardPartsWithin(ctx, t, c.commitTimeout)
}

// beginRollbackWait bounds the rollback a begin retries (the begin holds
// the transaction's op lock meanwhile; clients retry begins for 30 s).
const beginRollbackWait = 10 * time.Second

// discardPartsWithin is discardParts with the sinks' rollbacks bounded by
// d.
func (c *Coordinator) discardPartsWithin(ctx context.Context, t *txn, d time.Duration) error {
	c.mu.Lock()
	if t.streams > 0 {
		c.mu.Unlock()
		return nil
	}
	eps := t.discard
	t.discard = nil
	if len(eps) > 0 {
		t.rollingBack++
	}
	c.mu.Unlock()
	if len(eps) == 0 {
		return nil
	}
	defer func() {
		c.mu.Lock()
		t.rollingBack--
		c.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	defer cancel()
	var failed []string
	var errs []error
	for _, ep := range eps {
		w, ok := c.eps.Writer(ep)
		if !ok {
			c.logger.Warn("txn: cannot roll back on an endpoint that is no longer configured", "txn", t.id.String(), "endpoint", ep)
			continue
		}
		if err := w.Rollback(ctx, t.key()); err != nil {
			failed = append(failed, ep)
			errs = append(errs, fmt.Errorf("txn: roll back %s on endpoint %q: %w (the transaction is aborted; roll back again to retry)", t.id, ep, err))
		}
	}
	if len(failed) > 0 {
		c.mu.Lock()
		t.discard = append(t.discard, failed...)
		c.mu.Unlock()
	}
	return errors.Join(errs...)
}
