package delta

import (
	"fmt"

	"github.com/quiver-ingest/quiver/writers"
)

// Sink returns the registry entry of the Delta sink: `sink: delta` with a
// `delta:` settings section.
func Sink() writers.Sink {
	return writers.Sink{
		Name:      "delta",
		Section:   "delta",
		NewConfig: func() writers.SinkConfig { return NewConfig() },
		New: func(cfg writers.SinkConfig, env writers.Env) (writers.Writer, error) {
			c, ok := cfg.(*Config)
			if !ok {
				return nil, fmt.Errorf("delta: config is a %T, want *delta.Config: %w", cfg, writers.ErrInvalid)
			}
			return New(c, env)
		},
		Maintains: writers.MaintenanceOps{Optimize: true, Vacuum: true},
		Streams:   true,
	}
}
