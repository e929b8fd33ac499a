package lanceenc

import (
	"math/bits"
	"sync"
)

// Encoding a page gathers its values into page-sized buffers and writes
// its chunks into another, all garbage once the page is written. Made
// fresh for every page, each is cleared by the allocator first: a tenth of
// a 4-stream append server's CPU went to that clearing. They are recycled
// here instead, by size: tier t holds buffers with room for at least
// 1<<(scratchMinShift+t) bytes.
var scratchTiers [scratchTierCount]sync.Pool // of *[]byte

const (
	scratchMinShift  = 16 // 64 KiB: smaller buffers are cheap to make
	scratchTierCount = 11 // to 64 MiB; larger ones are left to the collector
)

// scratchTier is the tier whose buffers have room for n bytes; ok is
// false for sizes the pools do not keep.
func scratchTier(n int) (t int, ok bool) {
	if n < 1<<scratchMinShift {
		return 0, false
	}
	t = bits.Len(uint(n-1)) - scratchMinShift
	return t, t < scratchTierCount
}

// getScratch returns an empty buffer with room for n bytes. Its spare
// capacity holds whatever an earlier page left there: append to it, do
// not read past its length (FSST's 8-byte loads do, and check that what
// they use belongs to the value).
func getScratch(n int) []byte {
	t, ok := scratchTier(n)
	if !ok {
		return make([]byte, 0, n)
	}
	if b, ok := scratchTiers[t].Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, 1<<(scratchMinShift+t))
}

// putScratch recycles buffers the caller no longer uses, nor anything
// sliced from them.
func putScratch(bufs ...[]byte) {
	for _, b := range bufs {
		c := cap(b)
		if c < 1<<scratchMinShift || c > 1<<(scratchMinShift+scratchTierCount) {
			continue
		}
		t := min(bits.Len(uint(c))-1-scratchMinShift, scratchTierCount-1) // 1<<(scratchMinShift+t) <= c
		b = b[:0]
		scratchTiers[t].Put(&b)
	}
}

// scratchOf is getScratch(n) of length n: bytes to be written before read.
func scratchOf(n int) []byte { return getScratch(n)[:n] }

// exactBuf is an empty buffer with room for n bytes, made for values that
// are not recycled (getScratch would round it up to its tier).
func exactBuf(n int) []byte { return make([]byte, 0, n) }

// appendScratch appends b to a, moving both into a larger scratch buffer
// (and recycling a) when a has no room, where a plain append would leave a
// to the collector and make the larger buffer outside the pools.
func appendScratch(a, b []byte) []byte {
	if len(a)+len(b) <= cap(a) {
		return append(a, b...)
	}
	out := append(getScratch(len(a)+len(b)), a...)
	putScratch(a)
	return append(out, b...)
}
