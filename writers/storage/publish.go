package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/quiver-ingest/quiver/writers"
)

// getPutter is the part of a Bucket Publish needs. Local tells a local
// folder, whose put is over when it returns, from an object store, which
// may still be writing a put whose answer was lost.
type getPutter interface {
	Get(ctx context.Context, key string) ([]byte, error)
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	Local() bool
}

// Publish writes the object that publishes a commit (a Delta log entry, a
// Lance manifest) with put-if-absent and tells every sink's caller the
// same thing about its outcome:
//   - nil: data is at key, written by this call (or by an earlier attempt
//     whose answer was lost);
//   - ErrAlreadyExists: another writer took key (a lost race): key holds
//     other bytes. A store's SDK retries a conditional put whose answer it
//     lost, and the retry finds the object the first attempt wrote; taken
//     for a lost race, the commit would be rebased over itself and
//     published twice (or, for optimize, its files deleted under the
//     version that names them);
//   - the put's own class (ErrPermissionDenied, ErrInvalid) when the store
//     refused it outright: nothing was written;
//   - writers.ErrUnavailable when the put into a local folder failed and
//     key is still absent: nothing was published, retrying may succeed;
//   - writers.ErrOutcomeUnknown when neither the put nor a read of key can
//     tell whether it landed or will: an object store's key read absent
//     after a put whose answer was lost (the store may still be writing
//     it: a timeout after the body was sent; a 503 only describes the
//     SDK's last attempt, not an earlier one whose answer was lost), and
//     a put that reported its outcome unknown itself (linked, but its
//     folder not synced).
func Publish(ctx context.Context, s getPutter, key string, data []byte) error {
	return publish(ctx, s, key, data, s.PutIfAbsent(ctx, key, data))
}

// PublishPrepared is Publish of an object prepared ahead (Bucket.Prepare).
func PublishPrepared(ctx context.Context, p *Prepared) error {
	return publish(ctx, p.b, p.key, p.data, p.PutIfAbsent(ctx))
}

// publish classes err, the answer of the put-if-absent of data at key,
// as Publish does.
func publish(ctx context.Context, s getPutter, key string, data []byte, err error) error {
	if err == nil || refused(err) || errors.Is(err, writers.ErrOutcomeUnknown) {
		return err
	}
	// The put may have landed: its answer lost, or an SDK's retry of it
	// finding the object the first attempt wrote. Read key to tell.
	taken := errors.Is(err, ErrAlreadyExists)
	got, gerr := s.Get(ctx, key)
	switch {
	case gerr == nil && bytes.Equal(got, data):
		return nil
	case taken && (gerr == nil || errors.Is(gerr, ErrNotExist)):
		return err
	case gerr == nil:
		return fmt.Errorf("storage: publish %q: %w", key, ErrAlreadyExists)
	case errors.Is(gerr, ErrNotExist) && s.Local():
		return writers.Errorf(writers.ErrUnavailable, "storage: publish %q: nothing was published: %w", key, err)
	case errors.Is(gerr, ErrNotExist):
		return fmt.Errorf("storage: publish %q: %w: the put failed and %s is absent, but the store may still be writing it: %w", key, writers.ErrOutcomeUnknown, key, err)
	}
	return fmt.Errorf("storage: publish %q: %w: %s cannot be read back: %w", key, writers.ErrOutcomeUnknown, key, errors.Join(err, gerr))
}

// refused reports whether err is a store's definite refusal of a write
// (nothing was written) rather than a failure with an unknown outcome.
func refused(err error) bool {
	return errors.Is(err, writers.ErrPermissionDenied) || errors.Is(err, writers.ErrUnauthenticated) || errors.Is(err, writers.ErrInvalid)
}
