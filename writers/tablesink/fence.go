package tablesink

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// fencedDir holds the marks of fenced attempts (writers.AttemptFencer):
// one empty object each. Table readers and vacuum leave folders starting
// with "_" alone.
const fencedDir = "_quiver/fenced/"

// fenceKey names the mark of attempt of key: a hash, so that any writer
// name makes a valid storage key.
func fenceKey(key writers.TxnKey, attempt string) string {
	h := sha256.New()
	h.Write([]byte(key.Writer))
	h.Write([]byte{0})
	h.Write([]byte(strconv.FormatInt(key.Epoch, 10)))
	h.Write([]byte{0})
	h.Write([]byte(attempt))
	return fencedDir + hex.EncodeToString(h.Sum(nil))
}

// Fences implements writers.AttemptFencer on the table under *Bucket: a
// table sink's Writer embeds one pointing at its bucket (set by Open).
type Fences struct{ Bucket **storage.Bucket }

// FenceAttempt marks attempt of key fenced in the table.
func (f Fences) FenceAttempt(ctx context.Context, key writers.TxnKey, attempt string) error {
	return (*f.Bucket).Put(ctx, fenceKey(key, attempt), []byte{})
}

// Fenced reports whether attempt of key is marked fenced in the table.
func (f Fences) Fenced(ctx context.Context, key writers.TxnKey, attempt string) (bool, error) {
	_, err := (*f.Bucket).Stat(ctx, fenceKey(key, attempt))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, storage.ErrNotExist):
		return false, nil
	}
	return false, err
}

// Discards implements writers.PrecommitDiscarder on the table under
// *Bucket: Written names the objects a descriptor's precommit wrote (the
// sink decodes its own descriptors), which DiscardPrecommitted deletes.
type Discards struct {
	Bucket  **storage.Bucket
	Written func(writers.Descriptor) ([]storage.Expected, error)
}

// DiscardPrecommitted deletes the objects desc's precommit wrote; missing
// ones are fine.
func (d Discards) DiscardPrecommitted(ctx context.Context, desc writers.Descriptor) error {
	objs, err := d.Written(desc)
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range objs {
		if err := (*d.Bucket).Delete(ctx, o.Key); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
