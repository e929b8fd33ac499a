package probetest

import (
	"testing"

	"github.com/quiver-ingest/quiver/internal/lanceprobe"
)

// TestInstall installs the probe (`make lance-probe` runs it) and checks
// that lanceprobe.Dir, which never installs, then finds it.
func TestInstall(t *testing.T) {
	want := Dir(t)
	got, err := lanceprobe.Dir()
	if err != nil || got != want {
		t.Fatalf("lanceprobe.Dir() = %q, %v after installing into %q", got, err, want)
	}
}
