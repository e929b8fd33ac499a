package delta

import (
	"testing"

	"github.com/quiver-ingest/quiver/internal/emulator"
)

func TestMain(m *testing.M) {
	emulator.RunTests(m) // the conformance suite runs on the emulated clouds too
}
