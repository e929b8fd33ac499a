// Package endpoint keeps one broken sink from taking the server down: a
// Writer stands for an endpoint's sink writer, opens it, and when that
// fails at run time (storage or broker unreachable, credentials refused, a
// table Quiver cannot write) answers every call with the reason while it
// rebuilds and reopens the sink in the background with capped, jittered
// exponential backoff. Once the sink opens it serves as if it had opened
// at start.
//
// Configuration errors are not its business: the sink's New runs before a
// Writer exists, and its failures still stop the server.
package endpoint

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/quiver-ingest/quiver/internal/redact"
	"github.com/quiver-ingest/quiver/writers"
)

// Defaults of Options.
const (
	DefaultMinBackoff     = time.Second
	DefaultMaxBackoff     = time.Minute
	DefaultAttemptTimeout = time.Minute
)

// Options configure a Writer. Zero values are documented per field.
type Options struct {
	// Name and Sink name the endpoint in errors and logs.
	Name, Sink string
	// Rebuild builds a fresh, unopened writer with the endpoint's settings
	// (the sink's New): a writer whose Open failed is closed and replaced,
	// never opened twice.
	Rebuild func() (writers.Writer, error)
	// Logger; nil discards.
	Logger *slog.Logger
	// MinBackoff and MaxBackoff bound the wait between attempts, doubling
	// from the first to the second; zero means 1 s and 1 min.
	MinBackoff, MaxBackoff time.Duration
	// AttemptTimeout bounds one background Open; zero means 1 min.
	AttemptTimeout time.Duration
	// Observer learns of the sink's commits and failures; nil: nobody.
	Observer Observer
	// TracerProvider makes a span per sink commit; nil makes none.
	TracerProvider trace.TracerProvider
	// DegradeAfter is how many writes, precommits or commits in a row
	// must fail with the sink's fault before the endpoint is degraded
	// (Degraded); zero means DefaultDegradeAfter.
	DegradeAfter int
}

// state is what a Writer stands for: the open writer, or why there is none.
type state struct {
	w   writers.Writer // nil while unavailable
	err error          // the error calls answer while w is nil
}

// Writer is an endpoint's writer that may be unavailable. It implements
// writers.Writer, writers.SchemaReporter and writers.SchemaChecker by
// delegating to the open sink writer; while there is none every call
// answers the reason: ErrUnavailable when retrying may help (unreachable,
// timed out), ErrWrongState when the sink needs an operator first (a
// corrupt or unsupported table, refused credentials, a missing topic).
// All methods are safe for concurrent use; reaching the open writer costs
// one atomic load.
type Writer struct {
	opts     Options
	contract writers.Contract
	first    writers.Writer // built by the caller, opened by Open

	state  atomic.Pointer[state]
	tracer trace.Tracer

	faults faults // consecutive sink failures of the open sink (Degraded)

	rowsMu sync.Mutex
	rows   map[writers.TxnKey]int64 // rows written per key not yet committed or rolled back

	mu     sync.Mutex // guards closed and the start of the retry loop
	closed bool
	stop   context.CancelFunc // ends the retry loop; nil when none runs
	done   chan struct{}      // closed when the retry loop ends
}

var (
	_ writers.Writer         = (*Writer)(nil)
	_ writers.SchemaReporter = (*Writer)(nil)
	_ writers.SchemaChecker  = (*Writer)(nil)
	_ writers.Targeted       = (*Writer)(nil)
)

