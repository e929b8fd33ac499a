package txn

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/quiver-ingest/quiver/writers"
)

// ReplayCheck is what a commit does when a replay of an epoch that
// already committed sent other rows to an endpoint than the epoch's
// commit published there: two pipelines sharing a writer name, or a
// replay that is not deterministic (Options.ReplayCheck,
// txn.replay_check). The rows are compared by count and by digest
// (rowdigest: the same rows in any order and batching digest the same),
// only while the coordinator still holds the committed transaction (its
// retention, at least an hour; after a restart, what the journal still
// holds: a compaction drops committed transactions), with the rows of the
// replayed streams that ended before the commit.
type ReplayCheck string

const (
	// ReplayWarn logs the mismatch and counts it in
	// quiver_transactions_replay_mismatches_total; the replay answers
	// replayed as usual. The default.
	ReplayWarn ReplayCheck = "warn"
	// ReplayRefuse also fails the replay's commit with ErrWrongState
	// naming the difference.
	ReplayRefuse ReplayCheck = "refuse"
	// ReplayOff compares nothing.
	ReplayOff ReplayCheck = "off"
)

// tally is what streams sent to one endpoint of a transaction: rows,
// and the digest of those rows (rowdigest) unless a stream gave none.
type tally struct {
	rows       int64
	digest     uint64
	undigested bool
}

// add adds o's rows to t's (digests of rows add up).
func (t *tally) add(o tally) {
	t.rows += o.rows
	t.digest += o.digest
	t.undigested = t.undigested || o.undigested
}

// differs says how sent differs from published t; "" when it does not
// (digests are compared only when both are known).
func (t tally) differs(sent tally) string {
	switch {
	case sent.rows != t.rows:
		return fmt.Sprintf("%d rows committed, %d replayed", t.rows, sent.rows)
	case !t.undigested && !sent.undigested && sent.digest != t.digest:
		return fmt.Sprintf("%d rows committed and replayed, but other rows (digest %016x committed, %016x replayed)", t.rows, t.digest, sent.digest)
	}
	return ""
}

// DigestsRows reports whether replays are compared: whether streams
// should give their rows' digest (Stream.SetDigest).
func (c *Coordinator) DigestsRows() bool { return c.replayCheck != ReplayOff }

// noteReplayLocked adds what a replayed stream sent to endpoint to what
// the replays of committed t sent.
func (t *txn) noteReplayLocked(endpoint string, sent tally) {
	if t.replays == nil {
		t.replays = make(map[string]*tally)
	}
	if t.replays[endpoint] == nil {
		t.replays[endpoint] = &tally{}
	}
	t.replays[endpoint].add(sent)
}

// checkReplayLocked compares what the replays of committed t sent with
// what t published on each endpoint they wrote to, and forgets them: a
// mismatch is logged and counted, and with ReplayRefuse it is an
// ErrWrongState error.
func (c *Coordinator) checkReplayLocked(t *txn) error {
	sent := t.replays
	t.replays = nil
	if c.replayCheck == ReplayOff || len(sent) == 0 {
		return nil
	}
	var diffs []string
	for _, ep := range slices.Sorted(maps.Keys(sent)) {
		var published tally
		if p := t.parts[ep]; p != nil {
			published = p.tally
		}
		if d := published.differs(*sent[ep]); d != "" {
			diffs = append(diffs, fmt.Sprintf("endpoint %q: %s", ep, d))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	c.metrics.replayMismatches.Inc()
	why := strings.Join(diffs, "; ")
	c.logger.Warn("txn: a replay of a committed epoch sent other rows than its commit published: do two pipelines share this writer name, or is the replay not deterministic?", "txn", t.id.String(), "diff", why)
	if c.replayCheck == ReplayRefuse {
		return writers.Errorf(writers.ErrWrongState, "txn: commit %s: the epoch already committed other data (%s): two pipelines share this writer name, or the replay is not deterministic; its rows were not written (txn.replay_check: refuse)", t.id, why)
	}
	return nil
}
