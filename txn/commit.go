package txn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/quiver-ingest/quiver/writers"
)

// Commit decides the commit (journaled and fsync'd), then commits every
// participant, adding the descriptors handed over from other servers
// (endpoint → descriptors; a handed descriptor equal to this server's own is
// ignored); handed descriptors may name endpoints this server's transaction
// has no participant for, or a transaction this server never saw (then the
// sinks of the named endpoints are asked first whether the epoch already
// committed). Idempotent: committing a committed transaction returns the
// same result with Replayed; an epoch already committed in the sinks
// answers Replayed. Commit of an open or aborted transaction is
// ErrWrongState, and so is deciding the commit of an epoch while an older
// epoch of the same writer is open or precommitted (epochs commit in
// order) or owes its replay (markUndoing); of an unknown one without
// handed descriptors, ErrNotFound unless the writer is known to have
// committed the epoch (Replayed).
//
// The sink commits run with ctx's values but not its cancellation, bounded
// by the coordinator's own timeout. When a sink commit fails the error
// keeps its class, the decision stays journaled and a later Commit (or a
// restart) retries it; descriptors handed to that later call are ignored.
// Except when every endpoint refuses it for good and none published it
// (finish): then the decision is undone, the transaction aborted, and the
// epoch owes its replay until that commits or the client gives it up.
//
// Descriptors handed over for an endpoint whose sink cannot aggregate
// descriptors are ErrInvalid, except the transaction's own. With an Access
// (WithAccess), a transaction or handed descriptors touching a refused
// endpoint are ErrPermissionDenied. Both are checked before anything is
// decided.
func (c *Coordinator) Commit(ctx context.Context, writer string, epoch int64, handed map[string][]writers.Descriptor) (st Status, err error) {
	ctx, span := c.startSpan(ctx, "quiver.commit", writer, epoch)
	defer func() { endSpan(span, st, err) }()
	return c.commit(ctx, writer, epoch, handed)
}

