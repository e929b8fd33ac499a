package kafkaenc

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/twmb/franz-go/pkg/sr"
)

// Registry registers value schemas of one subject (<topic>-value) with a
// Confluent Schema Registry through franz-go's sr client and caches the
// ids by schema text, so a schema is registered once per process: at the
// first write and whenever the schema changes. Safe for concurrent use.
type Registry struct {
	cl      *sr.Client
	subject string

	mu  sync.Mutex // guards ids
	ids map[string]int
}

// NewRegistry returns a registry client for subject; opts name the
// registry (sr.URLs) and may set its TLS and authentication.
func NewRegistry(subject string, opts ...sr.ClientOpt) (*Registry, error) {
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafkaenc: schema registry: %w", err)
	}
	return &Registry{cl: cl, subject: subject, ids: map[string]int{}}, nil
}

// Subject is the subject schemas are registered under.
func (r *Registry) Subject() string { return r.subject }

// Register returns the id of the Avro schema text under the subject,
// registering it when this process has not yet. Registering a schema the
// registry already holds returns its existing id; an incompatible one
// fails with the registry's *sr.ResponseError (HTTP 409).
func (r *Registry) Register(ctx context.Context, text string) (int, error) {
	r.mu.Lock()
	id, ok := r.ids[text]
	r.mu.Unlock()
	if ok {
		return id, nil
	}
	id, err := r.cl.RegisterSchema(ctx, r.subject, sr.Schema{Schema: text, Type: sr.TypeAvro}, -1, -1)
	if err != nil {
		return 0, fmt.Errorf("kafkaenc: register the value schema under subject %q: %w", r.subject, err)
	}
	if id < 1 || id > math.MaxInt32 {
		// The record header holds a 4-byte id, and registries number from 1.
		return 0, fmt.Errorf("kafkaenc: register the value schema under subject %q: the registry answered schema id %d, which no record header can carry: check that schema_registry.url is a Confluent-compatible registry", r.subject, id)
	}
	r.mu.Lock()
	r.ids[text] = id
	r.mu.Unlock()
	return id, nil
}

// SetCompatibility sets the subject's compatibility level.
func (r *Registry) SetCompatibility(ctx context.Context, level sr.CompatibilityLevel) error {
	for _, res := range r.cl.SetCompatibility(ctx, sr.SetCompatibility{Level: level}, r.subject) {
		if res.Err != nil {
			return fmt.Errorf("kafkaenc: set compatibility %s on subject %q: %w", level, r.subject, res.Err)
		}
	}
	return nil
}

// Probe checks that the registry answers (GET /subjects) without changing
// anything.
func (r *Registry) Probe(ctx context.Context) error {
	if _, err := r.cl.Subjects(ctx); err != nil {
		return fmt.Errorf("kafkaenc: schema registry for subject %q: %w", r.subject, err)
	}
	return nil
}

// SchemaByID returns the text of schema id (for readers and tests).
func (r *Registry) SchemaByID(ctx context.Context, id int) (string, error) {
	return r.cl.SchemaTextByID(ctx, id)
}
