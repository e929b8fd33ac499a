package txn

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/quiver-ingest/quiver/writers"
)

// Attempts. Each start of a transaction (a begin, or a first put) is a new
// attempt with an id of its own, returned in Status.Attempt: a replay of
// an epoch after a crash begins a new attempt, which fences the one the
// crashed client left (its staged rows are discarded), so that the two
// never mix. A call naming an attempt (WithAttempt) acts only on that
// attempt; a put naming none joins only an attempt begun on its own
// connection (WithConn), and otherwise begins a new one.

// maxDeadAttempts bounds the ids of fenced and rolled-back attempts a
// transaction remembers, to refuse their descriptors in a commit.
const maxDeadAttempts = 16

// drainWait bounds how long a begin that fences an attempt waits for that
// attempt's streams to end (their contexts are cancelled by the abort).
const drainWait = 10 * time.Second

type attemptKey struct{}
type connKey struct{}

// WithAttempt returns a context whose Join, Precommit, Commit and
// Rollback act only on attempt of their transaction: another attempt is
// ErrWrongState naming both (Rollback answers the transaction's status
// without touching it). An empty attempt names none.
func WithAttempt(ctx context.Context, attempt string) context.Context {
	if attempt == "" {
		return ctx
	}
	return context.WithValue(ctx, attemptKey{}, attempt)
}

// WithConn returns a context naming the client connection of the call: an
// attempt begun on it (by Begin, or by a Join that begins) is the one a
// Join naming no attempt from the same connection joins. flightsvc uses
// the peer address of the gRPC connection.
func WithConn(ctx context.Context, conn string) context.Context {
	return context.WithValue(ctx, connKey{}, conn)
}

func attemptOf(ctx context.Context) string {
	a, _ := ctx.Value(attemptKey{}).(string)
	return a
}

func connOf(ctx context.Context) string {
	c, _ := ctx.Value(connKey{}).(string)
	return c
}

type handedKey struct{}

// WithHandedAttempts returns a context whose Commit refuses, with
// ErrWrongState, handed descriptors sealed for an attempt of the
// transaction that was fenced or rolled back, on this server or (through
// a writers.AttemptFencer's mark in the table) on the one that
// precommitted them: attempts maps each endpoint to the attempts its
// handed descriptors were sealed for.
func WithHandedAttempts(ctx context.Context, attempts map[string][]string) context.Context {
	return context.WithValue(ctx, handedKey{}, attempts)
}

// handedAttempts is ctx's WithHandedAttempts map, nil without one.
func handedAttempts(ctx context.Context) map[string][]string {
	m, _ := ctx.Value(handedKey{}).(map[string][]string)
	return m
}

