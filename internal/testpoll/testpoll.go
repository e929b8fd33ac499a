// Package testpoll waits in tests for a condition another goroutine or
// process brings about, polling it with a deadline instead of sleeping.
// Only tests import it.
package testpoll

import (
	"testing"
	"time"
)

// Timeout is how long Until waits before it fails the test.
const Timeout = 10 * time.Second

// Until calls cond every millisecond until it holds, failing the test
// ("timed out waiting for what") after Timeout.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(Timeout)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}
