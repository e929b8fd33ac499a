package writers

import (
	"errors"
	"fmt"
)

// Error classes. Every error a Writer or the coordinator returns wraps
// exactly one of them (with %w and a prefix saying where and what to do);
// flightsvc maps each to one gRPC code (docs/design.md, "The writer contract").
var (
	// ErrInvalid: the input is wrong (unknown column, wrong type, bad
	// descriptor, null merge key). Retrying the same input fails again.
	ErrInvalid = errors.New("invalid input")
	// ErrNotFound: unknown endpoint or transaction.
	ErrNotFound = errors.New("not found")
	// ErrWrongState: the call is not allowed in the current state (commit
	// before precommit, fenced epoch).
	ErrWrongState = errors.New("wrong state")
	// ErrConflict: a concurrent commit won and this one cannot be rebased.
	ErrConflict = errors.New("conflict")
	// ErrExhausted: a limit was hit (message size, streams, budget).
	ErrExhausted = errors.New("resource exhausted")
	// ErrUnavailable: the sink is unreachable; retrying later may succeed.
	// Nothing was published.
	ErrUnavailable = errors.New("unavailable")
	// ErrOutcomeUnknown: a commit was dispatched and its answer lost. The
	// caller must reconcile with the committed-epoch action.
	ErrOutcomeUnknown = errors.New("outcome unknown")
	// ErrUnauthenticated and ErrPermissionDenied are the auth classes.
	ErrUnauthenticated  = errors.New("unauthenticated")
	ErrPermissionDenied = errors.New("permission denied")
)

// classes lists every class; isClass tells them from other errors.
var classes = []error{ErrInvalid, ErrNotFound, ErrWrongState, ErrConflict, ErrExhausted,
	ErrUnavailable, ErrOutcomeUnknown, ErrUnauthenticated, ErrPermissionDenied}

// Errorf formats an error of class class: Errorf(ErrInvalid, "delta: column
// %q: %w", name, err). Like fmt.Errorf it honours %w, so errors.Is and
// errors.As reach the cause (a context.Canceled stays one).
//
// The class given here is the error's only class: a class the cause
// carries is hidden from errors.Is (the caller has reclassified it), except
// ErrOutcomeUnknown, which no wrapper may hide — a commit whose outcome is
// unknown must never be rolled back as if it had failed.
func Errorf(class error, format string, args ...any) error {
	return &classed{class: class, cause: cause{fmt.Errorf(format, args...)}}
}

type classed struct {
	class error
	cause cause
}

func (e *classed) Error() string { return e.cause.err.Error() }

// Unwrap returns the class and the cause.
func (e *classed) Unwrap() []error { return []error{e.class, e.cause} }

// cause is the formatted error of a classed error, with the classes of
// what it wraps hidden (see Errorf). It has no Unwrap method so that
// errors.Is and errors.As go through its own methods.
type cause struct{ err error }

func (c cause) Error() string { return c.err.Error() }

func (c cause) Is(target error) bool {
	if isClass(target) && target != ErrOutcomeUnknown {
		return false
	}
	return errors.Is(c.err, target)
}

func (c cause) As(target any) bool { return errors.As(c.err, target) }

func isClass(err error) bool {
	for _, c := range classes {
		if err == c {
			return true
		}
	}
	return false
}

// OutcomeUnknownError reports a commit whose result is unknown, with the
// transaction to reconcile.
type OutcomeUnknownError struct {
	Endpoint string
	Key      TxnKey
	Err      error
}

func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("commit of %s on endpoint %q: outcome unknown (reconcile with committed-epoch): %v", e.Key, e.Endpoint, e.Err)
}

// Unwrap returns both ErrOutcomeUnknown and the cause.
func (e *OutcomeUnknownError) Unwrap() []error { return []error{ErrOutcomeUnknown, e.Err} }