// New wraps first, the endpoint's unopened writer.
func New(first writers.Writer, opts Options) *Writer {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.AttemptTimeout <= 0 {
		opts.AttemptTimeout = DefaultAttemptTimeout
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	if opts.TracerProvider == nil {
		opts.TracerProvider = noop.NewTracerProvider()
	}
	if opts.DegradeAfter <= 0 {
		opts.DegradeAfter = DefaultDegradeAfter
	}
	w := &Writer{opts: opts, contract: first.Contract(), first: first, tracer: opts.TracerProvider.Tracer(tracerName),
		faults: faults{after: opts.DegradeAfter}, rows: make(map[writers.TxnKey]int64)}
	w.state.Store(&state{err: writers.Errorf(writers.ErrUnavailable, "endpoint %q is not open yet", opts.Name)})
	return w
}

// Open opens the sink writer. When that fails the endpoint is unavailable
// (logged at WARN) and Open returns nil: the server starts anyway, and
// Retry keeps trying. Only a cancelled ctx is an error.
func (w *Writer) Open(ctx context.Context) error {
	err := openGuarded(ctx, w.first)
	if err == nil {
		w.state.Store(&state{w: w.first})
		return nil
	}
	cerr := w.first.Close(context.WithoutCancel(ctx))
	if ctx.Err() != nil {
		return errors.Join(err, cerr)
	}
	w.down(err, w.opts.MinBackoff)
	return nil
}

// Name is the endpoint's name.
func (w *Writer) Name() string { return w.opts.Name }

// Up reports whether the sink writer is open.
func (w *Writer) Up() bool { return w.state.Load().w != nil }

// Reason is why the sink is not open (what calls answer), nil while it
// is.
func (w *Writer) Reason() error {
	if st := w.state.Load(); st.w == nil {
		return st.err
	}
	return nil
}

// Retry starts reopening the sink in the background while it is
// unavailable. Once a sink opens, prepare (if not nil) gets it before it
// serves any call, then onOpen runs (with a context that Close cancels)
// before any other attempt could. Retry does nothing when the writer is
// open or closed, or a loop runs.
func (w *Writer) Retry(prepare func(writers.Writer), onOpen func(ctx context.Context)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.stop != nil || w.Up() {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	w.stop, w.done = stop, make(chan struct{})
	go w.retry(ctx, prepare, onOpen)
}

func (w *Writer) retry(ctx context.Context, prepare func(writers.Writer), onOpen func(context.Context)) {
	defer close(w.done)
	since := time.Now()
	delay := w.opts.MinBackoff
	for attempt := 2; ; attempt++ {
		t := time.NewTimer(jitter(delay))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		nw, err := w.attempt(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			delay = min(2*delay, w.opts.MaxBackoff)
			w.down(err, delay)
			continue
		}
		if prepare != nil {
			prepare(nw)
		}
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			nw.Close(context.WithoutCancel(ctx))
			return
		}
		w.state.Store(&state{w: nw})
		w.mu.Unlock()
		w.opts.Logger.Info("endpoint: the sink opened: serving", "endpoint", w.opts.Name, "sink", w.opts.Sink,
			"attempts", attempt, "unavailable_for", time.Since(since).Round(time.Millisecond))
		if onOpen != nil {
			onOpen(ctx)
		}
		return
	}
}

// attempt builds and opens a fresh sink writer, closing it on failure.
func (w *Writer) attempt(ctx context.Context) (writers.Writer, error) {
	nw, err := w.opts.Rebuild()
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, w.opts.AttemptTimeout)
	defer cancel()
	if err := openGuarded(actx, nw); err != nil {
		return nil, errors.Join(err, nw.Close(context.WithoutCancel(ctx)))
	}
	return nw, nil
}

// openGuarded opens w, a panic returned as its error: opening reads the
// table, which another process may have written, and no endpoint's table
// may take the server down.
func openGuarded(ctx context.Context, w writers.Writer) (err error) {
	defer writers.Recover(&err)
	return w.Open(ctx)
}

// jitter spreads d over [d/2, d) so that servers restarted together do
// not retry in lockstep.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

