package writers

import (
	"log/slog"
	"slices"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quiver-ingest/quiver/internal/redact"
)

// SinkConfig is one sink's decoded settings for one endpoint.
type SinkConfig interface {
	// Validate checks the settings. Its errors name the offending key
	// relative to the sink's section ("mode: must be append or upsert");
	// the server prefixes the YAML path of the section.
	Validate() error
	// Mode is the write mode shown by the endpoints listing ("" if none).
	Mode() string
}

// Env is what the server hands every sink it builds.
type Env struct {
	// Endpoint is the endpoint's name.
	Endpoint string
	// ConfigDir is the folder of the config file; relative file:// URIs
	// resolve against it.
	ConfigDir string
	// DataDir is the server's data_dir (journal, staging, default roots).
	DataDir string
	// Logger is never nil; it already carries the endpoint attribute.
	Logger *slog.Logger
	// Registerer receives the sink's metrics; never nil. It is the server's
	// registry wrapped with the endpoint label.
	Registerer prometheus.Registerer
	// Allocator is the server's Arrow allocator.
	Allocator memory.Allocator
	// Memory is the server's memory budget, this endpoint's share; nil
	// means none (use MemoryOf).
	Memory MemoryCharger
	// Maintenance is the endpoint's maintenance section (its defaults
	// when it has none); sinks that are Maintainers read it.
	Maintenance Maintenance
}

// Sink is a sink kind as the registry knows it.
type Sink struct {
	// Name is the value of an endpoint's `sink:` key ("discard", "delta").
	Name string
	// Section is the endpoint key holding this sink's settings ("delta"),
	// or "" when the sink has no settings.
	Section string
	// NewConfig returns a config holding every default, ready to be
	// decoded into. It is the one place the sink's defaults live.
	NewConfig func() SinkConfig
	// New builds an unopened Writer from a validated config.
	New func(cfg SinkConfig, env Env) (Writer, error)
	// Streams is true when the sink's writers take continuous streams
	// (they implement SeqCommitter).
	Streams bool
	// Maintains lists the maintenance operations the sink supports; when
	// any, its writers are Maintainers and an endpoint may have a
	// maintenance section.
	Maintains MaintenanceOps
}

// Registry maps sink names to sinks. Build one with NewRegistry; there is no
// global registry, so one process may run several servers.
type Registry struct {
	sinks map[string]Sink
}

// NewRegistry returns a registry holding sinks. It panics on a duplicate
// name, a programming error.
func NewRegistry(sinks ...Sink) *Registry {
	r := &Registry{sinks: make(map[string]Sink, len(sinks))}
	for _, s := range sinks {
		if _, dup := r.sinks[s.Name]; dup {
			panic("writers: sink registered twice: " + s.Name)
		}
		r.sinks[s.Name] = s
	}
	return r
}

// Lookup returns the sink called name, or an ErrInvalid error listing the
// sinks this build offers.
func (r *Registry) Lookup(name string) (Sink, error) {
	s, ok := r.sinks[name]
	if !ok {
		return Sink{}, Errorf(ErrInvalid, "unknown sink %q (this build offers: %s)", name, strings.Join(r.Names(), ", "))
	}
	return s, nil
}

// Names returns the registered sink names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.sinks))
	for n := range r.sinks {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Sections returns every settings section name of the registered sinks.
func (r *Registry) Sections() []string {
	var out []string
	for _, s := range r.sinks {
		if s.Section != "" && !slices.Contains(out, s.Section) {
			out = append(out, s.Section)
		}
	}
	sort.Strings(out)
	return out
}

// Targeter is a SinkConfig that names what it writes (a table URI, a
// topic), for operators: the status page shows it.
type Targeter interface {
	Target() string
}

// TargetOf is c's target with any credentials a URI could carry (user
// information, query values such as presigned keys) redacted
// (redact.URI); "" when c names none.
func TargetOf(c SinkConfig) string {
	t, ok := c.(Targeter)
	if !ok {
		return ""
	}
	return redact.URI(t.Target())
}
