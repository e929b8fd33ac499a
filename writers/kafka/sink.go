package kafka

import (
	"fmt"

	"github.com/quiver-ingest/quiver/writers"
)

// Sink returns the registry entry of the Kafka sink: `sink: kafka` with its
// settings in the endpoint's `kafka:` section.
func Sink() writers.Sink {
	return writers.Sink{
		Name:      "kafka",
		Section:   "kafka",
		NewConfig: func() writers.SinkConfig { return NewConfig() },
		New: func(cfg writers.SinkConfig, env writers.Env) (writers.Writer, error) {
			c, ok := cfg.(*Config)
			if !ok {
				return nil, fmt.Errorf("kafka: config of type %T, want *kafka.Config", cfg)
			}
			return New(c, env)
		},
		Streams: true,
	}
}
