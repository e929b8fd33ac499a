package bench

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// TestPeakRSS checks that the peak covers memory just touched and that a
// reset forgets it once it is returned to the system.
func TestPeakRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("VmHWM is Linux only")
	}
	const size = 128 << 20
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = 1
	}
	peak := PeakRSS()
	if peak < size {
		t.Fatalf("peak RSS %d after touching %d bytes", peak, size)
	}
	runtime.KeepAlive(buf)
	buf = nil
	debug.FreeOSMemory()
	if err := ResetPeakRSS(); err != nil {
		t.Skipf("the kernel does not let this process reset its peak RSS (writing /proc/self/clear_refs: %v); the reset is not checked", err)
	}
	if got := PeakRSS(); got <= 0 || got > peak-size/2 {
		t.Errorf("peak RSS after freeing %d bytes and a reset: %d, want in (0, %d]", size, got, peak-size/2)
	}
}