func (c *Coordinator) commit(ctx context.Context, writer string, epoch int64, handed map[string][]writers.Descriptor) (Status, error) {
	id, err := checkID(ctx, "commit", writer, epoch)
	if err != nil {
		return Status{}, err
	}
	for ep := range handed {
		if _, err := c.writerOf(ep); err != nil {
			return Status{}, err
		}
	}
	if !allows(ctx, slices.Collect(maps.Keys(handed))) {
		return Status{}, writers.Errorf(writers.ErrPermissionDenied, "txn: commit %s: descriptors handed over for an endpoint this caller may not use", id)
	}
	t := c.lockTxn(id)
	if t == nil {
		// Not for a continuous-stream writer (its sinks' committed epoch
		// is its durable seq: not to be read as an epoch), nor one created
		// for it below: an undone commit would owe a replay its writer can
		// never begin.
		if err := c.refuseStreamWriter("commit", writer); err != nil {
			return Status{}, err
		}
		if err := c.singleDescriptorOnly(id, nil, handed); err != nil {
			return Status{}, err
		}
		st, answered, err := c.commitUnknown(ctx, id, handed)
		if answered || err != nil {
			return st, err
		}
		notStreams := func(id txnID) error { return c.streamWriterLocked("commit", id.writer) }
		if t, _, err = c.lockOrCreate(id, StatePrecommitted, notStreams); err != nil {
			return Status{}, err
		}
	}
	defer t.op.Unlock()
	c.mu.Lock()
	// refuse ends a refused call; a transaction created for it from
	// handed descriptors (pending) is forgotten: left behind, it would
	// count as a live epoch of the writer (never expiring, unknown to
	// Status) and block the writer's later commits.
	refuse := func(err error) (Status, error) {
		if t.pending {
			c.dropLocked(t)
		}
		c.mu.Unlock()
		return Status{}, err
	}
	if err := c.mayUseLocked(ctx, "commit", t); err != nil {
		return refuse(err)
	}
	if t.state != StateCommitted {
		if err := c.attemptsUsableLocked(ctx, "commit", t); err != nil {
			return refuse(err)
		}
	}
	switch {
	case t.state == StateCommitted:
		if err := c.checkReplayLocked(t); err != nil {
			c.mu.Unlock()
			return Status{}, err
		}
		st := c.statusLocked(t)
		c.mu.Unlock()
		st.Replayed = true
		c.metrics.result(resultReplayed)
		return st, nil
	case t.state == StateAborted:
		c.mu.Unlock()
		return Status{}, writers.Errorf(writers.ErrWrongState, "txn: commit %s: the transaction was aborted: begin it again to replay the epoch", id)
	case t.state == StateOpen:
		c.mu.Unlock()
		return Status{}, writers.Errorf(writers.ErrWrongState, "txn: commit %s: the transaction is open: precommit it first", id)
	}
	if err := c.singleDescriptorOnly(id, t.parts, handed); err != nil {
		return refuse(err)
	}
	if t.decision == nil {
		// Sinks record a writer's highest committed epoch: once N+1 is
		// published, N reads as committed and would be answered
		// "replayed" without its rows ever being published.
		if older, ok := c.olderLiveLocked(t.id); ok {
			return refuse(writers.Errorf(writers.ErrWrongState, "txn: commit %s: epoch %d of writer %q is still %s: a writer's epochs commit in order; commit epoch %d first, or roll it back", id, older.id.epoch, writer, older.state, older.id.epoch))
		}
		if err := c.replayOwedLocked("commit", t.id); err != nil {
			return refuse(err)
		}
	}
	decision := t.decision
	if decision == nil {
		decision = t.decisionLocked(handed)
	}
	decided, pending := t.decision != nil, t.pending
	c.mu.Unlock()
	if !decided {
		if err := c.checkHanded(ctx, t, handed); err != nil {
			if pending {
				c.mu.Lock()
				c.dropLocked(t)
				c.mu.Unlock()
			}
			return Status{}, err
		}
		rec := &record{typ: recDecide, Writer: writer, Epoch: epoch, At: c.now(), Descriptors: decision}
		if err := c.log(nil, rec); err != nil {
			if pending {
				c.mu.Lock()
				c.dropLocked(t)
				c.mu.Unlock()
			}
			return Status{}, err
		}
		c.crashAt(crashAfterDecision)
	}
	return c.finish(ctx, t)
}

// checkHanded asks the sinks that can (writers.DescriptorChecker) whether
// the descriptors handed over for them could be published, before the
// commit is decided: once decided it can no longer be rolled back, and a
// descriptor that can never publish (its files gone with a rollback on
// the server that precommitted it) would leave it stuck, half published
// on the other endpoints. The transaction's own descriptors are not
// checked here: this server made them.
func (c *Coordinator) checkHanded(ctx context.Context, t *txn, handed map[string][]writers.Descriptor) error {
	for _, ep := range slices.Sorted(maps.Keys(handed)) {
		w, err := c.writerOf(ep)
		if err != nil {
			return err
		}
		if err := c.checkFencedElsewhere(ctx, t, ep, w); err != nil {
			return err
		}
		dc, ok := writers.Find[writers.DescriptorChecker](w)
		if !ok {
			continue
		}
		if err := dc.CheckDescriptors(ctx, t.key(), handed[ep]); err != nil {
			return fmt.Errorf("txn: commit %s: descriptors handed over for endpoint %q: %w (nothing was decided or published)", t.id, ep, err)
		}
	}
	return nil
}

// commitJob is the sink commit of one endpoint of a decision.
type commitJob struct {
	endpoint string
	descs    []writers.Descriptor
}

