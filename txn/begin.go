package txn

import (
	"context"
	"sort"
	"time"

	"github.com/quiver-ingest/quiver/writers"
)

// Begin starts a new attempt of transaction (writer, epoch), journaled
// before it returns, bound to ctx's connection (WithConn). An open
// attempt of the epoch, or a precommitted one whose commit is not
// decided, is fenced first: aborted, its staged rows discarded (a client
// replaying an epoch after a crash starts clean, whatever the crashed one
// left). Beginning a committed epoch returns it with Replayed set. A newer
// epoch fences (aborts and rolls back) older open transactions of the
// same writer; beginning an epoch older than an open or precommitted
// epoch of the writer, or later than one owing its replay, is
// ErrWrongState. ttl <= 0 means the default.
// Epochs below 0, empty or too long writers, a ttl above MaxTTL and an
// epoch other than 0 of a one-epoch writer (Options.OneEpoch) are
// ErrInvalid.
//
// With an Access in ctx (WithAccess), Begin is ErrPermissionDenied unless
// the caller may use every endpoint of the transaction and of the writer's
// open and precommitted transactions, which beginning may fence.
func (c *Coordinator) Begin(ctx context.Context, writer string, epoch int64, ttl time.Duration) (Status, error) {
	return c.begin(ctx, writer, epoch, ttl, false)
}

// Adopt is Begin, except that a precommitted attempt is kept and returned
// (ttl refreshed) so that it can be committed: what a client resuming
// after a crash between precommit and commit asks for.
func (c *Coordinator) Adopt(ctx context.Context, writer string, epoch int64, ttl time.Duration) (Status, error) {
	return c.begin(ctx, writer, epoch, ttl, true)
}

