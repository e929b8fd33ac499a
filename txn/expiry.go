package txn

import (
	"sort"
	"time"
)

// run is the expiry goroutine: it wakes every tick until Close, checks the
// journal (a removed directory, recovery from a full disk) and expires
// transactions.
func (c *Coordinator) run(tick time.Duration) {
	defer close(c.donec)
	tk := time.NewTicker(tick)
	defer tk.Stop()
	for {
		select {
		case <-c.stopc:
			return
		case <-tk.C:
			c.checkJournal()
			c.expireNow(c.now())
		}
	}
}

// expireNow rolls back the open and precommitted transactions idle past
// their deadline at now, and forgets terminal ones that ended a retention
// ago. Streams keep their transaction alive while the server works for
// them and with every message (Stream.Busy); one whose client is idle for
// the ttl expires with its transaction, which cuts it off (Stream.Context). Decided commits never expire (a Commit or
// a restart finishes them).
func (c *Coordinator) expireNow(now time.Time) {
	var expired []*txn
	c.mu.Lock()
	for _, t := range c.txns {
		switch {
		// Not while a call holds op: a begin starting the epoch afresh
		// would journal into a transaction no longer in the map (and
		// answer from it). TryLock under mu: op comes before mu, never
		// wait for it here.
		case c.forgettableLocked(t, now) && t.op.TryLock():
			if len(t.discard) > 0 {
				c.logger.Warn("txn: forgetting an aborted transaction whose rollback kept failing; its staged files are left to vacuum", "writer", t.id.writer, "epoch", t.id.epoch, "endpoints", t.discard)
			}
			c.dropLocked(t)
			t.op.Unlock()
		case t.expiredLocked(now):
			expired = append(expired, t)
		}
	}
	sort.Slice(expired, func(i, k int) bool { return expired[i].deadline.Before(expired[k].deadline) })
	c.mu.Unlock()
	for _, t := range expired {
		t.op.Lock()
		c.mu.Lock()
		still := !t.gone && t.expiredLocked(now)
		c.mu.Unlock()
		if still {
			c.logger.Info("txn: rolling back a transaction idle past its ttl", "writer", t.id.writer, "epoch", t.id.epoch)
			if err := c.abort(c.ctx, t, abortExpired); err != nil {
				c.logger.Warn("txn: expiring a transaction", "writer", t.id.writer, "epoch", t.id.epoch, "err", err)
			}
		}
		t.op.Unlock()
	}
}

// owedRollbackKeep is how long an aborted transaction whose rollback
// failed is kept, for a begin of its epoch to retry the rollback.
const owedRollbackKeep = 24 * time.Hour

// forgettableLocked reports whether terminal t may be forgotten at now:
// a retention after it ended, or, while it owes a rollback (beginning it
// again retries that), a day or the retention, whichever is longer, and
// none in flight nor owed to a stream still ending. An epoch owing its
// replay is kept until its replay is committed or the client gives it up.
func (c *Coordinator) forgettableLocked(t *txn, now time.Time) bool {
	if t.live() || t.pending || t.rollingBack > 0 || c.owesReplayLocked(t.id) {
		return false
	}
	keep := c.retention
	if len(t.discard) > 0 {
		if t.streams > 0 {
			return false
		}
		keep = max(owedRollbackKeep, c.retention)
	}
	return now.Sub(t.ended) >= keep
}

// expiredLocked reports whether t is due for expiry at now.
func (t *txn) expiredLocked(now time.Time) bool {
	return t.live() && !t.pending && t.busy == 0 && t.decision == nil && !now.Before(t.deadline)
}