// commitJobs runs the sink commits of jobs concurrently, within the
// commit timeout (each phase of finish its own) whatever ctx says,
// recording each that succeeds in t.done, and returns their errors.
func (c *Coordinator) commitJobs(ctx context.Context, t *txn, jobs []commitJob) []error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.commitTimeout)
	defer cancel()
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, jb := range jobs {
		wg.Go(func() {
			// A panic mid-Commit leaves the outcome open: the decision is
			// kept and a later commit (idempotent) finishes it.
			defer c.recoverSink(&errs[i], "commit", t.id, jb.endpoint)
			w, ok := c.eps.Writer(jb.endpoint)
			if !ok {
				errs[i] = writers.Errorf(writers.ErrNotFound, "txn: commit %s: endpoint %q is no longer configured: restore it to finish the decided commit", t.id, jb.endpoint)
				return
			}
			info, err := w.Commit(ctx, t.key(), jb.descs)
			if err != nil {
				errs[i] = fmt.Errorf("txn: commit %s on endpoint %q: %w", t.id, jb.endpoint, err)
				return
			}
			c.mu.Lock()
			t.done[jb.endpoint] = info
			c.mu.Unlock()
		})
	}
	wg.Wait()
	return errs
}

// refusedEverywhere reports whether t's decided commit can never succeed
// and published nothing: no endpoint of the decision has committed and
// every failure of this attempt is final — a conflict (a concurrent commit
// won and this one cannot be rebased) or a refusal (ErrInvalid: a table
// created meanwhile with other columns or another format, identity values
// generated on another server, staged files gone), both answered before
// the sink publishes anything — and none has an unknown outcome. Retrying
// such a decision would fail forever, and rollback, begin and expiry all
// leave a decision alone: it is undone instead.
func (c *Coordinator) refusedEverywhere(t *txn, errs []error) bool {
	c.mu.Lock()
	committed := len(t.done)
	c.mu.Unlock()
	if committed > 0 {
		return false
	}
	for _, err := range errs {
		if err != nil && !refusedForGood(err) {
			return false
		}
	}
	return true
}

// refusedForGood reports a sink commit's refusal that a retry meets
// again (a conflict, an invalid commit) and that published nothing.
func refusedForGood(err error) bool {
	return (errors.Is(err, writers.ErrConflict) || errors.Is(err, writers.ErrInvalid)) && !errors.Is(err, writers.ErrOutcomeUnknown)
}

// replayedRefusals takes the refusals among jobs' errs whose sink already
// records t's epoch (its writer's committed epoch at or above it) for
// replays, as the sinks' own replay checks do: a commit a crashed process
// published, refused on retry by a check that comes before the sink's
// replay check (the table changed meanwhile), would otherwise keep the
// decision for ever. It clears those errors and marks their endpoints
// done.
func (c *Coordinator) replayedRefusals(ctx context.Context, t *txn, jobs []commitJob, errs []error) {
	for i, err := range errs {
		if err == nil || !refusedForGood(err) {
			continue
		}
		e, ok, cerr := c.committedEpoch(ctx, jobs[i].endpoint, t.id.writer)
		if cerr != nil || !ok || e < t.id.epoch {
			continue
		}
		c.logger.Warn("txn: a sink refused a commit whose epoch it already records: taken for a replay", "txn", t.id.String(), "endpoint", jobs[i].endpoint, "committed_epoch", e, "err", err)
		c.mu.Lock()
		t.done[jobs[i].endpoint] = writers.CommitInfo{Version: writers.NoVersion, Replayed: true}
		c.mu.Unlock()
		errs[i] = nil
	}
}

// markUndoing marks t as being undone unless a later epoch of its writer
// is live (it may have been begun while the sinks were read), and owes
// its replay: from then on later epochs of the writer neither begin nor
// commit until t's epoch is committed or given up (replayOwed).
func (c *Coordinator) markUndoing(t *txn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.laterLiveLocked(t) {
		return false
	}
	t.undoing, t.owedBefore = true, c.owesReplayLocked(t.id)
	if c.owesOnUndo(t.id) {
		c.oweReplayLocked(t.id) // now: a begin must not slip in before the abort is journaled
	}
	return true
}

