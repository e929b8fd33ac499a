package kafka

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"
)

// Value formats (Config.Format).
const (
	FormatJSON = "json"
	FormatAvro = "avro"
)

// Partitioners (Config.Partitioner).
const (
	PartitionMurmur2    = "murmur2"
	PartitionRoundRobin = "round_robin"
	PartitionSticky     = "sticky"
)

// Envelopes (Config.Envelope).
const (
	EnvelopeAppend = "append"
	EnvelopeUpsert = "upsert"
)

// Timestamp renderings of the JSON format (Config.Timestamps).
const (
	TimestampsISO8601     = "iso8601"
	TimestampsEpochMillis = "epoch_millis"
)

// DefaultMarkerTopic is the compacted topic holding the commit markers.
const DefaultMarkerTopic = "_quiver_commits"

// Config is one endpoint's `kafka:` section. NewConfig holds every default;
// Validate names the offending key relative to the section.
type Config struct {
	// Brokers are the bootstrap brokers, host:port. Required.
	Brokers []string `yaml:"brokers"`
	// Topic receives the records. Required.
	Topic string `yaml:"topic"`
	// Format of the record values: json (one object per row) or avro
	// (Confluent wire format, schema in the Schema Registry).
	Format string `yaml:"format"`
	// SchemaRegistry is required by the avro format.
	SchemaRegistry SchemaRegistry `yaml:"schema_registry"`
	// KeyColumn names the column whose value (as text, strings as they
	// are) becomes the record key; "" produces keyless records. Required
	// by the upsert envelope.
	KeyColumn string `yaml:"key_column"`
	// Partitioner is murmur2 (Java's default on the key bytes; keyless
	// records go to a random partition), round_robin or sticky (keys
	// ignored; one partition for StickyBatchSize records, then the next).
	Partitioner string `yaml:"partitioner"`
	// StickyBatchSize is how many records the sticky partitioner sends to
	// one partition before moving on.
	StickyBatchSize int `yaml:"sticky_batch_size"`
	// Envelope is append (every row is a record) or upsert (the changelog
	// is collapsed per key: a value for live keys, a tombstone for
	// deleted ones).
	Envelope string `yaml:"envelope"`
	// DLQTopic receives records the broker refuses for their own sake
	// (too large, invalid); "" fails the write instead.
	DLQTopic string `yaml:"dlq_topic"`
	// Compression of produced batches: none, snappy, lz4 or zstd.
	Compression string `yaml:"compression"`
	// Timestamps renders JSON timestamps as iso8601 (RFC 3339, UTC,
	// nanoseconds as needed) or epoch_millis (an integer).
	Timestamps string `yaml:"timestamps"`
	// CreateTopic, when set, creates Topic (and DLQTopic) at open if it
	// is missing; otherwise a missing topic fails the open.
	CreateTopic *CreateTopic `yaml:"create_topic"`
	// MarkerTopic is the compacted topic of the exactly-once commit
	// markers ({writer, epoch}); created with one partition when missing.
	MarkerTopic string `yaml:"marker_topic"`
	// TLS, when set, encrypts every connection to the brokers (records,
	// markers, dead letters, admin) and verifies their certificates.
	TLS *TLS `yaml:"tls"`
	// SASL, when set, authenticates every connection to the brokers.
	SASL *SASL `yaml:"sasl"`
}

// SchemaRegistry locates the Confluent Schema Registry of the avro format.
type SchemaRegistry struct {
	// URL of the registry, http(s)://host:port.
	URL string `yaml:"url"`
	// Compatibility, when set, is applied to the subject <topic>-value at
	// open: NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD,
	// FORWARD_TRANSITIVE, FULL or FULL_TRANSITIVE. "" keeps the
	// registry's setting.
	Compatibility string `yaml:"compatibility"`
	// TLS verifies an https registry against its own CA (and may present
	// a client certificate).
	TLS *TLS `yaml:"tls"`
	// BasicAuth is the registry's HTTP basic authentication.
	BasicAuth *BasicAuth `yaml:"basic_auth"`
}

// CreateTopic are the settings of a topic the sink creates.
type CreateTopic struct {
	Partitions        int32             `yaml:"partitions"`
	ReplicationFactor int16             `yaml:"replication_factor"`
	Configs           map[string]string `yaml:"configs"`
}

// NewConfig returns the defaults of docs/kafka.md: json, murmur2, append,
// no compression, ISO-8601 timestamps, sticky batches of 1000 records,
// markers in _quiver_commits. Brokers and Topic have no default.
func NewConfig() *Config {
	return &Config{
		Format:          FormatJSON,
		Partitioner:     PartitionMurmur2,
		StickyBatchSize: 1000,
		Envelope:        EnvelopeAppend,
		Compression:     "none",
		Timestamps:      TimestampsISO8601,
		MarkerTopic:     DefaultMarkerTopic,
	}
}

