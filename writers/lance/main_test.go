package lance

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The race tests run this test binary as the concurrent Quiver writer.
	if dir := os.Getenv(appendHelperEnv); dir != "" {
		os.Exit(appendHelper(dir, os.Getenv(helperModeEnv)))
	}
	goleak.VerifyTestMain(m)
}
