// Package alloccheck is test support: it bounds what a call allocates, for
// the tests that feed decoders hostile input (a length field set huge) and
// must see an error instead of an allocation sized by that field.
package alloccheck

import (
	"runtime"
	"testing"
)

// Limit is the allocation bound of the hostile-input tests: far above what
// decoding a seed of a few KiB needs, far below what a size field taken at
// its word would allocate.
const Limit = 64 << 20

// Bytes returns the bytes allocated on the heap while f runs. Allocations
// of other goroutines count too, so bounds should be generous.
func Bytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Below fails t when f allocates Limit bytes or more.
func Below(t testing.TB, what string, f func()) {
	t.Helper()
	if n := Bytes(f); n >= Limit {
		t.Errorf("%s allocated %d MiB, want < %d MiB", what, n>>20, Limit>>20)
	}
}