// owingReplays counts the epochs owing their replay (for metrics).
func (c *Coordinator) owingReplays() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, owed := range c.replayOwed {
		n += len(owed)
	}
	return n
}

// owesOnUndo reports whether id's epoch owes its replay once its refused
// commit is undone: unless its writer never has a later epoch.
func (c *Coordinator) owesOnUndo(id txnID) bool {
	return c.oneEpoch == nil || !c.oneEpoch(id.writer)
}

// oweReplayLocked records that id's epoch owes its replay.
func (c *Coordinator) oweReplayLocked(id txnID) {
	owed := c.replayOwed[id.writer]
	if i, found := slices.BinarySearch(owed, id.epoch); !found {
		c.replayOwed[id.writer] = slices.Insert(owed, i, id.epoch)
	}
}

// owesReplayLocked reports whether id's epoch owes its replay.
func (c *Coordinator) owesReplayLocked(id txnID) bool {
	_, found := slices.BinarySearch(c.replayOwed[id.writer], id.epoch)
	return found
}

// replayOwedLocked refuses op on id while an earlier epoch of its writer
// owes its replay (markUndoing).
func (c *Coordinator) replayOwedLocked(op string, id txnID) error {
	if owed := c.replayOwed[id.writer]; len(owed) > 0 && owed[0] < id.epoch {
		return writers.Errorf(writers.ErrWrongState, "txn: %s %s: epoch %d of writer %q was aborted because every endpoint refused its commit: replay it first (begin, write, precommit and commit it again), or give it up (rollback with \"give_up\": true)", op, id, owed[0], id.writer)
	}
	return nil
}

// settleReplayOwedLocked ends the replay owed by id's epoch (its replay
// is committed, or the client gave it up).
func (c *Coordinator) settleReplayOwedLocked(id txnID) {
	owed := c.replayOwed[id.writer]
	i, found := slices.BinarySearch(owed, id.epoch)
	switch {
	case !found:
	case len(owed) == 1:
		delete(c.replayOwed, id.writer)
	default:
		c.replayOwed[id.writer] = slices.Delete(owed, i, i+1)
	}
}

// laterLive reports whether t's writer has a later epoch open or
// precommitted: undoing t would let that one commit first (t being no
// longer live), and a replay of t would then read as a replay of an older
// epoch and be dropped. The decision is kept instead.
func (c *Coordinator) laterLive(t *txn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.laterLiveLocked(t)
}

func (c *Coordinator) laterLiveLocked(t *txn) bool {
	for e := range c.liveByWriter[t.id.writer] {
		if e > t.id.epoch {
			return true
		}
	}
	// An aborted epoch being begun again is not indexed until its begin
	// is journaled. A scan: this runs only for refused commits.
	for id, o := range c.txns {
		if o.starting && id.writer == t.id.writer && id.epoch > t.id.epoch {
			return true
		}
	}
	return false
}

// publishedNowhere asks every sink of t's decision whether t's epoch is
// committed there: t.done is this process's memory, and a process that
// published an endpoint and crashed before journaling it left a decision
// whose retry may now be refused (the table changed meanwhile) though its
// epoch is in the table. Any doubt (a sink that cannot answer) is false.
func (c *Coordinator) publishedNowhere(ctx context.Context, t *txn) bool {
	c.mu.Lock()
	eps := slices.Sorted(maps.Keys(t.decision))
	c.mu.Unlock()
	for _, ep := range eps {
		e, ok, err := c.committedEpoch(ctx, ep, t.id.writer)
		if err != nil || ok && e >= t.id.epoch {
			return false
		}
	}
	return true
}