// topicName is Kafka's rule for topic names.
var topicName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)

// Validate checks every key and reports all problems, one per line, each
// starting with the key ("format: ...").
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	topic := func(key, name string) {
		if name != "" && !topicName.MatchString(name) {
			bad(key, "%q is not a Kafka topic name: use 1 to 249 of A-Z a-z 0-9 . _ -", name)
		}
	}

	if len(c.Brokers) == 0 {
		bad("brokers", "required, e.g. [\"127.0.0.1:19092\"]")
	}
	for i, b := range c.Brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			bad("brokers", "entry %d %q is not host:port", i, b)
		}
	}
	if c.Topic == "" {
		bad("topic", "required")
	}
	topic("topic", c.Topic)

	switch c.Format {
	case FormatJSON:
	case FormatAvro:
		if c.SchemaRegistry.URL == "" {
			bad("schema_registry.url", "required by format avro, e.g. http://127.0.0.1:8081")
		}
	default:
		bad("format", "%q is not a format: use json or avro", c.Format)
	}
	if u := c.SchemaRegistry.URL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		bad("schema_registry.url", "%q must start with http:// or https://", u)
	}
	if lvl := c.SchemaRegistry.Compatibility; lvl != "" {
		var l sr.CompatibilityLevel
		if err := l.UnmarshalText([]byte(strings.ToUpper(lvl))); err != nil {
			bad("schema_registry.compatibility", "%q is not a level: use NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL or FULL_TRANSITIVE", lvl)
		}
	}

	switch c.Partitioner {
	case PartitionMurmur2, PartitionRoundRobin, PartitionSticky:
	default:
		bad("partitioner", "%q is not a partitioner: use murmur2, round_robin or sticky", c.Partitioner)
	}
	if c.StickyBatchSize <= 0 {
		bad("sticky_batch_size", "%d: must be positive (default 1000)", c.StickyBatchSize)
	}

	switch c.Envelope {
	case EnvelopeAppend:
	case EnvelopeUpsert:
		if c.KeyColumn == "" {
			bad("key_column", "required by envelope upsert: name the column that keys the compacted topic")
		}
		if c.Partitioner != PartitionMurmur2 {
			// Compaction and last-value-wins need every record of a key on
			// one partition, in order.
			bad("partitioner", "envelope upsert needs murmur2, so that every record of a key lands on one partition")
		}
	default:
		bad("envelope", "%q is not an envelope: use append or upsert", c.Envelope)
	}

	topic("dlq_topic", c.DLQTopic)
	if c.DLQTopic != "" && c.DLQTopic == c.Topic {
		bad("dlq_topic", "must differ from topic %q", c.Topic)
	}
	switch c.Compression {
	case "none", "snappy", "lz4", "zstd":
	default:
		bad("compression", "%q is not a codec: use none, snappy, lz4 or zstd", c.Compression)
	}
	switch c.Timestamps {
	case TimestampsISO8601, TimestampsEpochMillis:
	default:
		bad("timestamps", "%q is not a rendering: use iso8601 or epoch_millis", c.Timestamps)
	}
	if ct := c.CreateTopic; ct != nil {
		if ct.Partitions < 1 {
			bad("create_topic.partitions", "%d: must be at least 1", ct.Partitions)
		}
		if ct.ReplicationFactor < 1 {
			bad("create_topic.replication_factor", "%d: must be at least 1", ct.ReplicationFactor)
		}
	}
	if c.MarkerTopic == "" {
		bad("marker_topic", "required (default %s)", DefaultMarkerTopic)
	}
	topic("marker_topic", c.MarkerTopic)
	if c.MarkerTopic != "" && (c.MarkerTopic == c.Topic || c.MarkerTopic == c.DLQTopic) {
		bad("marker_topic", "must differ from topic and dlq_topic")
	}
	c.validateSecurity(bad)
	return errors.Join(errs...)
}

// Mode is the envelope, shown by the endpoints listing.
func (c *Config) Mode() string { return c.Envelope }

// Target is the topic (the brokers are not shown: they may carry
// credentials in some deployments).
func (c *Config) Target() string { return "topic " + c.Topic }

// compatibility returns the configured level; ok is false when none is set.
// Validate has accepted the text.
func (c *Config) compatibility() (sr.CompatibilityLevel, bool) {
	var l sr.CompatibilityLevel
	if c.SchemaRegistry.Compatibility == "" || l.UnmarshalText([]byte(strings.ToUpper(c.SchemaRegistry.Compatibility))) != nil {
		return 0, false
	}
	return l, true
}
