package txn

import (
	"time"

	"github.com/quiver-ingest/quiver/writers"
)

// applyLocked applies a durable record to the state. Live operations and
// recovery share it, so that the state after a restart is the state the
// records describe. Records are trusted: decodeRecord rejected unknown
// types.
func (c *Coordinator) applyLocked(r *record) {
	switch r.typ {
	case recEpoch:
		c.noteCommittedLocked(r.Writer, r.Endpoint, r.Epoch)
		return
	case recStreamWriter:
		c.streamWriters[r.Writer] = true
		return
	}
	t := c.txns[r.id()]
	if t == nil {
		t = c.newTxnLocked(r.id(), StateOpen)
		// Only the owner of a pending transaction's op lock may journal
		// for it; records replayed here have no owner.
		t.op.Unlock()
	}
	t.pending = false
	switch r.typ {
	case recBegin:
		// Also a begin of an aborted epoch (whose streams have all ended):
		// it starts afresh.
		if r.Attempt != t.attempt {
			buryLocked(t)
		}
		t.attempt, t.conn = r.Attempt, ""
		t.state, t.ended, t.poison, t.replayed, t.expired = StateOpen, time.Time{}, "", false, false
		t.parts = make(map[string]*part)
		t.decision, t.done, t.versions, t.discard = nil, nil, nil, nil
		t.ttl, t.deadline = time.Duration(r.TTLMillis)*time.Millisecond, r.Deadline
		t.since, t.owner = r.At, r.Owner
	case recJoin:
		if t.parts[r.Endpoint] == nil {
			t.parts[r.Endpoint] = &part{}
		}
	case recPrecommit:
		t.state = StatePrecommitted
		t.parts = make(map[string]*part, len(r.Participants))
		for _, p := range r.Participants {
			t.parts[p.Endpoint] = &part{tally: p.tally(), desc: p.Descriptor}
		}
		t.ttl, t.deadline = time.Duration(r.TTLMillis)*time.Millisecond, r.Deadline
		t.since = r.At
	case recDecide:
		t.state = StatePrecommitted
		t.decision = r.Descriptors
		if t.decision == nil {
			t.decision = make(map[string][]writers.Descriptor)
		}
		t.done = make(map[string]writers.CommitInfo)
	case recCommitted:
		t.state, t.ended = StateCommitted, r.At
		t.versions, t.replayed = r.Versions, r.Replayed
		t.decision, t.done = nil, nil
		c.settleReplayOwedLocked(t.id) // the replay is in
		for ep := range r.Versions {
			c.noteCommittedLocked(r.Writer, ep, r.Epoch)
		}
	case recAbort:
		if r.GaveUp {
			c.settleReplayOwedLocked(t.id)
			if t.state == StateAborted {
				break // the give-up of an aborted epoch: it ended when it did
			}
		}
		buryLocked(t)
		t.state, t.ended, t.expired = StateAborted, r.At, r.Expired
		t.decision, t.done = nil, nil
		if r.OwesReplay {
			c.oweReplayLocked(t.id)
		}
		for s, cut := range t.cuts {
			cut(t.abortedErr())
			delete(t.cuts, s)
		}
	}
	if t.ttl <= 0 {
		t.ttl = c.ttl
	}
	if !t.live() {
		c.unstageLocked(t)
	}
	c.indexLocked(t)
}
