package flightsvc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiver-ingest/quiver/flightsvc"
	"github.com/quiver-ingest/quiver/writers"
)

func TestStatus(t *testing.T) {
	unknown := &writers.OutcomeUnknownError{
		Endpoint: "events",
		Key:      writers.TxnKey{Writer: "job", Epoch: 3},
		Err:      writers.Errorf(writers.ErrUnavailable, "delta: put timed out"),
	}
	tests := []struct {
		name     string
		err      error
		code     codes.Code
		contains string
	}{
		{"invalid", writers.Errorf(writers.ErrInvalid, "delta: unknown column %q", "x"), codes.InvalidArgument, `unknown column "x"`},
		{"not found", writers.Errorf(writers.ErrNotFound, "unknown endpoint"), codes.NotFound, "unknown endpoint"},
		{"wrong state", writers.Errorf(writers.ErrWrongState, "commit before precommit"), codes.FailedPrecondition, "commit before precommit"},
		{"conflict", writers.Errorf(writers.ErrConflict, "lost the race"), codes.Aborted, "lost the race"},
		{"exhausted", writers.Errorf(writers.ErrExhausted, "too many streams"), codes.ResourceExhausted, "too many streams"},
		{"unavailable", writers.Errorf(writers.ErrUnavailable, "broker down"), codes.Unavailable, "broker down"},
		{"outcome unknown, typed", unknown, codes.Unknown, "reconcile with committed-epoch"},
		{"outcome unknown, plain", writers.Errorf(writers.ErrOutcomeUnknown, "kafka: commit answer lost"), codes.Unknown, "reconcile with the committed-epoch action"},
		{"unauthenticated", writers.Errorf(writers.ErrUnauthenticated, "no token"), codes.Unauthenticated, "no token"},
		{"permission denied", writers.Errorf(writers.ErrPermissionDenied, "not yours"), codes.PermissionDenied, "not yours"},
		{"wrapped class", fmt.Errorf("action commit: %w", writers.Errorf(writers.ErrConflict, "lost")), codes.Aborted, "action commit: lost"},
		{"grpc status kept", status.Error(codes.OutOfRange, "far"), codes.OutOfRange, "far"},
		{"canceled", fmt.Errorf("write: %w", context.Canceled), codes.Canceled, "write"},
		{"canceled inside a class", writers.Errorf(writers.ErrUnavailable, "kafka: read marker topic: %w (check that Kafka is up)", context.Canceled), codes.Canceled, "read marker topic"},
		{"outcome unknown over a cancellation", &writers.OutcomeUnknownError{Endpoint: "e", Err: context.Canceled}, codes.Unknown, "reconcile"},
		{"reclassified cause", writers.Errorf(writers.ErrUnavailable, "retry: %w", writers.Errorf(writers.ErrConflict, "lost")), codes.Unavailable, "retry: lost"},
		{"deadline", context.DeadlineExceeded, codes.DeadlineExceeded, "deadline"},
		{"unclassified", errors.New("boom"), codes.Internal, "boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantCode(t, flightsvc.Status(tt.err), tt.code, tt.contains)
		})
	}
	if flightsvc.Status(nil) != nil {
		t.Fatal("Status(nil) != nil")
	}
}

// TestStatusRedactsURIs: whatever path an error takes to its code (a
// class, a gRPC status, a context error, none), the message a client
// reads has the URIs' credentials redacted. (Before, the context-error
// path still passed the raw message; the others did before redaction.)
func TestStatusRedactsURIs(t *testing.T) {
	const uri = "s3://KEY:SeCrEt@bucket/t?endpoint=http://KEY:SeCrEt@minio:9000"
	for _, err := range []error{
		writers.Errorf(writers.ErrUnavailable, "storage: open %s: refused", uri),
		status.Error(codes.OutOfRange, "open "+uri),
		fmt.Errorf("open %s: %w", uri, context.DeadlineExceeded),
		errors.New("open " + uri),
	} {
		st, _ := status.FromError(flightsvc.Status(err))
		if strings.Contains(st.Message(), "SeCrEt") || !strings.Contains(st.Message(), "s3://REDACTED@bucket/t?endpoint=REDACTED") {
			t.Errorf("Status(%v) = %q, want the URI redacted", err, st.Message())
		}
	}
}
