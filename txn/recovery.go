package txn

import (
	"context"
	"maps"
	"slices"
	"sort"

	"github.com/quiver-ingest/quiver/txn/journal"
	"github.com/quiver-ingest/quiver/writers"
)

// recover rebuilds the state from the journal's records, then aborts the
// open transactions (their streams died with the previous process) and
// finishes the decided commits. Precommitted transactions stay as they
// are, with at least a whole TTL from now (no later than MaxTTL after
// their precommit, the age past which vacuum may take unreferenced files):
// their clients could not commit while the server was down, and a restart
// longer than the TTL would otherwise roll back every one of them at once.
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
			d := c.now().Add(t.ttl)
			if limit := t.since.Add(MaxTTL); d.After(limit) {
				d = limit
			}
			if t.deadline.Before(d) {
				t.deadline = d
			}
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
	for _, ep := range c.endpointsHeld() {
		if w, ok := c.eps.Writer(ep); ok {
			c.Keep(ep, w)
		}
	}

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
			c.logger.Error("txn: recovery could not finish a decided commit; the decision is kept and the next commit call, the endpoint opening or a restart retries it", "txn", t.id.String(), "err", err)
		}
	}
	c.logger.Info("txn: journal recovered", "records", len(jrs), "aborted_open", len(open), "decided_commits", len(decided), "precommitted", precommitted)
	return nil
}

// held returns the transactions whose parts sinks must protect:
// precommitted, or decided and not finished.
func (c *Coordinator) held() []*txn {
	c.mu.Lock()
	defer c.mu.Unlock()
	var held []*txn
	for _, t := range c.txns {
		if t.state == StatePrecommitted || t.decision != nil {
			held = append(held, t)
		}
	}
	return held
}

// endpointsHeld returns the endpoints of held transactions' parts.
func (c *Coordinator) endpointsHeld() []string {
	eps := map[string]bool{}
	for _, t := range c.held() {
		c.mu.Lock()
		for ep := range t.parts {
			eps[ep] = true
		}
		for ep := range t.decision {
			eps[ep] = true
		}
		c.mu.Unlock()
	}
	return slices.Sorted(maps.Keys(eps))
}

// Keep hands w, the sink writer of endpoint, the parts of endpoint this
// coordinator holds for precommitted and decided transactions, if w
// protects what they need (writers.PrecommitKeeper). A sink sets that
// protection up at Precommit, so this is for one that did not see it: a
// sink opened after a restart. The server calls it when a late endpoint
// opens, before the sink serves; recovery calls it for those open at
// start.
func (c *Coordinator) Keep(endpoint string, w writers.Writer) {
	k, ok := writers.Find[writers.PrecommitKeeper](w)
	if !ok {
		return
	}
	for _, t := range c.held() {
		// Under op, so that a commit or rollback of t (which ends the
		// protection) is not overtaken by it.
		t.op.Lock()
		c.mu.Lock()
		var descs []writers.Descriptor
		switch {
		case t.gone:
		case t.decision != nil:
			if _, done := t.done[endpoint]; !done {
				descs = t.decision[endpoint]
			}
		case t.state == StatePrecommitted:
			if p, ok := t.parts[endpoint]; ok && p.desc != nil {
				descs = []writers.Descriptor{p.desc}
			}
		}
		c.mu.Unlock()
		if len(descs) > 0 {
			k.KeepPrecommitted(t.key(), descs)
		}
		t.op.Unlock()
	}
}

// Resume finishes the decided commits still waiting for endpoint: the
// server calls it when an endpoint whose sink could not be opened at start
// opens, so that a commit decided before a restart is published without
// waiting for the client. Failures are logged and the decisions kept for
// the next Commit, Resume or restart.
func (c *Coordinator) Resume(ctx context.Context, endpoint string) {
	c.mu.Lock()
	var waiting []*txn
	for _, t := range c.txns {
		if _, ok := t.decision[endpoint]; ok {
			if _, done := t.done[endpoint]; !done {
				waiting = append(waiting, t)
			}
		}
	}
	c.mu.Unlock()
	sort.Slice(waiting, func(i, k int) bool {
		if waiting[i].id.writer != waiting[k].id.writer {
			return waiting[i].id.writer < waiting[k].id.writer
		}
		return waiting[i].id.epoch < waiting[k].id.epoch
	})
	for _, t := range waiting {
		t.op.Lock()
		c.mu.Lock()
		decided := !t.gone && t.decision != nil
		c.mu.Unlock()
		if decided {
			if _, err := c.finish(ctx, t); err != nil {
				c.logger.Error("txn: could not finish a decided commit after its endpoint opened; the decision is kept", "txn", t.id.String(), "endpoint", endpoint, "err", err)
			} else {
				c.logger.Info("txn: finished a decided commit after its endpoint opened", "txn", t.id.String(), "endpoint", endpoint)
			}
		}
		t.op.Unlock()
	}
}
