package realkafka_test

import (
	"testing"

	"github.com/quiver-ingest/quiver/internal/realkafka"
)

func TestMain(m *testing.M) { realkafka.Main(m).Run() }

// TestBrokerAnswers: the broker answers on both listeners.
func TestBrokerAnswers(t *testing.T) {
	b := realkafka.ForTest(t)
	t.Log(b.Plain, b.SASLSSL, b.Dir)
}
