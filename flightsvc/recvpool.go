package flightsvc

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// RecvPool is the gRPC buffer pool of the Flight listener
// (experimental.BufferPool): like gRPC's default pool, tiers of powers of
// two, but it does not clear the buffers it hands out. gRPC reads every
// HTTP/2 frame over 1 KiB into one of them, and clearing each before a
// read overwrites it whole cost a receive-bound server 7% of its CPU.
// gRPC only ever reads back what it wrote into a buffer (frames are read
// with io.ReadFull, messages are copied in, decompression keeps what it
// read).
type RecvPool struct {
	tiers [recvTiers]sync.Pool // tier i holds buffers of cap 1<<(recvMinShift+i)
}

const (
	recvMinShift = 10 // 1 KiB (mem.IsBelowBufferPoolingThreshold): gRPC pools nothing smaller
	recvTiers    = 11 // up to 1 MiB; larger buffers are not kept
)

// NewRecvPool returns an empty pool.
func NewRecvPool() *RecvPool { return new(RecvPool) }

// recvTier is the tier whose buffers hold n bytes.
func recvTier(n int) int {
	if n <= 1<<recvMinShift {
		return 0
	}
	return bits.Len(uint(n-1)) - recvMinShift
}

// Get returns a buffer of length n, its bytes whatever they were.
func (p *RecvPool) Get(n int) *[]byte {
	t := recvTier(n)
	if t >= recvTiers {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.tiers[t].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(recvMinShift+t))
	return &b
}

// Put keeps b for a later Get if its capacity is a tier's.
func (p *RecvPool) Put(b *[]byte) {
	c := cap(*b)
	if t := recvTier(c); t < recvTiers && c == 1<<(recvMinShift+t) {
		p.tiers[t].Put(b)
	}
}

var _ mem.BufferPool = (*RecvPool)(nil)