// abortDecided undoes t's decided commit after refusedEverywhere: it
// journals the abort (which clears the decision), rolls the participants
// back and returns cause, of its class, telling the client to replay.
func (c *Coordinator) abortDecided(ctx context.Context, t *txn, cause error) (Status, error) {
	err := func() error { // t.undoing was set by markUndoing
		defer func() {
			c.mu.Lock()
			t.undoing = false
			if t.live() && !t.owedBefore { // not aborted: the decision stands, nothing more is owed
				c.settleReplayOwedLocked(t.id)
			}
			c.mu.Unlock()
		}()
		return c.abort(ctx, t, abortRefused)
	}()
	if err != nil && c.isLive(t) {
		return Status{}, errors.Join(cause, err)
	}
	c.logger.Warn("txn: decided commit refused by every endpoint, nothing published: aborted", "txn", t.id.String(), "err", cause)
	return Status{}, fmt.Errorf("txn: %s is aborted, nothing was published: begin the epoch again and replay it: %w", t.id, cause)
}

// commitUnknown answers a commit of a transaction this coordinator has no
// record of, unless it must be decided from the handed descriptors
// (answered false).
func (c *Coordinator) commitUnknown(ctx context.Context, id txnID, handed map[string][]writers.Descriptor) (st Status, answered bool, err error) {
	replayed := Status{Writer: id.writer, Epoch: id.epoch, State: StateCommitted, Replayed: true}
	if len(handed) == 0 {
		c.mu.Lock()
		known := c.committedAnywhereLocked(id.writer, id.epoch)
		c.mu.Unlock()
		if !known {
			return Status{}, true, writers.Errorf(writers.ErrNotFound, "txn: no transaction %s on this server: precommit it first, or pass the descriptors the other servers precommitted", id)
		}
		c.metrics.result(resultReplayed)
		return replayed, true, nil
	}
	for ep := range handed {
		last, err := c.lastCommitted(ctx, id.writer, ep)
		if err != nil {
			return Status{}, true, err
		}
		if last < id.epoch {
			return Status{}, false, nil
		}
	}
	for _, ep := range slices.Sorted(maps.Keys(handed)) {
		replayed.Participants = append(replayed.Participants, Participant{Endpoint: ep, Version: writers.NoVersion})
	}
	c.metrics.result(resultReplayed)
	return replayed, true, nil
}

// singleDescriptorOnly refuses descriptors handed over for an endpoint
// whose sink cannot publish several descriptors in one commit
// (writers.Contract.AggregatesDescriptors false: Delta upsert, Lance
// merge_insert), unless it is the transaction's own descriptor handed back
// (own: its participants; nil when this server has none), which
// decisionLocked drops as a duplicate.
func (c *Coordinator) singleDescriptorOnly(id txnID, own map[string]*part, handed map[string][]writers.Descriptor) error {
	for _, ep := range slices.Sorted(maps.Keys(handed)) {
		if w, ok := c.eps.Writer(ep); !ok || w.Contract().AggregatesDescriptors {
			continue
		}
		for i, d := range handed[ep] {
			if p := own[ep]; p == nil || !bytes.Equal(p.desc, d) {
				return writers.Errorf(writers.ErrInvalid, "txn: commit %s: descriptors[%q][%d] was handed over from another server, but endpoint %q publishes one descriptor per commit (upsert, merge_insert): commit each server's transaction on its own server", id, ep, i, ep)
			}
		}
	}
	return nil
}

// decisionLocked is what t's commit publishes per endpoint: its own
// descriptors plus the handed ones, without duplicates (an orchestrator
// may hand this server its own descriptor back).
func (t *txn) decisionLocked(handed map[string][]writers.Descriptor) map[string][]writers.Descriptor {
	d := make(map[string][]writers.Descriptor, len(t.parts)+len(handed))
	for ep, p := range t.parts {
		d[ep] = []writers.Descriptor{p.desc}
	}
	for ep, ds := range handed {
		for _, h := range ds {
			if !slices.ContainsFunc(d[ep], func(x writers.Descriptor) bool { return bytes.Equal(x, h) }) {
				d[ep] = append(d[ep], h)
			}
		}
	}
	return d
}