func (c *Coordinator) begin(ctx context.Context, writer string, epoch int64, ttl time.Duration, adopt bool) (Status, error) {
	id, err := checkID(ctx, "begin", writer, epoch)
	if err != nil {
		return Status{}, err
	}
	if err := c.refuseStreamWriter("begin", writer); err != nil {
		return Status{}, err
	}
	if ttl > c.maxTTL {
		return Status{}, writers.Errorf(writers.ErrInvalid, "txn: begin %s: ttl %s is above the maximum %s (txn.max_ttl): ask for less, or have the operator raise txn.max_ttl", id, ttl, c.maxTTL)
	}
	if ttl <= 0 {
		ttl = c.ttl
	}
	t, created, err := c.lockOrCreate(id, StateOpen, c.startCheck(ctx, "begin"))
	if err != nil {
		return Status{}, err
	}
	defer t.op.Unlock()
	if !created {
		c.mu.Lock()
		if err := c.mayStartLocked(ctx, "begin", id, t); err != nil {
			c.mu.Unlock()
			return Status{}, err
		}
		switch {
		case t.state == StatePrecommitted && (adopt || t.decision != nil):
			// A decided commit is finished by Commit, never fenced.
			t.ttl = ttl
			c.refreshLocked(t)
			st := c.statusLocked(t)
			c.mu.Unlock()
			return st, nil
		case t.state == StateCommitted:
			st := c.statusLocked(t)
			c.mu.Unlock()
			st.Replayed = true
			return st, nil
		case t.live():
			c.mu.Unlock()
			if err := c.fence(ctx, t, "begin"); err != nil {
				return Status{}, err
			}
		default:
			c.mu.Unlock()
		}
	}
	if err := c.start(ctx, t, created, ttl, ""); err != nil {
		return Status{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statusLocked(t), nil
}

// lockOrCreate returns transaction id with its op lock held. When it does
// not exist, check (run under c.mu) may refuse it; otherwise it is created
// in state, pending, and created is true.
func (c *Coordinator) lockOrCreate(id txnID, state State, check func(txnID) error) (t *txn, created bool, err error) {
	for {
		if t := c.lockTxn(id); t != nil {
			return t, false, nil
		}
		c.mu.Lock()
		if c.txns[id] != nil {
			// Created since lockTxn looked: wait for it like everyone else.
			c.mu.Unlock()
			continue
		}
		err := c.oneEpochOnly(id)
		if err == nil && check != nil {
			err = check(id)
		}
		if err != nil {
			c.mu.Unlock()
			return nil, false, err
		}
		t := c.newTxnLocked(id, state)
		c.mu.Unlock()
		return t, true, nil
	}
}

// oneEpochOnly refuses an epoch other than 0 of a one-epoch writer
// (Options.OneEpoch): what makes its undone commits owe no replay
// (owesOnUndo). Checked where transactions are created, so that one an
// earlier version journaled can still be committed or rolled back.
func (c *Coordinator) oneEpochOnly(id txnID) error {
	if id.epoch != 0 && c.oneEpoch != nil && c.oneEpoch(id.writer) {
		return writers.Errorf(writers.ErrInvalid, "txn: %s: writer %q is named as a Flight SQL transaction, whose only epoch is 0: use another writer name", id, id.writer)
	}
	return nil
}

// fencedLocked refuses epochs older than an open or precommitted epoch of
// the same writer.
func (c *Coordinator) fencedLocked(id txnID) error {
	for e := range c.liveByWriter[id.writer] {
		if e > id.epoch {
			return writers.Errorf(writers.ErrWrongState, "txn: %s is fenced by epoch %d of the same writer (open or precommitted): use an epoch above %d", id, e, e)
		}
	}
	return nil
}

// olderLiveLocked returns the oldest open or precommitted transaction of
// id's writer with an epoch below id's.
func (c *Coordinator) olderLiveLocked(id txnID) (*txn, bool) {
	var oldest *txn
	for e, t := range c.liveByWriter[id.writer] {
		if e < id.epoch && (oldest == nil || e < oldest.id.epoch) {
			oldest = t
		}
	}
	return oldest, oldest != nil
}

// start journals the begin of a new attempt of t (op held; created now,
// or aborted and to be started afresh), bound to ctx's connection, with a
// join of endpoint unless it is "", then fences the writer's older open
// epochs. A failed start forgets a created t.
func (c *Coordinator) start(ctx context.Context, t *txn, created bool, ttl time.Duration, endpoint string) error {
	c.mu.Lock()
	if err := c.replayOwedLocked("begin", t.id); err != nil {
		if created {
			c.dropLocked(t)
		}
		c.mu.Unlock()
		return err
	}
	if !created {
		// A rollback that failed (the sink down when a restart or the TTL
		// aborted the epoch) is retried here: nothing else would before the
		// client gives up, and the epoch cannot start afresh without it.
		if t.streams == 0 && t.rollingBack == 0 && len(t.discard) > 0 {
			c.mu.Unlock()
			if err := c.discardPartsWithin(ctx, t, beginRollbackWait); err != nil {
				return writers.Errorf(writers.ErrUnavailable, "txn: %s was aborted and rolling back its last attempt failed again: %w: retry once the sink is reachable", t.id, err)
			}
			c.mu.Lock() // t is not forgotten meanwhile: op is held (expireNow)
		}
		// The key is the same for every incarnation of the epoch: the old
		// one's streams and rollbacks must be over before new data comes.
		if t.streams > 0 || len(t.discard) > 0 || t.rollingBack > 0 {
			n := t.streams
			c.mu.Unlock()
			return writers.Errorf(writers.ErrWrongState, "txn: %s was aborted and is still being rolled back (%d streams ending): retry shortly", t.id, n)
		}
		if err := c.fencedLocked(t.id); err != nil {
			c.mu.Unlock()
			return err
		}
		if err := c.replayOwedLocked("begin", t.id); err != nil { // mu was let go for the rollback
			c.mu.Unlock()
			return err
		}
	}
	if created {
		t.owner = callerOf(ctx).Owner // a begin afresh keeps its owner (mayStartLocked)
	}
	if err := c.quotaLocked(ctx, t); err != nil {
		if created {
			c.dropLocked(t)
		}
		c.mu.Unlock()
		return err
	}
	owner := t.owner
	// Live from here for an undo of an earlier epoch (laterLiveLocked):
	// checked for debts above, this begin would otherwise land after the
	// undo made the earlier epoch owe its replay.
	t.starting = true
	c.mu.Unlock()
	now := c.now()
	recs := []*record{{typ: recBegin, Writer: t.id.writer, Epoch: t.id.epoch, Attempt: c.newAttempt(), At: now, TTLMillis: ttl.Milliseconds(), Deadline: now.Add(ttl), Owner: owner}}
	if endpoint != "" {
		recs = append(recs, &record{typ: recJoin, Writer: t.id.writer, Epoch: t.id.epoch, At: now, Endpoint: endpoint})
	}
	if err := c.log(func() { t.conn, t.starting = connOf(ctx), false }, recs...); err != nil {
		c.mu.Lock()
		t.starting = false
		if created {
			c.dropLocked(t)
		}
		c.mu.Unlock()
		return err
	}
	c.fenceOlder(ctx, t.id)
	return nil
}

// fenceOlder aborts the open transactions of id's writer with older epochs
// (precommitted ones wait for their commit). Called with id's op held:
// newer epochs lock before older ones.
func (c *Coordinator) fenceOlder(ctx context.Context, id txnID) {
	c.mu.Lock()
	var older []*txn
	for e, o := range c.liveByWriter[id.writer] {
		if e < id.epoch && o.state == StateOpen {
			older = append(older, o)
		}
	}
	c.mu.Unlock()
	sort.Slice(older, func(i, k int) bool { return older[i].id.epoch < older[k].id.epoch })
	for _, o := range older {
		o.op.Lock()
		c.mu.Lock()
		still := !o.gone && !o.pending && o.state == StateOpen
		c.mu.Unlock()
		if still {
			c.logger.Info("txn: fencing an older open epoch", "writer", id.writer, "epoch", o.id.epoch, "by", id.epoch)
			if err := c.abort(ctx, o, abortFenced); err != nil {
				c.logger.Warn("txn: fencing an older epoch", "writer", id.writer, "epoch", o.id.epoch, "err", err)
			}
		}
		o.op.Unlock()
	}
}
