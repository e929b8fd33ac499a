package txn

import (
	"context"
	"maps"
	"slices"
	"sort"

	"github.com/quiver-ingest/quiver/txn/journal"
)

// recover rebuilds the state from the journal's records, then aborts the
// open transactions (their streams died with the previous process) and
// finishes the decided commits. Precommitted transactions stay as they
// are, deadlines included.
func (c *Coordinator) recover(ctx context.Context, jrs []journal.Record) error {
	c.mu.Lock()
	for _, jr := range jrs {
		r, err := decodeRecord(jr)
		if err != nil {
			c.mu.Unlock()
			return err
		}
		c.applyLocked(r)
	}
	var open, decided []*txn
	precommitted := 0
	for _, t := range c.txns {
		switch {
		case t.state == StateOpen:
			open = append(open, t)
		case t.decision != nil:
			decided = append(decided, t)
		case t.state == StatePrecommitted:
			precommitted++
		}
	}
	c.mu.Unlock()
	byID := func(ts []*txn) {
		sort.Slice(ts, func(i, k int) bool {
			if ts[i].id.writer != ts[k].id.writer {
				return ts[i].id.writer < ts[k].id.writer
			}
			return ts[i].id.epoch < ts[k].id.epoch
		})
	}
	byID(open)
	byID(decided)

	if len(open) > 0 {
		recs := make([]*record, len(open))
		now := c.now()
		for i, t := range open {
			recs[i] = &record{typ: recAbort, Writer: t.id.writer, Epoch: t.id.epoch, At: now}
		}
		err := c.log(func() {
			for _, t := range open {
				t.discard = slices.Sorted(maps.Keys(t.parts))
			}
		}, recs...)
		if err != nil {
			return err
		}
		for _, t := range open {
			c.metrics.result(resultAborted)
			if err := c.discardParts(ctx, t); err != nil {
				c.logger.Warn("txn: recovery: rolling back an open transaction", "txn", t.id.String(), "err", err)
			}
		}
	}
	for _, t := range decided {
		t.op.Lock()
		_, err := c.finish(ctx, t)
		t.op.Unlock()
		if err != nil {
			c.logger.Error("txn: recovery could not finish a decided commit; the decision is kept and the next commit call or restart retries it", "txn", t.id.String(), "err", err)
		}
	}
	c.logger.Info("txn: journal recovered", "records", len(jrs), "aborted_open", len(open), "decided_commits", len(decided), "precommitted", precommitted)
	return nil
}
