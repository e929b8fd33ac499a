package realkafka

import (
	"errors"
	"testing"

	"github.com/quiver-ingest/quiver/internal/reftool"
)

// ForTest returns the run's broker (Shared). Without Java the test is
// skipped, saying so, or fails under CI=true (reftool); any other failure
// to start fails it. go test -short skips it (a broker start takes 10 to
// 30 s).
func ForTest(t testing.TB) *Broker {
	t.Helper()
	skipShort(t)
	b, err := Shared()
	check(t, err)
	return b
}

// Dedicated starts a broker of the test's own, stopped when the test
// ends, for tests that kill and relaunch it (the run's broker is shared
// by every test package). Skipped and failed as ForTest.
func Dedicated(t testing.TB) *Broker {
	t.Helper()
	skipShort(t)
	b, err := Start()
	check(t, err)
	t.Cleanup(b.Stop)
	return b
}

func skipShort(t testing.TB) {
	if testing.Short() {
		t.Skip("-short: no real Kafka broker")
	}
}

func check(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNoJava) {
		reftool.Missing(t, "java", err)
	}
	if err != nil {
		t.Fatal(err)
	}
}
