package flightsvc

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiver-ingest/quiver/internal/redact"
	"github.com/quiver-ingest/quiver/writers"
)

// classCodes maps each error class to its gRPC code (docs/design.md,
// "The writer contract").
// Order matters: an error may wrap several classes (an OutcomeUnknownError
// wraps ErrOutcomeUnknown and its cause), and the first match wins, so the
// outcome-unknown class comes first.
var classCodes = []struct {
	class error
	code  codes.Code
}{
	{writers.ErrOutcomeUnknown, codes.Unknown},
	{writers.ErrInvalid, codes.InvalidArgument},
	{writers.ErrNotFound, codes.NotFound},
	{writers.ErrWrongState, codes.FailedPrecondition},
	{writers.ErrConflict, codes.Aborted},
	{writers.ErrExhausted, codes.ResourceExhausted},
	{writers.ErrUnavailable, codes.Unavailable},
	{writers.ErrUnauthenticated, codes.Unauthenticated},
	{writers.ErrPermissionDenied, codes.PermissionDenied},
}

// Status maps err to the gRPC status error a client receives; it is the one
// place where error classes become codes. In order: a cancellation (a
// context.Canceled anywhere in err's chain, unless the outcome of a commit
// is unknown) is Canceled; an error of a writers
// class gets that class's code (outcome unknown becomes Unknown and its
// message always tells the client to reconcile with committed-epoch); an
// error that already carries a gRPC status keeps it; context errors become
// Canceled or DeadlineExceeded; anything else is Internal. The message is
// err's, its URIs redacted (package redact). Status(nil) is nil.
func Status(err error) error {
	if err == nil {
		return nil
	}
	// What a client reads: URIs in it lose their credentials.
	msg := redact.Text(err.Error())
	if !errors.Is(err, writers.ErrOutcomeUnknown) && errors.Is(err, context.Canceled) {
		// Cancelled, whatever the sink made of it: the client left or the
		// server is stopping, and a hint such as "check that Kafka is up"
		// would send an operator the wrong way.
		return status.Error(codes.Canceled, msg)
	}
	if code, ok := classCode(err); ok {
		if code == codes.Unknown && !strings.Contains(msg, "committed-epoch") {
			msg += " (outcome unknown: reconcile with the committed-epoch action before retrying)"
		}
		return status.Error(code, msg)
	}
	if st, ok := status.FromError(err); ok {
		return status.Error(st.Code(), redact.Text(st.Message()))
	}
	if isContextError(err) {
		return status.Error(status.FromContextError(err).Code(), msg)
	}
	return status.Error(codes.Internal, msg)
}

func classCode(err error) (codes.Code, bool) {
	for _, c := range classCodes {
		if errors.Is(err, c.class) {
			return c.code, true
		}
	}
	return codes.Internal, false
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// classified reports whether Status maps err to a specific code (a writers
// class, a gRPC status or a context error) rather than to Internal.
func classified(err error) bool {
	_, class := classCode(err)
	_, grpcStatus := status.FromError(err)
	return class || grpcStatus || isContextError(err)
}

// truncate cuts s to n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// shownNameBytes bounds a name the client chose (an endpoint, an action
// type) quoted in an error: a 60 MiB name must not become a 60 MiB
// status message and log line.
const shownNameBytes = 128

// shown is a client-chosen name cut for an error message.
func shown(name string) string { return truncate(name, shownNameBytes) }
