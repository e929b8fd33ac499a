package writers_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/quiver-ingest/quiver/writers"
)

func TestErrorfKeepsTheCause(t *testing.T) {
	_, statErr := os.Stat("/nonexistent/quiver")
	err := writers.Errorf(writers.ErrUnavailable, "kafka: read marker topic %q: %w", "m", context.Canceled)
	if !errors.Is(err, writers.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("errors.Is lost the class or the cause: %v", err)
	}
	if got, want := err.Error(), `kafka: read marker topic "m": context canceled`; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
	err = writers.Errorf(writers.ErrUnavailable, "stage: %w", statErr)
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != "/nonexistent/quiver" {
		t.Fatalf("errors.As did not reach the *fs.PathError: %v", err)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("errors.Is(err, fs.ErrNotExist) is false")
	}
}

func TestErrorfHasOneClass(t *testing.T) {
	inner := writers.Errorf(writers.ErrConflict, "lost the race")
	err := writers.Errorf(writers.ErrInvalid, "replan: %w", inner)
	if !errors.Is(err, writers.ErrInvalid) {
		t.Fatal("the outer class is lost")
	}
	if errors.Is(err, writers.ErrConflict) {
		t.Fatal("the cause's class shows through: an error must have one class")
	}
	// Outcome unknown is never hidden: a commit that may have happened must
	// not be rolled back as a failure.
	unknown := &writers.OutcomeUnknownError{Endpoint: "e", Err: errors.New("timeout")}
	if err := writers.Errorf(writers.ErrUnavailable, "commit: %w", unknown); !errors.Is(err, writers.ErrOutcomeUnknown) {
		t.Fatal("ErrOutcomeUnknown hidden by a wrapper")
	}
	// Without %w, nothing but the class is reachable.
	if err := writers.Errorf(writers.ErrInvalid, "x: %v", context.Canceled); errors.Is(err, context.Canceled) {
		t.Fatal("a cause formatted with the v verb must not be wrapped")
	}
}
