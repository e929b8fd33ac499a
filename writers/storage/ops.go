package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/aws/smithy-go"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/quiver-ingest/quiver/writers"
)

// writeOpts are the options of every gocloud write: a fixed content type
// spares the driver sniffing the first 512 bytes.
func writeOpts(ifNotExist bool) *blob.WriterOptions {
	return &blob.WriterOptions{ContentType: "application/octet-stream", IfNotExist: ifNotExist}
}

// MaxGetBytes bounds what Get reads. Objects are read whole, and another
// process may have written them: a larger one fails (ErrInvalid) instead
// of exhausting memory, and so does a file:// key that is no regular file
// (a symlink to /dev/zero never ends).
const MaxGetBytes = 2 << 30

// Get reads a whole object of at most MaxGetBytes; ErrNotExist when
// missing.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	return b.GetMax(ctx, key, MaxGetBytes)
}

// GetMax reads a whole object of at most limit bytes: a larger one is
// ErrInvalid, read no further than the limit.
func (b *Bucket) GetMax(ctx context.Context, key string, limit int64) ([]byte, error) {
	if err := CheckKey(key); err != nil {
		return nil, b.wrap("get", key, err)
	}
	var data []byte
	err := b.faulty(ctx, "get", key, func() (err error) {
		data, err = b.readAll(ctx, key, limit)
		return err
	})
	if err != nil {
		return nil, b.wrap("get", key, err)
	}
	return data, nil
}

// readAll reads key whole, refusing it when over limit bytes.
func (b *Bucket) readAll(ctx context.Context, key string, limit int64) ([]byte, error) {
	var r io.ReadCloser
	var size int64
	if b.Local() {
		f, n, err := openFile(b.path(key))
		if err != nil {
			return nil, err
		}
		r, size = f, n
	} else {
		br, err := b.blob.NewReader(ctx, key, nil)
		if err != nil {
			return nil, err
		}
		r, size = br, br.Size()
	}
	defer r.Close()
	tooLarge := func(n int64) error {
		return writers.Errorf(writers.ErrInvalid, "the object holds %d bytes or more, over the limit of %d for this read: it is not what belongs there (another process wrote it?); inspect it, restore or remove it", n, limit)
	}
	if size > limit {
		return nil, tooLarge(size)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(r, limit+1)); err != nil {
		return nil, err
	}
	if int64(buf.Len()) > limit {
		return nil, tooLarge(int64(buf.Len()))
	}
	return buf.Bytes(), nil
}

// Put writes a whole object, replacing any existing one atomically (readers
// never see a partial object). On file:// the object is durable (fsynced,
// directory included) when Put returns nil.
func (b *Bucket) Put(ctx context.Context, key string, data []byte) error {
	p, err := b.Prepare(ctx, key, data)
	if err != nil {
		return err
	}
	return p.Put(ctx)
}

// PutIfAbsent writes data at key only if key does not exist, atomically
// across processes (file: link(2) of a temp file; s3 and azblob:
// If-None-Match: *; gs: a DoesNotExist precondition; mem: within the
// process). A taken key returns an error wrapping ErrAlreadyExists and
// changes nothing.
//
// Any other error on a cloud scheme leaves the outcome unknown (the write
// may have been applied and its answer lost): read the key back to decide.
// On file:// an error other than ErrAlreadyExists means nothing was
// published, except a failed directory fsync after the link.
func (b *Bucket) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := CheckKey(key); err != nil {
		return b.wrap("put-if-absent", key, err)
	}
	p := &Prepared{b: b, key: key, data: data}
	return p.putIfAbsent(ctx, func() error {
		if !b.Local() {
			return nil
		}
		// A key already taken (a commit that lost a race) is refused
		// before a temporary file is written and synced for nothing;
		// link(2) stays the arbiter for a key free at this moment.
		if _, err := os.Lstat(b.path(key)); err == nil {
			return ErrAlreadyExists
		}
		return p.writeTemp(ctx)
	})
}

