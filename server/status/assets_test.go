package status

import (
	"os/exec"
	"testing"

	"github.com/quiver-ingest/quiver/internal/reftool"
)

// TestPageHelpers runs the page script's unit tests under node
// (testdata/status_test.cjs; node:test needs no package).
func TestPageHelpers(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		reftool.Missing(t, "node", err)
	}
	out, err := exec.Command("node", "--test", "testdata/status_test.cjs").CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
}
