package writers

import (
	"errors"
	"fmt"
)

// Error classes. Every error a Writer or the coordinator returns wraps
// exactly one of them (with %w and a prefix saying where and what to do);
// flightsvc maps each to one gRPC code (see design.md, "Errors").
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

// Errorf formats an error of class class: Errorf(ErrInvalid, "delta: column
// %q: ...", name). The class is wrapped, so errors.Is(err, class) holds.
func Errorf(class error, format string, args ...any) error {
	return &classed{class: class, msg: fmt.Sprintf(format, args...)}
}

type classed struct {
	class error
	msg   string
}

func (e *classed) Error() string { return e.msg }
func (e *classed) Unwrap() error { return e.class }

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
