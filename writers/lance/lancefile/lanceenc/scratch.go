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

// getScratch returns an empty buffer with room for n bytes. Its spare
// capacity holds whatever an earlier page left there: append to it, do
// not read past its length.
func getScratch(n int) []byte {
	t := 0
	if n > 1<<scratchMinShift {
		t = bits.Len(uint(n-1)) - scratchMinShift
	}
	if n >= 1<<scratchMinShift && t < scratchTierCount {
		if b, ok := scratchTiers[t].Get().(*[]byte); ok {
			return (*b)[:0]
		}
		return make([]byte, 0, 1<<(scratchMinShift+t))
	}
	return make([]byte, 0, n)
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
