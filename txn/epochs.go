package txn

import (
	"context"
	"fmt"
)

// noteCommittedLocked records that writer committed epoch on endpoint
// (epoch -1: the sink says it never did). Epochs only grow.
func (c *Coordinator) noteCommittedLocked(writer, endpoint string, epoch int64) {
	k := epochKey{writer, endpoint}
	if cur, ok := c.committed[k]; !ok || epoch > cur {
		c.committed[k] = epoch
	}
	if cur, ok := c.writerMax[writer]; epoch >= 0 && (!ok || epoch > cur) {
		c.writerMax[writer] = epoch
	}
}

// committedAnywhereLocked reports whether the coordinator knows writer
// committed epoch or a later one on some endpoint.
func (c *Coordinator) committedAnywhereLocked(writer string, epoch int64) bool {
	m, ok := c.writerMax[writer]
	return ok && epoch <= m
}

// lastCommitted returns the last epoch writer committed on endpoint, -1 if
// none: from what the coordinator knows, else asked of the sink once and
// remembered.
func (c *Coordinator) lastCommitted(ctx context.Context, writer, endpoint string) (int64, error) {
	c.mu.Lock()
	e, ok := c.committed[epochKey{writer, endpoint}]
	c.mu.Unlock()
	if ok {
		return e, nil
	}
	e, ok, err := c.committedEpoch(ctx, endpoint, writer)
	if !ok {
		e = -1
	}
	return e, err
}

// CommittedEpoch asks endpoint's sink for writer's last committed epoch
// (ok is false when it never committed) and remembers the answer for
// replay detection. An unknown endpoint is ErrNotFound; sink errors keep
// their class; a writer name the caller may not use is
// ErrPermissionDenied (WithWriters).
func (c *Coordinator) CommittedEpoch(ctx context.Context, endpoint, writer string) (int64, bool, error) {
	if err := refuseWriter(ctx, "committed-epoch", writer); err != nil {
		return 0, false, err
	}
	return c.committedEpoch(ctx, endpoint, writer)
}

// committedEpoch is CommittedEpoch for the coordinator's own reads.
func (c *Coordinator) committedEpoch(ctx context.Context, endpoint, writer string) (int64, bool, error) {
	w, err := c.writerOf(endpoint)
	if err != nil {
		return 0, false, err
	}
	e, ok, err := w.CommittedEpoch(ctx, writer)
	if err != nil {
		return 0, false, fmt.Errorf("txn: read the committed epoch of writer %q from endpoint %q: %w", writer, endpoint, err)
	}
	c.mu.Lock()
	if c.streamWriters[writer] {
		// A stream writer's durable seq moves on without the coordinator:
		// remembering it would answer a stale one.
		c.mu.Unlock()
		return e, ok, nil
	}
	if ok {
		c.noteCommittedLocked(writer, endpoint, e)
	} else {
		c.noteCommittedLocked(writer, endpoint, -1)
	}
	c.mu.Unlock()
	return e, ok, nil
}
