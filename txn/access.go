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

// Caller is who calls the coordinator, for ownership: a transaction
// belongs to the caller that began it (or whose first stream did).
type Caller struct {
	// Owner names the caller (its token); recorded, and journaled, on the
	// transactions it begins. "" owns nothing and is checked against
	// nothing (auth off).
	Owner string
	// Admin callers see and act on every transaction.
	Admin bool
}

type callerKey struct{}

// WithCaller returns a context whose coordinator calls act only on the
// caller's own transactions (and those without owner, begun before
// owners were recorded): any other is ErrNotFound, as if it did not
// exist, unless the caller is an Admin. Transactions it begins are its.
// A context without a Caller acts on all and begins unowned ones.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

func callerOf(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

// Sees reports whether c may see and act on st (a Status of Live, for
// the status page).
func (c Caller) Sees(st Status) bool { return c.owns(st.Owner) }

// owns reports whether c may see and act on a transaction of owner.
func (c Caller) owns(owner string) bool {
	return c.Owner == "" || c.Admin || owner == "" || owner == c.Owner
}

// ownsLocked reports whether ctx's caller may see and act on t.
func ownsLocked(ctx context.Context, t *txn) bool { return callerOf(ctx).owns(t.owner) }

// mayUseLocked refuses op on t unless ctx's caller owns it (else
// ErrNotFound, as for a transaction that does not exist) and ctx's Access
// allows every endpoint it touches.
func (c *Coordinator) mayUseLocked(ctx context.Context, op string, t *txn) error {
	if !ownsLocked(ctx, t) {
		return c.notFound(t.id)
	}
	if allows(ctx, t.endpointsLocked()) {
		return nil
	}
	return writers.Errorf(writers.ErrPermissionDenied, "txn: %s %s: the transaction touches an endpoint this caller may not use", op, t.id)
}

// notFound is the error of a transaction unknown to the caller.
func (c *Coordinator) notFound(id txnID) error {
	return writers.Errorf(writers.ErrNotFound, "txn: no transaction %s on this server (never begun, or finished more than %s ago)", id, c.retention)
}

// mayStartLocked refuses op (begin, or a join that begins) on id unless
// ctx's Access allows every endpoint of t (the existing transaction; nil
// when it is being created) and of the writer's open and precommitted
// transactions, which starting id may fence.
func (c *Coordinator) mayStartLocked(ctx context.Context, op string, id txnID, t *txn) error {
	if t != nil {
		if err := c.mayUseLocked(ctx, op, t); err != nil {
			return err
		}
	}
	for _, o := range c.liveByWriter[id.writer] {
		if !ownsLocked(ctx, o) {
			return writers.Errorf(writers.ErrPermissionDenied, "txn: %s %s: writer %q has transactions of another caller, and beginning an epoch fences them: use a writer name of your own", op, id, id.writer)
		}
		if !allows(ctx, o.endpointsLocked()) {
			return writers.Errorf(writers.ErrPermissionDenied, "txn: %s %s: writer %q has transactions on endpoints this caller may not use, and beginning an epoch fences them: use a writer name of your own", op, id, id.writer)
		}
	}
	return nil
}

type writersKey struct{}

// WithWriters returns ctx carrying the writer names its caller may use
// (a token's auth.tokens[].writers): transactions and stream claims of
// any other name are ErrPermissionDenied.
func WithWriters(ctx context.Context, allowed func(writer string) bool) context.Context {
	return context.WithValue(ctx, writersKey{}, allowed)
}

// refuseWriter refuses op on writer unless ctx's caller may use the name
// (WithWriters; any without).
func refuseWriter(ctx context.Context, op, writer string) error {
	if allowed, ok := ctx.Value(writersKey{}).(func(string) bool); ok && !allowed(writer) {
		return writers.Errorf(writers.ErrPermissionDenied, "txn: %s: writer %q is not one of this caller's writer names (auth.tokens[].writers)", op, writer)
	}
	return nil
}

// startCheck is lockOrCreate's check for op creating a transaction: access
// first (a refused caller learns nothing of the writer's epochs), then
// fencing.
func (c *Coordinator) startCheck(ctx context.Context, op string) func(txnID) error {
	return func(id txnID) error {
		if err := c.streamWriterLocked(op, id.writer); err != nil {
			return err
		}
		if err := c.mayStartLocked(ctx, op, id, nil); err != nil {
			return err
		}
		return c.fencedLocked(id)
	}
}

// quotaLocked refuses to start t (open it, or again) when ctx's caller
// already has Options.MaxOpenPerOwner open or precommitted transactions
// besides t and those starting t fences (older open epochs of its
// writer). Admins and callers without owner are not bounded.
func (c *Coordinator) quotaLocked(ctx context.Context, t *txn) error {
	caller := callerOf(ctx)
	if c.maxOpen <= 0 || caller.Owner == "" || caller.Admin {
		return nil
	}
	n := 0
	for _, m := range c.liveByWriter {
		for _, o := range m {
			fenced := o.id.writer == t.id.writer && o.id.epoch < t.id.epoch && o.state == StateOpen
			if o != t && !fenced && o.owner == caller.Owner {
				n++
			}
		}
	}
	if n < c.maxOpen {
		return nil
	}
	return writers.Errorf(writers.ErrExhausted, "txn: begin %s: %q already has %d open or precommitted transactions, its quota (limits.client_max_transactions): commit or roll back some first", t.id, caller.Owner, n)
}