// Prepared is an object written ahead of its publication: on file:// to a
// durable temporary file beside its key (missing folders created and
// synced), so that publishing it only renames or links that file and
// syncs its folder; on an object store it holds the data, which the put
// sends. Objects prepared at once have their syncs overlap: a commit
// prepares everything it writes together, then publishes in the order
// readers need. A Prepared is published once, by Put or PutIfAbsent (a
// second publication fails with os.ErrClosed), or dropped by Discard;
// after either nothing temporary is left. Its data must not change until
// then (an object store sends it when published). It is not safe for
// concurrent use.
type Prepared struct {
	b    *Bucket
	key  string
	data []byte
	tmp  string // file://: the temporary file, "" once published or discarded
}

// Prepare readies data to be published at key (see Prepared).
func (b *Bucket) Prepare(ctx context.Context, key string, data []byte) (*Prepared, error) {
	if err := CheckKey(key); err != nil {
		return nil, b.wrap("put", key, err)
	}
	p := &Prepared{b: b, key: key, data: data}
	if b.Local() {
		if err := p.writeTemp(ctx); err != nil {
			return nil, b.wrap("put", key, err)
		}
	}
	return p, nil
}

// writeTemp writes p's durable temporary file (file://), unless ctx is
// done.
func (p *Prepared) writeTemp(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tmp, err := p.b.writeTemp(p.b.path(p.key), p.data)
	p.tmp = tmp
	return err
}

// Put publishes p, replacing any existing object atomically; see
// Bucket.Put.
func (p *Prepared) Put(ctx context.Context) error {
	var err error
	if p.b.Local() {
		err = p.publishLocal(ctx, publishReplace)
	} else {
		err = p.b.blob.WriteAll(ctx, p.key, p.data, writeOpts(false))
	}
	if err != nil {
		return p.b.wrap("put", p.key, err)
	}
	return nil
}

// PutIfAbsent publishes p only if its key does not exist; see
// Bucket.PutIfAbsent.
func (p *Prepared) PutIfAbsent(ctx context.Context) error {
	return p.putIfAbsent(ctx, func() error { return nil })
}

// putIfAbsent runs prepare, then publishes p if its key does not exist,
// both as one operation of the bucket's Fault.
func (p *Prepared) putIfAbsent(ctx context.Context, prepare func() error) error {
	defer p.Discard() // what a failed prepare or a test's fault left
	err := p.b.faulty(ctx, "put-if-absent", p.key, func() error {
		if err := prepare(); err != nil {
			return err
		}
		if p.b.Local() {
			return p.publishLocal(ctx, publishNew)
		}
		return p.b.putIfAbsentBlob(ctx, p.key, p.data)
	})
	if err != nil {
		return p.b.wrap("put-if-absent", p.key, err)
	}
	return nil
}

// publishLocal publishes p's temporary file with publish, unless ctx is
// done, which removes it.
func (p *Prepared) publishLocal(ctx context.Context, publish func(tmp, path string) error) error {
	tmp := p.tmp
	if tmp == "" {
		return os.ErrClosed
	}
	p.tmp = ""
	if err := ctx.Err(); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return publish(tmp, p.b.path(p.key))
}

// Discard drops p unpublished (a no-op once published, or on nil).
func (p *Prepared) Discard() {
	if p != nil && p.tmp != "" {
		_ = os.Remove(p.tmp)
		p.tmp = ""
	}
}

// conflictRetries bounds the retries of a conditional S3 write that lost
// to another one in flight (see putIfAbsentBlob).
const conflictRetries = 3

// putIfAbsentBlob is PutIfAbsent on gocloud. Every driver reports a failed
// IfNotExist precondition as FailedPrecondition (s3blob: 412
// PreconditionFailed; azureblob: BlobAlreadyExists or ConditionNotMet;
// gcsblob: 412; memblob directly), and no other write does. S3 may also
// answer 409 ConditionalRequestConflict while another conditional write of
// the key is in flight: that write did not happen, and retrying yields the
// real answer (412 once the other one has won).
func (b *Bucket) putIfAbsentBlob(ctx context.Context, key string, data []byte) error {
	for attempt := 0; ; attempt++ {
		err := b.blob.WriteAll(ctx, key, data, writeOpts(true))
		if gcerrors.Code(err) == gcerrors.FailedPrecondition {
			return errors.Join(ErrAlreadyExists, err)
		}
		var apiErr smithy.APIError
		if attempt < conflictRetries && b.blob.ErrorAs(err, &apiErr) && apiErr.ErrorCode() == "ConditionalRequestConflict" {
			continue
		}
		return err
	}
}

