// Package bufpool recycles the byte buffers of finished Parquet files. A
// file's page buffers grow to a page, and its column chunks' to a row
// group's compressed pages; without reuse every new file (a Delta append
// of many short streams writes one per stream) grows them again from
// nothing, copying as it goes and leaving the garbage to the collector.
// Page and chunk buffers are pooled apart, so that a new file's page
// buffers are never a previous file's multi-megabyte chunk.
package bufpool

import "sync"

// Pool recycles buffers of at most max bytes of capacity: a larger one (a
// row group of huge values) is left to the collector rather than pinned
// for the process.
type Pool struct {
	pool sync.Pool // of *[]byte
	max  int
}

var (
	// Pages holds the buffers a column's page is built in.
	Pages = &Pool{max: 1 << 20}
	// Chunks holds the buffers of a column chunk's compressed pages.
	Chunks = &Pool{max: 16 << 20}
)

// Get returns an empty buffer, recycled when one is free.
func (p *Pool) Get() []byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return nil
}

// Put recycles b, which the caller must not use again.
func (p *Pool) Put(b []byte) {
	if cap(b) == 0 || cap(b) > p.max {
		return
	}
	b = b[:0]
	p.pool.Put(&b)
}
