package txn

import (
	"log/slog"
	"os"

	"github.com/quiver-ingest/quiver/writers"
)

// Crash points of the QUIVER_TEST_CRASH test hook (see the package doc).
const (
	crashEnv            = "QUIVER_TEST_CRASH"
	crashAfterPrecommit = "after-precommit"
	crashAfterDecision  = "after-commit-decision"
)

// crashHook reads QUIVER_TEST_CRASH and returns the function that exits the
// process at the chosen point, or nil when the variable is unset.
func crashHook(logger *slog.Logger) (func(point string), error) {
	at := os.Getenv(crashEnv)
	switch at {
	case "":
		return nil, nil
	case crashAfterPrecommit, crashAfterDecision:
	default:
		return nil, writers.Errorf(writers.ErrInvalid, "txn: %s=%q: want %q or %q (a test hook; unset it in production)", crashEnv, at, crashAfterPrecommit, crashAfterDecision)
	}
	logger.Warn("txn: test crash point armed: the process exits at it", "env", crashEnv, "point", at)
	return func(point string) {
		if point == at {
			logger.Error("txn: test crash point reached: exiting with status 137", "point", point)
			os.Exit(137)
		}
	}, nil
}

// crashAt runs the crash hook, if armed.
func (c *Coordinator) crashAt(point string) {
	if c.crash != nil {
		c.crash(point)
	}
}
