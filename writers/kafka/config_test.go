package kafka_test

import (
	"strings"
	"testing"

	"github.com/quiver-ingest/quiver/writers/kafka"
)

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name   string
		change func(*kafka.Config)
		want   string // "" = valid
	}{
		{"defaults", func(*kafka.Config) {}, ""},
		{"no brokers", func(c *kafka.Config) { c.Brokers = nil }, "brokers: required"},
		{"bad broker", func(c *kafka.Config) { c.Brokers = []string{"nohost"} }, "brokers: entry 0"},
		{"bad topic", func(c *kafka.Config) { c.Topic = "a b" }, "topic: \"a b\" is not a Kafka topic name"},
		{"avro without registry", func(c *kafka.Config) { c.Format = kafka.FormatAvro }, "schema_registry.url: required"},
		{"bad compatibility", func(c *kafka.Config) { c.SchemaRegistry.Compatibility = "sideways" }, "schema_registry.compatibility"},
		{"bad format", func(c *kafka.Config) { c.Format = "xml" }, "format:"},
		{"bad partitioner", func(c *kafka.Config) { c.Partitioner = "hash" }, "partitioner:"},
		{"upsert without key", func(c *kafka.Config) { c.Envelope = kafka.EnvelopeUpsert }, "key_column: required by envelope upsert"},
		{"upsert round robin", func(c *kafka.Config) {
			c.Envelope, c.KeyColumn, c.Partitioner = kafka.EnvelopeUpsert, "id", kafka.PartitionRoundRobin
		}, "partitioner: envelope upsert needs murmur2"},
		{"dlq is topic", func(c *kafka.Config) { c.DLQTopic = c.Topic }, "dlq_topic: must differ"},
		{"bad compression", func(c *kafka.Config) { c.Compression = "gzip9" }, "compression:"},
		{"bad timestamps", func(c *kafka.Config) { c.Timestamps = "rfc" }, "timestamps:"},
		{"create topic", func(c *kafka.Config) { c.CreateTopic = &kafka.CreateTopic{} }, "create_topic.partitions"},
		{"sticky size", func(c *kafka.Config) { c.StickyBatchSize = 0 }, "sticky_batch_size"},
		{"marker", func(c *kafka.Config) { c.MarkerTopic = "" }, "marker_topic: required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantValidate(t, tc.change, tc.want) })
	}
}

// wantValidate validates a config for topic clicks with change applied:
// valid when want is "", else an error containing want. No error may show
// a value containing "s3cret" (the secrets of the security cases).
func wantValidate(t *testing.T, change func(*kafka.Config), want string) {
	t.Helper()
	c := kafka.NewConfig()
	c.Brokers, c.Topic = []string{"127.0.0.1:19092"}, "clicks"
	change(c)
	err := c.Validate()
	switch {
	case want == "" && err != nil:
		t.Fatalf("Validate: %v", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("Validate = %v, want an error containing %q", err, want)
	case err != nil && strings.Contains(err.Error(), "s3cret"):
		t.Fatalf("Validate's error shows a secret: %v", err)
	}
}
