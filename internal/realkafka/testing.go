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
	if testing.Short() {
		t.Skip("-short: no real Kafka broker")
	}
	b, err := Shared()
	if errors.Is(err, ErrNoJava) {
		reftool.Missing(t, "java", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}
