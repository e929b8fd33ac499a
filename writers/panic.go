package writers

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// PanicError is a panic turned into an error by [Recover]: a bug met while
// handling one stream, which fails that stream (Internal) instead of the
// process. Its message omits the stack, which whoever logs the error
// should log (flightsvc does).
type PanicError struct {
	Value any    // what was passed to panic
	Stack []byte // the panicking goroutine's stack
}

// Error names the panic value. PanicError has no class and does not
// unwrap to the value, so that it always maps to Internal, whatever was
// passed to panic.
func (e *PanicError) Error() string { return fmt.Sprintf("internal error: panic: %v", e.Value) }

// Recover, deferred at the top of a goroutine a sink starts (or around a
// call that must not take the process down), turns a panic into a
// *PanicError stored in *err. gRPC recovers the panics of its handler
// goroutines only; a panic in any other goroutine ends the process.
//
//	go func() {
//		defer writers.Recover(&err)
//		...
//	}()
func Recover(err *error) {
	if v := recover(); v != nil {
		*err = &PanicError{Value: v, Stack: debug.Stack()}
	}
}

// Guard returns f, with a panic in f returned as its error (a *PanicError):
// for errgroup.Group.Go and the like.
func Guard(f func() error) func() error {
	return func() (err error) {
		defer Recover(&err)
		return f()
	}
}

// PanicStack returns the stack of the *PanicError in err's chain, or ""
// when err carries no panic.
func PanicStack(err error) string {
	var pe *PanicError
	if errors.As(err, &pe) {
		return string(pe.Stack)
	}
	return ""
}