// NewWriter streams a new object; it becomes visible (atomically, replacing
// any existing object) only when Close returns nil. To abandon it, cancel
// ctx and then call Close, which returns the context's error and leaves no
// object (and, on file://, no temporary file). Close must always be called.
// The writer is not safe for concurrent use.
func (b *Bucket) NewWriter(ctx context.Context, key string) (io.WriteCloser, error) {
	if err := CheckKey(key); err != nil {
		return nil, b.wrap("new-writer", key, err)
	}
	if b.Local() {
		path := b.path(key)
		f, err := b.createTemp(path)
		if err != nil {
			return nil, b.wrap("new-writer", key, err)
		}
		return &wrappedWriter{b: b, key: key, w: &fileWriter{ctx: ctx, f: f, path: path}}, nil
	}
	w, err := b.blob.NewWriter(ctx, key, writeOpts(false))
	if err != nil {
		return nil, b.wrap("new-writer", key, err)
	}
	return &wrappedWriter{b: b, key: key, w: w}, nil
}

// wrappedWriter gives writer errors the Bucket's Error form.
type wrappedWriter struct {
	b   *Bucket
	key string
	w   io.WriteCloser
}

func (w *wrappedWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil {
		err = w.b.wrap("write", w.key, err)
	}
	return n, err
}

func (w *wrappedWriter) Close() error {
	if err := w.w.Close(); err != nil {
		return w.b.wrap("write", w.key, err)
	}
	return nil
}

// OpenReader returns a random-access reader of an object and its size;
// ErrNotExist when missing. The caller closes it. On file:// it is the open
// file; on other schemes every ReadAt is one ranged request made with ctx,
// so ctx must stay live while the reader is used. The reader is safe for
// concurrent ReadAt calls.
func (b *Bucket) OpenReader(ctx context.Context, key string) (ReaderAtCloser, int64, error) {
	if err := CheckKey(key); err != nil {
		return nil, 0, b.wrap("open-reader", key, err)
	}
	if b.Local() {
		f, size, err := openFile(b.path(key))
		if err != nil {
			return nil, 0, b.wrap("open-reader", key, err)
		}
		return f, size, nil
	}
	attrs, err := b.blob.Attributes(ctx, key)
	if err != nil {
		return nil, 0, b.wrap("open-reader", key, err)
	}
	return &rangeReader{ctx: ctx, b: b, key: key, size: attrs.Size}, attrs.Size, nil
}

// Stat returns an object's size and modification time; ErrNotExist when
// missing.
func (b *Bucket) Stat(ctx context.Context, key string) (Object, error) {
	if err := CheckKey(key); err != nil {
		return Object{}, b.wrap("stat", key, err)
	}
	if b.Local() {
		fi, err := os.Stat(b.path(key))
		if err == nil && !fi.Mode().IsRegular() {
			err = fmt.Errorf("%s is not a regular file: %w", b.path(key), fs.ErrNotExist)
		}
		if err != nil {
			return Object{}, b.wrap("stat", key, err)
		}
		return Object{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
	}
	attrs, err := b.blob.Attributes(ctx, key)
	if err != nil {
		return Object{}, b.wrap("stat", key, err)
	}
	return Object{Key: key, Size: attrs.Size, ModTime: attrs.ModTime}, nil
}

// Delete removes an object; deleting a missing object is not an error.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return b.wrap("delete", key, err)
	}
	if b.Local() {
		if err := os.Remove(b.path(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return b.wrap("delete", key, err)
		}
		return nil
	}
	err := b.blob.Delete(ctx, key)
	if err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return b.wrap("delete", key, err)
	}
	return nil
}
