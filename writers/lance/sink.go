package lance

import (
	"fmt"

	"github.com/quiver-ingest/quiver/writers"
)

// Sink returns the registry entry of the Lance sink: `sink: lance` with a
// `lance:` settings section.
func Sink() writers.Sink {
	return writers.Sink{
		Name:      "lance",
		Section:   "lance",
		NewConfig: func() writers.SinkConfig { return NewConfig() },
		New: func(cfg writers.SinkConfig, env writers.Env) (writers.Writer, error) {
			c, ok := cfg.(*Config)
			if !ok {
				return nil, fmt.Errorf("lance: config is a %T, want *lance.Config: %w", cfg, writers.ErrInvalid)
			}
			return New(c, env)
		},
		Maintains: writers.MaintenanceOps{Optimize: true, Vacuum: true},
		Streams:   true,
	}
}
