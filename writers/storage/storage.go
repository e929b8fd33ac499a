// Package storage is Quiver's object storage: a table root (a Bucket) on
// file://, mem://, s3:// (with endpoint override and path-style addressing
// for S3-compatible servers), gs:// and azblob://, built on gocloud.dev/blob,
// with the put-if-absent write that table commits rely on.
//
// Keys are '/'-separated and relative to the root given to Open. A key is
// non-empty, has no leading or trailing '/', no empty, "." or ".."
// segment and no control character; other keys are refused with
// writers.ErrInvalid so that every scheme stores a key under the same name.
//
// Atomicity per scheme:
//   - file:// writes a temporary file next to the target, fsyncs it, then
//     renames it over the target (Put, NewWriter) or link(2)s it to the
//     target name (PutIfAbsent; never a rename, which would replace a
//     concurrent winner), removes the temporary name and fsyncs the
//     directory. Temporary names (".<name>.quiver-tmp-<hex>") are never
//     listed. Reads use the os package directly; listing, Stat and Delete
//     go through gocloud's fileblob, configured to write no ".attrs" files.
//   - mem:// is gocloud's memblob, shared by every Bucket of the process
//     opened with the same host (see Open). It is meant for tests.
//   - s3://, gs:// and azblob:// use the gocloud drivers; PutIfAbsent is a
//     conditional write (If-None-Match: * on S3 and Azure, a DoesNotExist
//     precondition on GCS).
//
// This package imports no other Quiver package but writers (for the error
// classes).
package storage

import (
	"io"
	"sync"
	"time"

	"gocloud.dev/blob"
)

// Options tune Open. The zero value is usable.
type Options struct {
	// BaseDir resolves relative file:// URIs (the config file's folder).
	// Empty means the working directory.
	BaseDir string
}

// Object describes one listed object.
type Object struct {
	Key     string // relative to the bucket root, '/'-separated
	Size    int64
	ModTime time.Time
}

// ReaderAtCloser reads at offsets and is closed by its user.
type ReaderAtCloser interface {
	io.ReaderAt
	io.Closer
}

// Bucket is a table root: every key is relative to the URI given to Open.
// All methods are safe for concurrent use. Every error names the operation,
// the key and the root URI, and wraps ErrNotExist, ErrAlreadyExists or a
// writers error class (see Error).
type Bucket struct {
	uri    string       // resolved root URI, for URI and errors
	blob   *blob.Bucket // every scheme; for file:// a fileblob on dir
	dir    string       // file:// only: the absolute root directory
	prefix string       // key prefix inside a cloud bucket ("" or ending in '/')
	fault  faultHook    // tests' stand-in for some operations (SetFault)

	closeOnce sync.Once
	closeErr  error
}

// URI returns the resolved URI of the root (file:// URIs absolute).
func (b *Bucket) URI() string { return b.uri }

// Close releases the bucket; do not use it afterwards. Close is
// idempotent: later calls return the first call's result.
func (b *Bucket) Close() error {
	b.closeOnce.Do(func() {
		if b.blob == nil { // file:// roots hold no gocloud bucket
			return
		}
		if err := b.blob.Close(); err != nil {
			b.closeErr = b.wrap("close", "", err)
		}
	})
	return b.closeErr
}

// Local reports whether the bucket is a file:// root, whose writes and
// reads bypass gocloud (see the package comment): a put-if-absent of a
// taken key is refused there before anything is written.
func (b *Bucket) Local() bool { return b.dir != "" }
