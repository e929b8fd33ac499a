package tablesink

import (
	"context"
	"fmt"
	"io"

	"github.com/quiver-ingest/quiver/writers/storage"
)

// Upload is one data file being streamed to storage in one of the
// process's file writer slots (limits.max_open_files). The upload
// outlives the Write call that starts it, so it runs under its own
// context, cancelled by Abort: a cancelled upload never appears.
type Upload struct {
	sink, name string // for errors: the sink and the file's name
	cancel     context.CancelFunc
	out        io.WriteCloser
	slot       func()
}

// StartUpload starts the object key of b in slot, which the upload gives
// back when it ends (on failure here, at once). name names the file in
// errors.
func StartUpload(ctx context.Context, b *storage.Bucket, sink, key, name string, slot func()) (*Upload, error) {
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	out, err := b.NewWriter(fctx, key)
	if err != nil {
		cancel()
		slot()
		return nil, fmt.Errorf("%s: start data file %s: %w", sink, name, err)
	}
	return &Upload{sink: sink, name: name, cancel: cancel, out: out, slot: slot}, nil
}

// Writer is where the file's bytes go.
func (u *Upload) Writer() io.Writer { return u.out }

// Close publishes the object once end (the encoder's footer) has written
// its last bytes; when end fails the upload is abandoned. The slot is
// given back either way.
func (u *Upload) Close(end func() error) error {
	defer u.slot()
	defer u.cancel()
	if err := end(); err != nil {
		u.cancel()
		u.out.Close()
		return fmt.Errorf("%s: finish data file %s: %w", u.sink, u.name, err)
	}
	if err := u.out.Close(); err != nil {
		return fmt.Errorf("%s: upload data file %s: %w", u.sink, u.name, err)
	}
	return nil
}

// Abort abandons the upload: the object never appears. drop, when not
// nil, releases the encoder once the upload is cancelled (what it still
// writes goes nowhere).
func (u *Upload) Abort(drop func()) {
	defer u.slot()
	u.cancel()
	if drop != nil {
		drop()
	}
	u.out.Close()
}