// down records why the sink cannot be opened, logging at WARN the first
// reason and every change of it.
func (w *Writer) down(cause error, next time.Duration) {
	err := unavailable(w.opts.Name, cause)
	prev := w.state.Load().err
	w.state.Store(&state{err: err})
	w.opts.Observer.Failed("open", cause)
	if prev == nil || prev.Error() != err.Error() {
		w.opts.Logger.Warn("endpoint: the sink could not be opened: the endpoint is unavailable, the server keeps retrying",
			"endpoint", w.opts.Name, "sink", w.opts.Sink, "err", cause, "next_attempt_within", next)
	}
}

// operatorClasses are the classes of an Open failure that retrying alone
// will not fix: the table, the topic or the credentials need an operator.
var operatorClasses = []error{writers.ErrInvalid, writers.ErrWrongState, writers.ErrNotFound,
	writers.ErrUnauthenticated, writers.ErrPermissionDenied}

// unavailable is the error calls answer while the sink is not open.
func unavailable(name string, cause error) error {
	class := writers.ErrUnavailable
	for _, c := range operatorClasses {
		if errors.Is(cause, c) {
			class = writers.ErrWrongState
			break
		}
	}
	return writers.Errorf(class, "endpoint %q is unavailable: its sink could not be opened (the server retries in the background; see the health action): %w", name, cause)
}

// Close stops the retry loop and closes the sink writer, if open.
// Idempotent.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	stop, done := w.stop, w.done
	w.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	// Calls after Close reach the closed sink writer, as they would
	// without this wrapper.
	if st := w.state.Load(); st.w != nil {
		return st.w.Close(ctx)
	}
	return nil
}

// Write stages rows in the open sink writer.
func (w *Writer) Write(ctx context.Context, key writers.TxnKey, rec arrow.RecordBatch) error {
	st := w.state.Load()
	if st.w == nil {
		return st.err
	}
	if err := st.w.Write(ctx, key, rec); err != nil {
		w.failed("write", err)
		return err
	}
	w.rowsMu.Lock()
	w.rows[key] += rec.NumRows()
	w.rowsMu.Unlock()
	return nil
}

// Precommit precommits in the open sink writer.
func (w *Writer) Precommit(ctx context.Context, key writers.TxnKey) (writers.Descriptor, error) {
	st := w.state.Load()
	if st.w == nil {
		return nil, st.err
	}
	d, err := st.w.Precommit(ctx, key)
	if err != nil {
		w.failed("precommit", err)
	}
	return d, err
}

// Commit commits in the open sink writer, in a span of its own, and tells
// the observer.
func (w *Writer) Commit(ctx context.Context, key writers.TxnKey, descs []writers.Descriptor) (writers.CommitInfo, error) {
	return w.commit(ctx, key, descs, nil)
}

// CommitSeqs is Commit of a continuous streams' group commit
// (writers.SeqCommitter); a sink that takes no streams refuses it with
// ErrWrongState.
func (w *Writer) CommitSeqs(ctx context.Context, key writers.TxnKey, descs []writers.Descriptor, seqs []writers.WriterSeq) (writers.CommitInfo, error) {
	return w.commit(ctx, key, descs, seqs)
}