// finish commits the decided transaction t (op held) on every endpoint of
// the decision not committed yet, and journals it committed once all have.
// Endpoints that rewrite what the transaction read (writers.Contract
// Rewrites: upsert, merge_insert), whose commit a concurrent one can refuse
// for good, commit first; the others, concurrently, once those all have: a
// refusal then leaves nothing published, and the decision is undone
// (refusedEverywhere) instead of half published. Sink commits are
// idempotent, so retrying after a failure or a crash is safe.
func (c *Coordinator) finish(ctx context.Context, t *txn) (Status, error) {
	c.mu.Lock()
	var rewrites, others []commitJob
	for ep, ds := range t.decision {
		if _, ok := t.done[ep]; ok {
			continue
		}
		// An endpoint no longer configured goes first too: it may be a
		// rewriting one, and fails (NotFound) before the others publish.
		if w, ok := c.eps.Writer(ep); !ok || w.Contract().Rewrites {
			rewrites = append(rewrites, commitJob{ep, ds})
		} else {
			others = append(others, commitJob{ep, ds})
		}
	}
	c.mu.Unlock()

	errs := c.commitJobs(ctx, t, rewrites)
	c.replayedRefusals(ctx, t, rewrites, errs)
	if errors.Join(errs...) == nil {
		errs = c.commitJobs(ctx, t, others)
		c.replayedRefusals(ctx, t, others, errs)
	}
	// Undoing or journaling the outcome is not the client's to cancel.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.commitTimeout)
	defer cancel()
	if err := errors.Join(errs...); err != nil {
		if !c.refusedEverywhere(t, errs) {
			return Status{}, fmt.Errorf("%w (the commit is decided and kept: retry commit to finish it)", err)
		}
		// markUndoing checks for a later live epoch again, under the lock:
		// one may have been begun while the sinks were read.
		if !c.laterLive(t) && c.publishedNowhere(ctx, t) && c.markUndoing(t) {
			return c.abortDecided(ctx, t, err)
		}
		if c.laterLive(t) {
			// The later epoch waits for this one, and this one cannot be
			// undone while the later one could commit first: say how out.
			return Status{}, fmt.Errorf("%w (the commit is decided and kept: every endpoint refused it, but a later epoch of writer %q is open or precommitted; roll that one back and commit this one again: with no later epoch live, a commit every endpoint refuses and none records is undone, to be replayed)", err, t.id.writer)
		}
		return Status{}, fmt.Errorf("%w (the commit is decided and kept: every endpoint refused it, but not every sink could say its epoch is absent; retry commit once they can)", err)
	}

	c.mu.Lock()
	versions := make(map[string]int64, len(t.done))
	replayed := len(t.done) > 0 || c.committedAnywhereLocked(t.id.writer, t.id.epoch)
	for ep, info := range t.done {
		versions[ep] = info.Version
		replayed = replayed && info.Replayed
	}
	c.mu.Unlock()
	rec := &record{typ: recCommitted, Writer: t.id.writer, Epoch: t.id.epoch, At: c.now(), Versions: versions, Replayed: replayed}
	if err := c.log(nil, rec); err != nil {
		return Status{}, err
	}
	if replayed {
		c.metrics.result(resultReplayed)
	} else {
		c.metrics.result(resultCommitted)
	}
	c.logger.Info("txn: committed", "writer", t.id.writer, "epoch", t.id.epoch, "endpoints", len(versions), "replayed", replayed)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statusLocked(t), nil
}

// recoverSink, deferred in the goroutines that call a sink, turns a panic of
// the sink into that call's error and logs its stack: such goroutines are
// not gRPC handlers, and a panic there would end the process.
func (c *Coordinator) recoverSink(err *error, op string, id txnID, endpoint string) {
	v := recover() // only a deferred function's own call stops the panic
	if v == nil {
		return
	}
	perr := &writers.PanicError{Value: v, Stack: debug.Stack()}
	c.logger.Error("txn: a sink panicked", "op", op, "txn", id.String(), "endpoint", endpoint, "err", perr, "stack", string(perr.Stack))
	*err = fmt.Errorf("txn: %s %s on endpoint %q: %w", op, id, endpoint, perr)
}
