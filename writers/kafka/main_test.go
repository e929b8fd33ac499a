package kafka_test

import (
	"testing"

	"github.com/quiver-ingest/quiver/internal/realkafka"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(realkafka.Main(m),
		// sarama's go-metrics meters share one process-wide ticker that is
		// never stopped.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
		// sarama's per-broker circuit breaker sleeps out its timeout after
		// the producer closed.
		goleak.IgnoreAnyFunction("github.com/eapache/go-resiliency/breaker.(*Breaker).timer"),
	)
}