func (w *Writer) commit(ctx context.Context, key writers.TxnKey, descs []writers.Descriptor, seqs []writers.WriterSeq) (writers.CommitInfo, error) {
	st := w.state.Load()
	if st.w == nil {
		return writers.CommitInfo{}, st.err
	}
	commit := st.w.Commit
	if seqs != nil {
		sc, ok := st.w.(writers.SeqCommitter)
		if !ok {
			return writers.CommitInfo{}, writers.Errorf(writers.ErrWrongState, "endpoint %q: sink %q takes no continuous streams", w.opts.Name, w.opts.Sink)
		}
		commit = func(ctx context.Context, key writers.TxnKey, descs []writers.Descriptor) (writers.CommitInfo, error) {
			return sc.CommitSeqs(ctx, key, descs, seqs)
		}
	}
	w.rowsMu.Lock()
	rows := w.rows[key]
	w.rowsMu.Unlock()
	ctx, span := w.tracer.Start(ctx, "quiver.sink.commit", trace.WithAttributes(
		attribute.String("quiver.endpoint", w.opts.Name),
		attribute.String("quiver.sink", w.opts.Sink),
		attribute.String("quiver.writer", key.Writer),
		attribute.Int64("quiver.epoch", key.Epoch),
		attribute.Bool("quiver.auto_commit", key.Auto),
		attribute.Int64("quiver.rows", rows),
	))
	defer span.End()
	span.SetAttributes(attribute.Int("quiver.stream_writers", len(seqs)))
	start := time.Now()
	info, err := commit(ctx, key, descs)
	if err != nil {
		shown := redact.Error(err) // spans leave the process
		span.RecordError(shown)
		span.SetStatus(codes.Error, shown.Error())
		w.failed("commit", err)
		return info, err
	}
	span.SetAttributes(attribute.Int64("quiver.table_version", info.Version), attribute.Bool("quiver.replayed", info.Replayed))
	w.forget(key)
	w.committed()
	w.opts.Observer.Committed(Commit{Key: key, Info: info, Rows: rows, At: start, Took: time.Since(start)})
	return info, nil
}

// Rollback rolls back in the open sink writer.
func (w *Writer) Rollback(ctx context.Context, key writers.TxnKey) error {
	st := w.state.Load()
	if st.w == nil {
		return st.err
	}
	w.forget(key)
	return st.w.Rollback(ctx, key)
}

// forget drops the row count of a key that is done.
func (w *Writer) forget(key writers.TxnKey) {
	w.rowsMu.Lock()
	delete(w.rows, key)
	w.rowsMu.Unlock()
}

// failed tells the observer of a sink call's failure, unless the caller
// went away (a cancelled stream is not the sink's fault), and counts it
// toward degraded when it is the sink's.
func (w *Writer) failed(op string, err error) {
	if !errors.Is(err, context.Canceled) {
		w.opts.Observer.Failed(op, err)
	}
	w.sinkFailed(op, err)
}

// CommittedEpoch asks the open sink writer.
func (w *Writer) CommittedEpoch(ctx context.Context, writer string) (int64, bool, error) {
	st := w.state.Load()
	if st.w == nil {
		return 0, false, st.err
	}
	return st.w.CommittedEpoch(ctx, writer)
}

// Contract is the sink's, known from its settings even while unavailable.
func (w *Writer) Contract() writers.Contract { return w.contract }

// Check probes the open sink writer; while there is none it answers the
// reason, and while the endpoint is degraded why (Degraded): a probe
// that passes while every write fails must not report the endpoint ok.
func (w *Writer) Check(ctx context.Context) error {
	st := w.state.Load()
	if st.w == nil {
		return st.err
	}
	if err := w.Degraded(); err != nil {
		return err
	}
	return st.w.Check(ctx)
}

// Schema is the open sink writer's schema (writers.SchemaOf).
func (w *Writer) Schema(ctx context.Context) (*arrow.Schema, error) {
	st := w.state.Load()
	if st.w == nil {
		return nil, st.err
	}
	return writers.SchemaOf(ctx, st.w)
}

// CheckSchema applies the open sink writer's rule
// (writers.CheckStreamSchema).
func (w *Writer) CheckSchema(ctx context.Context, s *arrow.Schema) error {
	st := w.state.Load()
	if st.w == nil {
		return st.err
	}
	return writers.CheckStreamSchema(ctx, st.w, s)
}

// Unwrap returns the open sink writer, nil while unavailable.
func (w *Writer) Unwrap() writers.Writer { return w.state.Load().w }

// Target is the sink's table (writers.Targeted), known while the sink is
// down too; "" for a sink without one.
func (w *Writer) Target() string {
	if t, ok := w.first.(writers.Targeted); ok {
		return t.Target()
	}
	return ""
}
