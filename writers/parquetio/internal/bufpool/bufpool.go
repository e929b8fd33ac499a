// Package bufpool recycles the byte buffers of finished Parquet files. A
// file's page buffers grow to a page, and its column chunks' to a row
// group's compressed pages; without reuse every new file (a Delta append
// of many short streams writes one per stream) grows them again from
// nothing, copying as it goes and leaving the garbage to the collector.
package bufpool

import "sync"

// maxKept bounds the buffers kept: a larger one (a row group of huge
// values) is left to the collector rather than pinned for the process.
const maxKept = 16 << 20

var pool sync.Pool // of *[]byte

// Get returns an empty buffer, recycled when one is free.
func Get() []byte {
	if p, ok := pool.Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return nil
}

// Put recycles b, which the caller must not use again.
func Put(b []byte) {
	if cap(b) == 0 || cap(b) > maxKept {
		return
	}
	b = b[:0]
	pool.Put(&b)
}
