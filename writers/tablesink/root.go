package tablesink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/quiver-ingest/quiver/writers/storage"
)

// Root names a table sink's storage root: the table or dataset URI of its
// configuration (Option is the option's name, for errors) and the folder
// relative URIs start from.
type Root struct {
	Sink, Option, URI, BaseDir string
}

// Bucket opens the root.
func (r Root) Bucket(ctx context.Context) (*storage.Bucket, error) {
	b, err := storage.Open(ctx, r.URI, storage.Options{BaseDir: r.BaseDir})
	if err != nil {
		return nil, fmt.Errorf("%s: open %s %s: %w", r.Sink, r.Option, r.URI, err)
	}
	return b, nil
}

// Open opens the root into *bucket for a writer's Open: latest (the sink
// reading its table through *bucket, which must be writable if it
// exists) runs on it, and the leftovers of interrupted uploads are
// cleaned up. On error *bucket is nil and nothing stays open.
func (r Root) Open(ctx context.Context, log *slog.Logger, bucket **storage.Bucket, latest func(ctx context.Context) error) error {
	b, err := r.Bucket(ctx)
	if err != nil {
		return err
	}
	*bucket = b
	if err := latest(ctx); err != nil {
		*bucket = nil
		return errors.Join(err, b.Close())
	}
	b.CleanUp(ctx, log)
	return nil
}

// Target names the table for writers.Targeted: its sink and storage
// location (storage.Location), known before the writer is open.
func (r Root) Target() string {
	loc, err := storage.Location(r.URI, storage.Options{BaseDir: r.BaseDir})
	if err != nil {
		loc = r.URI // refused by Open anyway
	}
	return r.Sink + " " + loc
}

// Probe runs check on b, or, before the writer is open (b nil), on the
// root opened for the call: a writer's Check, which may run before Open.
func (r Root) Probe(ctx context.Context, b *storage.Bucket, check func(b *storage.Bucket) error) error {
	if b == nil {
		var err error
		if b, err = r.Bucket(ctx); err != nil {
			return err
		}
		defer b.Close()
	}
	return check(b)
}

// OpenPinned opens root into *bucket (Root.Open, which runs latest, the
// sink reading its table T) and acquires the pins of the table the
// process's writers share (AcquirePins); CloseWriter gives them back.
func OpenPinned[P comparable, T any](ctx context.Context, root Root, log *slog.Logger, bucket **storage.Bucket, latest func(ctx context.Context) (T, error)) (*Pins[P], func(), error) {
	if err := root.Open(ctx, log, bucket, func(ctx context.Context) error {
		_, err := latest(ctx)
		return err
	}); err != nil {
		return nil, nil, err
	}
	pins, release := AcquirePins[P](root.Sink, (*bucket).URI())
	return pins, release, nil
}