// attemptsUsableLocked checks ctx's attempt (WithAttempt) and the handed
// descriptors' attempts (WithHandedAttempts) against t.
func (c *Coordinator) attemptsUsableLocked(ctx context.Context, op string, t *txn) error {
	if err := checkAttemptLocked(ctx, op, t); err != nil {
		return err
	}
	for _, attempts := range handedAttempts(ctx) {
		for _, a := range attempts {
			if err := deadAttemptLocked(t, a); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkFencedElsewhere refuses, with ErrWrongState, descriptors handed
// for endpoint whose attempt the server that precommitted them fenced or
// rolled back (a writers.AttemptFencer's mark in the table).
func (c *Coordinator) checkFencedElsewhere(ctx context.Context, t *txn, endpoint string, w writers.Writer) error {
	af, ok := writers.Find[writers.AttemptFencer](w)
	if !ok {
		return nil
	}
	for _, a := range handedAttempts(ctx)[endpoint] {
		if a == "" {
			continue
		}
		fenced, err := af.Fenced(ctx, t.key(), a)
		if err != nil {
			return fmt.Errorf("txn: commit %s: reading whether attempt %s was fenced on endpoint %q: %w (nothing was decided or published)", t.id, a, endpoint, err)
		}
		if fenced {
			return writers.Errorf(writers.ErrWrongState, "txn: commit %s: the descriptors handed for endpoint %q are of attempt %s, which the server that precommitted them fenced or rolled back: its rows are never published; begin the epoch again and replay it", t.id, endpoint, a)
		}
	}
	return nil
}

// markFenced records in the tables of t's participants (writers that are
// AttemptFencers) that t's precommitted attempt is fenced or rolled back,
// before the abort is journaled, so that a server handed its descriptors
// refuses them. Failures are logged: the abort goes on (a commit
// elsewhere racing it could publish them anyway).
func (c *Coordinator) markFenced(ctx context.Context, t *txn) {
	c.mu.Lock()
	precommitted, attempt := t.state == StatePrecommitted && (t.decision == nil || t.undoing), t.attempt
	eps := slices.Sorted(maps.Keys(t.parts))
	c.mu.Unlock()
	if !precommitted || attempt == "" {
		return
	}
	for _, ep := range eps {
		w, ok := c.eps.Writer(ep)
		if !ok {
			continue
		}
		if af, ok := writers.Find[writers.AttemptFencer](w); ok {
			if err := af.FenceAttempt(ctx, t.key(), attempt); err != nil {
				c.logger.Warn("txn: marking a fenced precommitted attempt in its table failed; a server handed its descriptors could still publish them", "txn", t.id.String(), "attempt", attempt, "endpoint", ep, "err", err)
			}
		}
	}
}

// newAttempt returns a fresh attempt id: 16 hex digits.
func newAttempt() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// checkAttemptLocked is ErrWrongState when ctx names an attempt of t other
// than its current one.
func checkAttemptLocked(ctx context.Context, op string, t *txn) error {
	a := attemptOf(ctx)
	if a == "" || a == t.attempt {
		return nil
	}
	why := "it was fenced by a later begin of the epoch, or rolled back, or expired"
	if t.state == StateAborted && !slices.Contains(t.dead, a) {
		why = "the transaction was aborted"
	}
	return writers.Errorf(writers.ErrWrongState, "txn: %s %s: attempt %s is not the current attempt (%s): %s; begin the epoch again and replay it", op, t.id, a, orNone(t.attempt), why)
}

// deadAttemptLocked is ErrWrongState when attempt is one t fenced or
// rolled back: descriptors sealed for it must never be published.
func deadAttemptLocked(t *txn, attempt string) error {
	if attempt == "" || attempt == t.attempt || !slices.Contains(t.dead, attempt) {
		return nil
	}
	return writers.Errorf(writers.ErrWrongState, "txn: commit %s: the descriptors of attempt %s were handed over, but that attempt was fenced or rolled back (the current one is %s): its rows are never published; begin the epoch again and replay it", t.id, attempt, orNone(t.attempt))
}

// buryLocked remembers t's current attempt as dead (fenced or rolled
// back), keeping the newest maxDeadAttempts.
func buryLocked(t *txn) {
	if t.attempt == "" || slices.Contains(t.dead, t.attempt) {
		return
	}
	t.dead = append(t.dead, t.attempt)
	if len(t.dead) > maxDeadAttempts {
		t.dead = slices.Delete(t.dead, 0, len(t.dead)-maxDeadAttempts)
	}
}

func orNone(attempt string) string {
	if attempt == "" {
		return "none"
	}
	return attempt
}

// fence aborts t's current attempt (op held; open, or precommitted with no
// commit decided), discarding its staged rows, and waits for its streams
// to end so that a new attempt may start: their contexts were cancelled
// by the abort. It returns ErrWrongState if they do not end in drainWait
// or ctx.
func (c *Coordinator) fence(ctx context.Context, t *txn, by string) error {
	c.mu.Lock()
	var rows int64
	for _, p := range t.parts {
		rows += p.rows
	}
	c.mu.Unlock()
	// Rows staged by the fenced attempt are dropped: expected for a
	// crashed client's, a loss for a client that reconnected mid-way
	// without naming its attempt, so say it loudly.
	level := slog.LevelInfo
	if rows > 0 {
		level = slog.LevelWarn
	}
	c.logger.Log(context.Background(), level, "txn: fencing the current attempt of an epoch; its staged rows are discarded", "txn", t.id.String(), "attempt", t.attempt, "by", by, "rows", rows)
	if err := c.abort(ctx, t, abortFenced); err != nil && c.isLive(t) {
		return err
	}
	deadline := time.NewTimer(drainWait)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		c.mu.Lock()
		n, pending, rolling := t.streams, len(t.discard), t.rollingBack
		c.mu.Unlock()
		if n == 0 && rolling == 0 {
			if pending > 0 { // a sink rollback failed: try once more
				return c.discardParts(ctx, t)
			}
			return nil
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return writers.Errorf(writers.ErrWrongState, "txn: %s: %d stream(s) of the fenced attempt are still ending: retry shortly", t.id, n)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}
