package endpoint

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/quiver-ingest/quiver/writers"
)

// DefaultDegradeAfter is Options.DegradeAfter's default.
const DefaultDegradeAfter = 3

// degradedHold is how long a degraded endpoint stays degraded without a
// new sink failure: a server whose only endpoint is degraded is out of a
// load balancer's rotation (/readyz), so no commit may come to clear it;
// after the hold its health passes again and the next sink failure makes
// it degraded at once (a circuit breaker's half-open state).
const degradedHold = 5 * time.Second

// sinkClasses are the failures that are the sink's (storage or broker
// unreachable or refusing, a commit whose outcome is unknown), as opposed
// to the caller's (invalid rows, a conflict, a transaction in the wrong
// state): only they count toward degraded.
var sinkClasses = []error{writers.ErrUnavailable, writers.ErrOutcomeUnknown,
	writers.ErrUnauthenticated, writers.ErrPermissionDenied}

// sinkFault reports whether err is the sink's failure.
func sinkFault(err error) bool {
	// A call cut off by its caller (cancelled, or past the client's
	// deadline) says nothing of the sink.
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	for _, c := range sinkClasses {
		if errors.Is(err, c) {
			return true
		}
	}
	return false
}

// faults counts an open sink's consecutive failures. A sink that opened
// can still fail every write (a table directory made read-only, a bucket
// policy changed, a dataset that can no longer be read): probes may pass
// while clients get Unavailable, so the endpoint's health comes from what
// its calls do, not only from its probe.
type faults struct {
	after int // failures in a row that make the endpoint degraded

	mu   sync.Mutex
	n    int       // consecutive sink failures
	op   string    // the last one's operation
	last error     // the last one
	at   time.Time // when the last one failed
}

// fail records a sink failure of op; it reports whether the endpoint just
// became degraded.
func (f *faults) fail(op string, err error) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	f.op, f.last, f.at = op, err, time.Now()
	return f.n == f.after
}

// succeed records a successful commit; it reports whether the endpoint
// was degraded.
func (f *faults) succeed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	was := f.n >= f.after
	f.n, f.op, f.last = 0, "", nil
	return was
}

// reason is why the endpoint is degraded, nil while it is not.
func (f *faults) reason(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n < f.after || time.Since(f.at) > degradedHold {
		return nil
	}
	return writers.Errorf(writers.ErrUnavailable,
		"endpoint %q is degraded: its last %d sink calls failed, the last (%s) with: %v; it recovers at the next successful commit, or is tried again %s after the last failure",
		name, f.n, f.op, f.last, degradedHold)
}

// Degraded is why the open sink's endpoint is degraded: its last
// Options.DegradeAfter writes, precommits or commits in a row failed with
// the sink's fault (sinkClasses); nil while it is not. A successful
// commit clears it; without one it lapses degradedHold after the last
// failure, until the next. Calls still go to the sink: only health (Check, the
// status page, quiver_endpoint_degraded) reports it.
func (w *Writer) Degraded() error {
	return w.faults.reason(w.opts.Name)
}

// Problem is why the endpoint does not serve well: Reason while the sink
// is not open, else Degraded; nil while it serves.
func (w *Writer) Problem() error {
	if err := w.Reason(); err != nil {
		return err
	}
	return w.Degraded()
}

// sinkFailed counts a failed sink call toward degraded, logging at WARN
// when the endpoint becomes degraded.
func (w *Writer) sinkFailed(op string, err error) {
	if !sinkFault(err) {
		return
	}
	if w.faults.fail(op, err) {
		w.opts.Logger.Warn("endpoint: degraded: its sink calls keep failing; health and /readyz report it until a commit succeeds",
			"endpoint", w.opts.Name, "sink", w.opts.Sink, "failures", w.faults.after, "op", op, "err", err)
	}
}

// committed clears the failures after a successful commit, logging when
// the endpoint recovers.
func (w *Writer) committed() {
	if w.faults.succeed() {
		w.opts.Logger.Info("endpoint: recovered: a commit succeeded", "endpoint", w.opts.Name, "sink", w.opts.Sink)
	}
}
