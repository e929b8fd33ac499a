package tablesink

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// Stages holds what each key staged on this writer, S being the sink's
// stage. A key's own calls are never concurrent, so S needs no lock;
// Stages is safe for concurrent use.
type Stages[S any] struct {
	sink    string // names the sink in errors
	discard func(ctx context.Context, s *S) error

	mu     sync.Mutex
	m      map[writers.TxnKey]*S
	closed bool
}

// NewStages returns an empty registry for sink; discard drops what a
// stage holds that no descriptor names (Rollback, Forget, Close).
func NewStages[S any](sink string, discard func(ctx context.Context, s *S) error) *Stages[S] {
	return &Stages[S]{sink: sink, discard: discard, m: make(map[writers.TxnKey]*S)}
}

// Get returns key's stage, creating an empty one when create is set; nil
// when the key has none. After CloseWriter it is ErrWrongState.
func (r *Stages[S]) Get(key writers.TxnKey, create bool) (*S, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, writers.Errorf(writers.ErrWrongState, "%s: the writer is closed", r.sink)
	}
	s := r.m[key]
	if s == nil && create {
		s = new(S)
		r.m[key] = s
	}
	return s, nil
}

// take removes and returns key's stage, nil when it has none.
func (r *Stages[S]) take(key writers.TxnKey) *S {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.m[key]
	delete(r.m, key)
	return s
}

// Rollback forgets key and discards what it staged. Unknown keys are a
// no-op, so it is idempotent.
func (r *Stages[S]) Rollback(ctx context.Context, key writers.TxnKey) error {
	if s := r.take(key); s != nil {
		return r.discard(ctx, s)
	}
	return nil
}

// Forget drops key's stage when its commit starts: precommitted files
// stay (the commit publishes them), anything staged after the precommit
// is discarded, a failure only logged. It returns the stage, nil when the
// key had none.
func (r *Stages[S]) Forget(ctx context.Context, key writers.TxnKey, log *slog.Logger) *S {
	s := r.take(key)
	if s != nil {
		if err := r.discard(ctx, s); err != nil {
			log.Warn(r.sink+": discarding data staged after precommit failed", "key", key.String(), "err", err)
		}
	}
	return s
}

// IfOpen runs fn under the registry's lock unless CloseWriter has run,
// and reports whether it ran: work started by fn (a background goroutine
// counted in a WaitGroup) is then seen by CloseWriter's stop, which waits
// for it.
func (r *Stages[S]) IfOpen(fn func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	fn()
	return true
}

// CloseWriter closes a table sink's writer, once (later calls return
// nil): it marks the registry closed, runs stop (the writer's background
// work ends), and, when the writer was opened (bucket not nil), gives
// back its pins (release) and discards every stage before closing bucket.
// Precommitted files stay for a commit to publish.
func (r *Stages[S]) CloseWriter(ctx context.Context, bucket *storage.Bucket, stop, release func()) error {
	stages, first := r.close()
	if !first {
		return nil
	}
	stop()
	if bucket == nil {
		return nil
	}
	release()
	var errs []error
	for _, s := range stages {
		errs = append(errs, r.discard(ctx, s))
	}
	return errors.Join(append(errs, bucket.Close())...)
}

// close marks the registry closed and returns every stage; first is false
// when it had already run, and then there are none.
func (r *Stages[S]) close() (stages []*S, first bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, false
	}
	r.closed = true
	for _, s := range r.m {
		stages = append(stages, s)
	}
	r.m = nil
	return stages, true
}
