package txn

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/quiver-ingest/quiver/writers"
)

// ReplayCheck is what a commit does when a replay of an epoch that
// already committed sent another number of rows to an endpoint than the
// epoch's commit published there: two pipelines sharing a writer name,
// or a replay that is not deterministic (Options.ReplayCheck,
// txn.replay_check). Replays are compared only while the coordinator
// still holds the committed transaction (its retention, at least an
// hour), with the rows of the replayed streams that ended before the
// commit.
type ReplayCheck string

const (
	// ReplayWarn logs the mismatch and counts it in
	// quiver_transactions_replay_mismatches_total; the replay answers
	// replayed as usual. The default.
	ReplayWarn ReplayCheck = "warn"
	// ReplayRefuse also fails the replay's commit with ErrWrongState
	// naming the counts.
	ReplayRefuse ReplayCheck = "refuse"
	// ReplayOff compares nothing.
	ReplayOff ReplayCheck = "off"
)

// noteReplayLocked adds rows, sent by a replayed stream to endpoint, to
// what the replays of committed t sent.
func (t *txn) noteReplayLocked(endpoint string, rows int64) {
	if t.replayRows == nil {
		t.replayRows = make(map[string]int64)
	}
	t.replayRows[endpoint] += rows
}

// checkReplayLocked compares the rows the replays of committed t sent
// with what t published on each endpoint they wrote to, and forgets
// them: a mismatch is logged and counted, and with ReplayRefuse it is an
// ErrWrongState error.
func (c *Coordinator) checkReplayLocked(t *txn) error {
	sent := t.replayRows
	t.replayRows = nil
	if c.replayCheck == ReplayOff || len(sent) == 0 {
		return nil
	}
	var diffs []string
	for _, ep := range slices.Sorted(maps.Keys(sent)) {
		var published int64
		if p := t.parts[ep]; p != nil {
			published = p.rows
		}
		if sent[ep] != published {
			diffs = append(diffs, fmt.Sprintf("endpoint %q: %d rows committed, %d replayed", ep, published, sent[ep]))
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
