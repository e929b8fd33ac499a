package lance

import (
	"os"
	"testing"

	"github.com/quiver-ingest/quiver/internal/emulator"
)

func TestMain(m *testing.M) {
	// The race tests run this test binary as the concurrent Quiver writer.
	if dir := os.Getenv(appendHelperEnv); dir != "" {
		os.Exit(appendHelper(dir, os.Getenv(helperModeEnv)))
	}
	emulator.RunTests(m) // the conformance suite runs on the emulated clouds too
}
