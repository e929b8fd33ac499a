package txn

import (
	"cmp"
	"maps"
	"slices"

	"github.com/quiver-ingest/quiver/txn/journal"
)

// maybeCompact starts a new journal segment holding a snapshot once the
// active one passed segmentBytes. It runs with the gate held exclusively,
// so no append is in flight and the state is exactly what the journal
// says. A failed compaction is logged: the journal keeps the old segment.
func (c *Coordinator) maybeCompact() {
	if c.j.ActiveBytes() < c.segmentBytes || !c.compacting.CompareAndSwap(false, true) {
		return
	}
	defer c.compacting.Store(false)
	c.gate.Lock()
	defer c.gate.Unlock()
	c.mu.Lock()
	snap, err := c.snapshotLocked()
	c.mu.Unlock()
	if err == nil {
		err = c.j.Compact(snap)
	}
	if err != nil {
		c.logger.Error("txn: journal compaction failed; the journal keeps growing", "err", err)
		return
	}
	c.logger.Info("txn: journal compacted", "records", len(snap))
}

// snapshotLocked restates the live state as records
// (docs/journal-format.md, "Records"): last committed epochs, epochs owing
// their replay, stream writers, then each open or precommitted
// transaction.
func (c *Coordinator) snapshotLocked() ([]journal.Record, error) {
	var recs []*record
	keys := slices.SortedFunc(maps.Keys(c.committed), func(a, b epochKey) int {
		return cmp.Or(cmp.Compare(a.writer, b.writer), cmp.Compare(a.endpoint, b.endpoint))
	})
	for _, k := range keys {
		if e := c.committed[k]; e >= 0 {
			recs = append(recs, &record{typ: recEpoch, Writer: k.writer, Endpoint: k.endpoint, Epoch: e})
		}
	}
	// Epochs owing their replay (never forgotten while they owe): the
	// last attempt as it ended, whose attempt, owner and endpoints a
	// give-up is checked against, then the abort that owes. One being
	// replayed is restated live below, after.
	for _, w := range slices.Sorted(maps.Keys(c.replayOwed)) {
		for _, e := range c.replayOwed[w] {
			t := c.txns[txnID{w, e}] // never forgotten while it owes
			owing := &record{typ: recAbort, Writer: w, Epoch: e, OwesReplay: true}
			if !t.live() {
				recs = append(recs, restateLocked(t)...)
				owing.At, owing.Expired = t.ended, t.expired
			}
			recs = append(recs, owing)
		}
	}
	for _, w := range slices.Sorted(maps.Keys(c.streamWriters)) {
		if c.claims[w] == nil {
			recs = append(recs, &record{typ: recStreamWriter, Writer: w})
		}
	}
	var live []*txn
	for _, t := range c.txns {
		if t.live() && !t.pending {
			live = append(live, t)
		}
	}
	slices.SortFunc(live, func(a, b *txn) int {
		return cmp.Or(cmp.Compare(a.id.writer, b.id.writer), cmp.Compare(a.id.epoch, b.id.epoch))
	})
	for _, t := range live {
		recs = append(recs, restateLocked(t)...)
		if t.decision != nil {
			recs = append(recs, &record{typ: recDecide, Writer: t.id.writer, Epoch: t.id.epoch, Descriptors: t.decision})
		}
	}
	out := make([]journal.Record, len(recs))
	for i, r := range recs {
		jr, err := r.encode()
		if err != nil {
			return nil, err
		}
		out[i] = jr
	}
	return out, nil
}

// restateLocked is the begin of t's attempt and its joins (open), or its
// begin and precommit (precommitted, or aborted with every participant's
// descriptor: an undone commit).
func restateLocked(t *txn) []*record {
	w, e := t.id.writer, t.id.epoch
	recs := []*record{{typ: recBegin, Writer: w, Epoch: e, Attempt: t.attempt, At: t.since, TTLMillis: t.ttl.Milliseconds(), Deadline: t.deadline, Owner: t.owner}}
	eps := slices.Sorted(maps.Keys(t.parts))
	precommitted := t.state == StatePrecommitted ||
		t.state == StateAborted && len(eps) > 0 && !slices.ContainsFunc(eps, func(ep string) bool { return t.parts[ep].desc == nil })
	if !precommitted {
		for _, ep := range eps {
			recs = append(recs, &record{typ: recJoin, Writer: w, Epoch: e, Endpoint: ep})
		}
		return recs
	}
	pre := &record{typ: recPrecommit, Writer: w, Epoch: e, At: t.since, TTLMillis: t.ttl.Milliseconds(), Deadline: t.deadline}
	for _, ep := range eps {
		pre.Participants = append(pre.Participants, newRecordPart(ep, t.parts[ep]))
	}
	return append(recs, pre)
}
