package server

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The Kafka sink's sarama clients (a kafka endpoint of the tests'
		// configs) start go-metrics' process-wide meter ticker, which is
		// never stopped.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
	)
}
