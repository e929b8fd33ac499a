package kafka_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/kafka"
)

var changelogSchema = arrow.NewSchema([]arrow.Field{
	{Name: "user", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64},
	{Name: "_op", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func TestUpsertEnvelope(t *testing.T) { forEachCluster(t, testUpsertEnvelope) }

func testUpsertEnvelope(t *testing.T, c cluster) {
	mem := checkedMem(t)
	topic := uniqueTopic("users")
	w := openWriter(t, newConfig(c, topic, func(cfg *kafka.Config) {
		cfg.KeyColumn, cfg.Envelope = "user", kafka.EnvelopeUpsert
		cfg.CreateTopic = &kafka.CreateTopic{Partitions: 3, ReplicationFactor: 1, Configs: map[string]string{"cleanup.policy": "compact"}}
	}), t.TempDir(), mem)

	rec := record(t, mem, changelogSchema, `[
		{"user":"a","n":1,"_op":"I"}, {"user":"b","n":2,"_op":"I"}, {"user":"a","n":3,"_op":"U"},
		{"user":"c","n":4,"_op":"I"}, {"user":"c","n":4,"_op":"D"}, {"user":"b","n":5,"_op":null}]`)
	if err := commitAuto(t, w, rec); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range readCommitted(t, c.Addrs(), topic) {
		if _, dup := got[string(r.Key)]; dup {
			t.Errorf("key %q produced twice", r.Key)
		}
		if r.Value == nil {
			got[string(r.Key)] = "<tombstone>"
		} else {
			got[string(r.Key)] = string(r.Value)
		}
	}
	want := map[string]string{"a": `{"user":"a","n":3}`, "b": `{"user":"b","n":5}`, "c": "<tombstone>"}
	if len(got) != len(want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("key %q = %s, want %s", k, got[k], v)
		}
	}
}

func TestUpsertRefusesEmptyAndNullKeys(t *testing.T) {
	mem := checkedMem(t)
	c := startCluster(t)
	topic := uniqueTopic("users")
	w := openWriter(t, newConfig(c, topic, func(cfg *kafka.Config) {
		cfg.KeyColumn, cfg.Envelope = "user", kafka.EnvelopeUpsert
		cfg.CreateTopic = &kafka.CreateTopic{Partitions: 3, ReplicationFactor: 1}
	}), t.TempDir(), mem)
	for name, rows := range map[string]string{
		"empty": `[{"user":"a","n":1,"_op":"I"},{"user":"","n":2,"_op":"I"}]`,
		"null":  `[{"user":"a","n":1,"_op":"I"},{"user":null,"n":2,"_op":"I"}]`,
	} {
		t.Run(name, func(t *testing.T) {
			ok := record(t, mem, changelogSchema, `[{"user":"z","n":0,"_op":"I"}]`)
			err := commitAuto(t, w, ok, record(t, mem, changelogSchema, rows))
			if !errors.Is(err, writers.ErrInvalid) {
				t.Fatalf("commit with a %s key: %v, want ErrInvalid", name, err)
			}
			if n := len(readCommitted(t, c.Addrs(), topic)); n != 0 {
				t.Fatalf("%d records produced, want none", n)
			}
		})
	}
}

func TestDeadLetterTopic(t *testing.T) { forEachCluster(t, testDeadLetterTopic) }

func testDeadLetterTopic(t *testing.T, c cluster) {
	mem := checkedMem(t)
	topic, dlq := uniqueTopic("small"), uniqueTopic("dlq")
	if err := c.CreateTopic(topic, 3, map[string]string{"max.message.bytes": "2000"}); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateTopic(dlq, 1, nil); err != nil {
		t.Fatal(err)
	}
	w := openWriter(t, newConfig(c, topic, func(cfg *kafka.Config) {
		cfg.KeyColumn, cfg.DLQTopic = "user", dlq
	}), t.TempDir(), mem)

	rows := "["
	for i := range 300 {
		user := "u"
		if i == 150 {
			user = strings.Repeat("x", 3000) // one record far above the topic's 2000 bytes
		}
		rows += fmt.Sprintf(`{"user":%q,"n":%d},`, user, i)
	}
	rows = rows[:len(rows)-1] + "]"
	if err := commitAuto(t, w, record(t, mem, rowsSchema, rows)); err != nil {
		t.Fatal(err)
	}
	if n := len(readCommitted(t, c.Addrs(), topic)); n != 299 {
		t.Fatalf("%d records in the topic, want 299", n)
	}
	dead := readCommitted(t, c.Addrs(), dlq)
	if len(dead) != 1 {
		t.Fatalf("%d records in the DLQ, want 1", len(dead))
	}
	headers := map[string]string{}
	for _, h := range dead[0].Headers {
		headers[h.Key] = string(h.Value)
	}
	if headers["__dlq.topic"] != topic || headers["__dlq.error"] == "" || headers["__dlq.timestamp"] == "" {
		t.Fatalf("DLQ headers %v, want __dlq.error, __dlq.topic=%s, __dlq.timestamp", headers, topic)
	}
	if len(dead[0].Value) < 3000 {
		t.Fatalf("DLQ value of %d bytes, want the original record", len(dead[0].Value))
	}

	// Without a DLQ such a record fails the stream, and nothing of it is
	// published: also when it comes after the first chunk of its batch,
	// which was sent already (in the stream's transaction, then aborted).
	// The error names its row in the batch.
	long := "["
	for i := range 5000 {
		user := "u"
		if i == 4500 {
			user = strings.Repeat("x", 3000)
		}
		long += fmt.Sprintf(`{"user":%q,"n":%d},`, user, i)
	}
	long = long[:len(long)-1] + "]"
	w2 := openWriter(t, newConfig(c, topic, nil), t.TempDir(), mem)
	if err := commitAuto(t, w2, record(t, mem, rowsSchema, long)); !errors.Is(err, writers.ErrExhausted) || !strings.Contains(err.Error(), "row 4500 ") {
		t.Fatalf("oversized record without dlq_topic: %v, want ErrExhausted naming row 4500", err)
	}
	if n := len(readCommitted(t, c.Addrs(), topic)); n != 299 {
		t.Fatalf("%d records in the topic after the refused stream, want 299", n)
	}
}

// TestDeadLetterKeyless: a compacted topic refuses keyless records
// (INVALID_RECORD), which inside the stream's Kafka transaction would abort
// the whole stream; the sink predicts it from cleanup.policy and diverts
// such a record to the DLQ before sending, or, without a DLQ that can take
// it, fails the write with nothing visible.
func TestDeadLetterKeyless(t *testing.T) { forEachCluster(t, testDeadLetterKeyless) }

func testDeadLetterKeyless(t *testing.T, c cluster) {
	mem := checkedMem(t)
	topic, dlq, compactedDLQ := uniqueTopic("compacted"), uniqueTopic("dlq"), uniqueTopic("compacted-dlq")
	if err := c.CreateTopic(dlq, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateTopic(compactedDLQ, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	compacted := func(dlqTopic string) func(*kafka.Config) {
		return func(cfg *kafka.Config) {
			cfg.KeyColumn, cfg.DLQTopic = "user", dlqTopic
			cfg.CreateTopic = &kafka.CreateTopic{Partitions: 3, ReplicationFactor: 1, Configs: map[string]string{"cleanup.policy": "compact"}}
		}
	}
	keyed := record(t, mem, rowsSchema, `[{"user":"a","n":0},{"user":"b","n":1}]`)
	defer keyed.Release()
	mixed := record(t, mem, rowsSchema, `[{"user":"c","n":2},{"user":"","n":3},{"user":null,"n":4},{"user":"d","n":5}]`)
	defer mixed.Release()

	w := openWriter(t, newConfig(c, topic, compacted(dlq)), t.TempDir(), mem)
	if err := commitAuto(t, w, keyed, mixed); err != nil {
		t.Fatal(err)
	}
	got := readCommitted(t, c.Addrs(), topic)
	if len(got) != 5 {
		t.Fatalf("%d records in the topic, want 5 (every row with a key, the empty one included)", len(got))
	}
	for _, r := range got {
		if r.Key == nil {
			t.Fatalf("keyless record %s in the compacted topic", r.Value)
		}
	}
	dead := readCommitted(t, c.Addrs(), dlq)
	if len(dead) != 1 {
		t.Fatalf("%d records in the DLQ, want 1", len(dead))
	}
	headers := map[string]string{}
	for _, h := range dead[0].Headers {
		headers[h.Key] = string(h.Value)
	}
	if headers["__dlq.topic"] != topic || !strings.Contains(headers["__dlq.error"], "compacted") || headers["__dlq.timestamp"] == "" {
		t.Fatalf("DLQ headers %v, want __dlq.error naming the compacted topic, __dlq.topic=%s, __dlq.timestamp", headers, topic)
	}
	if dead[0].Key != nil || !strings.Contains(string(dead[0].Value), `"n":4`) {
		t.Fatalf("DLQ record key %q value %s, want the keyless row n=4", dead[0].Key, dead[0].Value)
	}

	for _, tc := range []struct{ name, dlq string }{{"no dlq_topic", ""}, {"compacted dlq_topic", compactedDLQ}} {
		t.Run(tc.name, func(t *testing.T) {
			w := openWriter(t, newConfig(c, topic, compacted(tc.dlq)), t.TempDir(), mem)
			err := commitAuto(t, w, keyed, mixed)
			if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "row 2") || !strings.Contains(err.Error(), "compacted") {
				t.Fatalf("keyless row for a compacted topic: %v, want ErrInvalid naming row 2 and the compacted topic", err)
			}
			if n := len(readCommitted(t, c.Addrs(), topic)); n != 5 {
				t.Fatalf("%d records in the topic after the refused stream, want 5", n)
			}
			if n := len(readCommitted(t, c.Addrs(), dlq)) + len(readCommitted(t, c.Addrs(), compactedDLQ)); n != 1 {
				t.Fatalf("%d dead-letter records after the refused stream, want 1", n)
			}
		})
	}
}
