package storage

import (
	"context"
	"io"
)

// rangeReader is OpenReader for gocloud schemes: each ReadAt is one ranged
// GET, so concurrent ReadAt calls are independent requests.
type rangeReader struct {
	ctx  context.Context // OpenReader's; io.ReaderAt has no ctx of its own
	b    *Bucket
	key  string
	size int64
}

// ReadAt reads len(p) bytes at off, or up to the end of the object with
// io.EOF.
func (r *rangeReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, r.b.wrap("read", r.key, io.ErrUnexpectedEOF)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	want := min(int64(len(p)), r.size-off)
	rd, err := r.b.blob.NewRangeReader(r.ctx, r.key, off, want, nil)
	if err != nil {
		return 0, r.b.wrap("read", r.key, err)
	}
	n, err := io.ReadFull(rd, p[:want])
	if cerr := rd.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, r.b.wrap("read", r.key, err)
	}
	if want < int64(len(p)) {
		return n, io.EOF
	}
	return n, nil
}

// Close releases nothing: no request outlives a ReadAt.
func (r *rangeReader) Close() error { return nil }
