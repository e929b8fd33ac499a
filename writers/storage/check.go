package storage

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/quiver-ingest/quiver/writers"
)

// Expected is an object a caller is about to reference from a table's
// metadata, with the size the reference states. Label says where the
// reference comes from ("descriptor 2"); errors start with it.
type Expected struct {
	Key   string
	Size  int64
	Label string
}

// statConcurrency bounds the stats CheckObjects has in flight: one HEAD
// per object on cloud schemes, so a commit of many files does not pay
// their round trips one after the other.
const statConcurrency = 16

// CheckObjects stats every object of want (statConcurrency at a time) and
// returns nil when each exists under the root with exactly its stated
// size. Otherwise it returns the error of the first failing object in
// want's order: writers.ErrInvalid naming its label and key when the key
// breaks the key rules (CheckKey), the object is missing or its size
// differs, because publishing a reference to it would leave the table
// unreadable; any other failure (ErrUnavailable, ErrPermissionDenied)
// keeps its class, since retrying may succeed.
func (b *Bucket) CheckObjects(ctx context.Context, want []Expected) error {
	errs := make([]error, len(want))
	var g errgroup.Group
	g.SetLimit(statConcurrency)
	for i, e := range want {
		g.Go(func() error {
			errs[i] = b.checkObject(ctx, e)
			return nil
		})
	}
	_ = g.Wait() // the errors are in errs, in want's order
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkObject is CheckObjects for one object.
func (b *Bucket) checkObject(ctx context.Context, e Expected) error {
	if err := CheckKey(e.Key); err != nil {
		return writers.Errorf(writers.ErrInvalid, "%s: file %q is not a valid key under %s: %w", e.Label, e.Key, b.uri, err)
	}
	o, err := b.Stat(ctx, e.Key)
	switch {
	case errors.Is(err, ErrNotExist):
		return writers.Errorf(writers.ErrInvalid, "%s: file %q does not exist under %s", e.Label, e.Key, b.uri)
	case err != nil:
		return fmt.Errorf("%s: file %q: %w", e.Label, e.Key, err)
	case o.Size != e.Size:
		return writers.Errorf(writers.ErrInvalid, "%s: file %q has %d bytes under %s, the reference states %d", e.Label, e.Key, o.Size, b.uri, e.Size)
	}
	return nil
}
