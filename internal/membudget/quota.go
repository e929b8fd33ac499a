package membudget

import (
	"context"
	"errors"
	"fmt"

	"github.com/quiver-ingest/quiver/writers"
)

// Quota bounds what the streams of one client (a token, or a peer host
// without auth) hold of the budget, whatever endpoints they write to
// (limits.client_memory_bytes): without it, one client's streams, each
// holding the reservation of its next message, could hold the whole
// budget and make every other client wait. Only stream bytes (Received,
// Decoded) count; what sinks hold belongs to no client.
type Quota struct {
	b     *Budget
	name  string
	limit int64
	used  int64 // guarded by b.mu
	// files counts the file writer slots the client took through
	// OpenFile (Options.ClientFiles); freed is closed, and replaced, when
	// one is given back. Guarded by b.mu.
	files int64
	freed chan struct{}
}

// Quota returns a quota of limit bytes (the budget's limit when limit is
// 0 or larger) for the client called name.
func (b *Budget) Quota(name string, limit int64) *Quota {
	if limit <= 0 || limit > b.limit {
		limit = b.limit
	}
	return &Quota{b: b, name: name, limit: limit, freed: make(chan struct{})}
}

// Idle reports that the client holds nothing: no bytes, no file slot.
func (q *Quota) Idle() bool {
	q.b.mu.Lock()
	defer q.b.mu.Unlock()
	return q.used == 0 && q.files == 0
}

type quotaKey struct{}

// WithQuota returns ctx telling OpenFile whose call it serves (the
// context of a stream's writes), so that the slot counts against q.
func WithQuota(ctx context.Context, q *Quota) context.Context {
	return context.WithValue(ctx, quotaKey{}, q)
}

func quotaOf(ctx context.Context) *Quota {
	q, _ := ctx.Value(quotaKey{}).(*Quota)
	return q
}

// takeFile counts a file slot for q (nil: none), waiting while q holds
// Options.ClientFiles of them; when ctx ends first it fails, with
// ErrExhausted naming the quota if ctx's cause is ErrFull.
func (q *Quota) takeFile(ctx context.Context) error {
	if q == nil {
		return nil
	}
	b := q.b
	for {
		b.mu.Lock()
		if q.files < b.clientFiles {
			q.files++
			b.mu.Unlock()
			return nil
		}
		freed := q.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), ErrFull) {
				return writers.Errorf(writers.ErrExhausted, "client %q holds %d file writers, its quota (limits.client_open_files), for %s (limits.admission_timeout): commit or roll back its open transactions, or raise limits.client_open_files", q.name, b.clientFiles, b.admission)
			}
			return fmt.Errorf("membudget: wait for a file writer: %w", context.Cause(ctx))
		}
	}
}

// releaseFile gives back a slot takeFile counted.
func (q *Quota) releaseFile() {
	if q == nil {
		return
	}
	q.b.mu.Lock()
	defer q.b.mu.Unlock()
	q.files--
	close(q.freed)
	q.freed = make(chan struct{})
}

// Used is what the client's streams hold now.
func (q *Quota) Used() int64 {
	q.b.mu.Lock()
	defer q.b.mu.Unlock()
	return q.used
}

// fitsLocked: n more bytes fit q (a nil q has no bound). A client holding
// nothing may go over, so that one message always progresses.
func (q *Quota) fitsLocked(n int64) bool {
	return q == nil || q.used+n <= q.limit || q.used == 0
}

// Account charges a stream's bytes to its endpoint's share and to its
// client's quota at once.
type Account struct {
	s *Share
	q *Quota // nil: no client quota
}

// Account returns an account charging s and q (nil: no quota).
func (s *Share) Account(q *Quota) Account { return Account{s: s, q: q} }

// Acquire waits until n bytes of kind fit the share, the quota and the
// budget, then charges them; it returns ctx's cause when ctx ends first.
func (a Account) Acquire(ctx context.Context, k Kind, n int64) error {
	b := a.s.b
	b.mu.Lock()
	if b.waiters.Len() == 0 && b.fitsLocked(a.s, a.q, n) {
		b.takeLocked(a.s, a.q, k, n)
		b.mu.Unlock()
		return nil
	}
	w := &waiter{s: a.s, q: a.q, kind: k, n: n, ready: make(chan struct{})}
	e := b.waiters.PushBack(w)
	a.s.waiting++
	b.notifyLocked()
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			b.mu.Unlock()
			a.Release(k, n)
		default:
			b.waiters.Remove(e)
			a.s.waiting--
			b.notifyLocked()
			b.mu.Unlock()
		}
		return context.Cause(ctx)
	}
}

// Admit is Acquire for a stream's first bytes: it waits at most the
// admission timeout, then fails with ErrExhausted naming what stayed full
// (the client's quota, or the budget) and telling to retry.
func (a Account) Admit(ctx context.Context, k Kind, n int64) error {
	b := a.s.b
	ctx, cancel := context.WithTimeoutCause(ctx, b.admission, ErrFull)
	defer cancel()
	err := a.Acquire(ctx, k, n)
	if !errors.Is(err, ErrFull) {
		return err
	}
	if q := a.q; q != nil {
		b.mu.Lock()
		used := q.used
		b.mu.Unlock()
		if used+n > q.limit {
			return writers.Errorf(writers.ErrExhausted, "client %q: its other streams held %d of its %d bytes (limits.client_memory_bytes) for %s (limits.admission_timeout): finish or close streams before opening more, or raise limits.client_memory_bytes: %w",
				q.name, used, q.limit, b.admission, err)
		}
	}
	return writers.Errorf(writers.ErrExhausted, "the memory budget stayed full for %s (limits.admission_timeout; %d of limits.memory_bytes %d bytes, endpoint %q %d of %d in use): retry later, or raise limits.memory_bytes: %w",
		b.admission, b.usedNow(), b.limit, a.s.name, a.s.usedNow(), a.s.limit, err)
}

// Charge charges n bytes of kind without waiting: the holder already has
// them (a message gRPC has read, a batch larger than its estimate).
func (a Account) Charge(k Kind, n int64) {
	a.s.b.mu.Lock()
	a.s.b.takeLocked(a.s, a.q, k, n)
	a.s.b.mu.Unlock()
}

// Release gives back n bytes of kind and wakes the waiters that now fit.
func (a Account) Release(k Kind, n int64) { a.Trade(k, n, k, 0) }

// Trade gives back n bytes of kind from and charges m bytes of kind to in
// one step (a received message becoming a decoded batch), without waiting.
func (a Account) Trade(from Kind, n int64, to Kind, m int64) {
	if n == 0 && m == 0 {
		return
	}
	b := a.s.b
	b.mu.Lock()
	b.takeLocked(a.s, a.q, from, -n)
	b.takeLocked(a.s, a.q, to, m)
	b.notifyLocked()
	b.mu.Unlock()
}
