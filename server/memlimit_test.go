package server

import (
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"testing"

	"github.com/quiver-ingest/quiver/server/config"
)

// unsetenv removes key for the test and puts it back after.
func unsetenv(t *testing.T, key string) {
	t.Helper()
	if old, ok := os.LookupEnv(key); ok {
		t.Cleanup(func() { os.Setenv(key, old) })
	}
	os.Unsetenv(key)
}

// TestTuneGC checks the server's collector settings: GC percent gcPercent
// and a soft memory limit of the budget plus its headroom, each left
// alone when the operator set GOGC or GOMEMLIMIT.
func TestTuneGC(t *testing.T) {
	pct, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1) // -1 reads it
	t.Cleanup(func() {
		debug.SetGCPercent(pct)
		debug.SetMemoryLimit(limit)
	})
	cfg := config.Default()
	cfg.Limits.MemoryBytes = 256 << 20
	s := &Server{cfg: cfg, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}

	unsetenv(t, "GOGC")
	unsetenv(t, "GOMEMLIMIT")
	debug.SetGCPercent(100)
	s.tuneGC()
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("GC percent = %d, want %d", got, gcPercent)
	}
	if got, want := debug.SetMemoryLimit(-1), int64(256<<20+128<<20+128<<20); got != want {
		t.Errorf("soft memory limit = %d, want %d (budget × 1.5 + 128 MiB)", got, want)
	}

	// The operator's settings win: the runtime read them at start.
	t.Setenv("GOGC", "150")
	t.Setenv("GOMEMLIMIT", "3GiB")
	debug.SetGCPercent(150)
	debug.SetMemoryLimit(3 << 30)
	s.tuneGC()
	if got := debug.SetGCPercent(100); got != 150 {
		t.Errorf("GC percent = %d with GOGC=150, want 150", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 3<<30 {
		t.Errorf("soft memory limit = %d with GOMEMLIMIT=3GiB, want %d", got, int64(3<<30))
	}
}
