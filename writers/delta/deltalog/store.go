package deltalog

import (
	"context"
	"iter"

	"github.com/quiver-ingest/quiver/writers/storage"
)

// Store is the part of object storage the log needs; *storage.Bucket
// implements it. Keys are relative to the table root and '/'-separated.
// Implementations must be safe for concurrent use, report a missing object
// with an error wrapping storage.ErrNotExist and a taken PutIfAbsent key
// with one wrapping storage.ErrAlreadyExists.
type Store interface {
	Get(ctx context.Context, key string) ([]byte, error)
	GetMax(ctx context.Context, key string, limit int64) ([]byte, error)
	Put(ctx context.Context, key string, data []byte) error
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	List(ctx context.Context, prefix, startAfter string) iter.Seq2[storage.Object, error]
	OpenReader(ctx context.Context, key string) (storage.ReaderAtCloser, int64, error)
	// Local reports a local folder (a put is over when it returns) rather
	// than an object store (see storage.Publish).
	Local() bool
}

var _ Store = (*storage.Bucket)(nil)
