package rate

import "testing"

// TestOfCountsIPCBytesPerRow: 1,000 rows of 2 MB of IPC body at 500 rows/s
// are 1 MB/s.
func TestOfCountsIPCBytesPerRow(t *testing.T) {
	got := Of("raw", 2, 500, 2_000_000, 1_000)
	want := Row{Target: "raw", Streams: 2, RowsPerSec: 500, MBPerSec: 1}
	if got != want {
		t.Fatalf("Of = %+v, want %+v", got, want)
	}
}

// A measured row shows its peak RSS in MiB, an unknown one "?", a
// reference timed outside bench.Run nothing.
func TestRSSColumn(t *testing.T) {
	for _, c := range []struct {
		peak int64
		want string
	}{{3 << 20, "3"}, {-1, "?"}, {0, ""}} {
		if got := (Row{PeakRSS: c.peak}).RSS(); got != c.want {
			t.Errorf("RSS of %d = %q, want %q", c.peak, got, c.want)
		}
	}
}
