package txn

import (
	"context"

	"github.com/quiver-ingest/quiver/writers"
)

// Access reports whether the caller of a coordinator call may use an
// endpoint. flightsvc derives one from the caller's token.
type Access func(endpoint string) bool

type accessKey struct{}

// WithAccess returns a context whose coordinator calls act only on
// transactions the caller may use entirely: Status, Precommit, Commit,
// Rollback and Join refuse, with ErrPermissionDenied, a transaction that
// touches an endpoint allowed refuses (a participant, or an endpoint of
// its decided commit); Commit refuses handed descriptors of such an
// endpoint; Begin, and a Join that begins, also require every endpoint of
// the writer's open and precommitted transactions, because beginning an
// epoch fences (aborts) the writer's older open ones. The errors never
// name the refused endpoints. A context without an Access allows all.
func WithAccess(ctx context.Context, allowed Access) context.Context {
	return context.WithValue(ctx, accessKey{}, allowed)
}

// allows reports whether ctx's Access allows every endpoint of eps.
func allows(ctx context.Context, eps []string) bool {
	allowed, ok := ctx.Value(accessKey{}).(Access)
	if !ok {
		return true
	}
	for _, ep := range eps {
		if !allowed(ep) {
			return false
		}
	}
	return true
}

// endpointsLocked lists every endpoint t touches: its participants and the
// endpoints of its decision and of its commit.
func (t *txn) endpointsLocked() []string {
	seen := make(map[string]bool, len(t.parts))
	var out []string
	add := func(ep string) {
		if !seen[ep] {
			seen[ep] = true
			out = append(out, ep)
		}
	}
	for ep := range t.parts {
		add(ep)
	}
	for ep := range t.decision {
		add(ep)
	}
	for ep := range t.versions {
		add(ep)
	}
	return out
}

// mayUseLocked refuses op on t unless ctx's Access allows every endpoint
// it touches.
func mayUseLocked(ctx context.Context, op string, t *txn) error {
	if allows(ctx, t.endpointsLocked()) {
		return nil
	}
	return writers.Errorf(writers.ErrPermissionDenied, "txn: %s %s: the transaction touches an endpoint this caller may not use", op, t.id)
}

// mayStartLocked refuses op (begin, or a join that begins) on id unless
// ctx's Access allows every endpoint of t (the existing transaction; nil
// when it is being created) and of the writer's open and precommitted
// transactions, which starting id may fence.
func (c *Coordinator) mayStartLocked(ctx context.Context, op string, id txnID, t *txn) error {
	if t != nil {
		if err := mayUseLocked(ctx, op, t); err != nil {
			return err
		}
	}
	for _, o := range c.liveByWriter[id.writer] {
		if !allows(ctx, o.endpointsLocked()) {
			return writers.Errorf(writers.ErrPermissionDenied, "txn: %s %s: writer %q has transactions on endpoints this caller may not use, and beginning an epoch fences them: use a writer name of your own", op, id, id.writer)
		}
	}
	return nil
}

// startCheck is lockOrCreate's check for op creating a transaction: access
// first (a refused caller learns nothing of the writer's epochs), then
// fencing.
func (c *Coordinator) startCheck(ctx context.Context, op string) func(txnID) error {
	return func(id txnID) error {
		if err := c.mayStartLocked(ctx, op, id, nil); err != nil {
			return err
		}
		return c.fencedLocked(id)
	}
}
