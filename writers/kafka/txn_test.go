package kafka_test

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/kafka"
	"github.com/quiver-ingest/quiver/writers/kafka/kafkaenc"
	"github.com/quiver-ingest/quiver/writers/kafka/kafkaenc/srfake"
)

// TestCommitAfterCrash: a precommitted epoch survives its process, and a
// crashed commit attempt that left an open Kafka transaction is aborted by
// the retry, so read_committed readers see every record exactly once.
func TestCommitAfterCrash(t *testing.T) {
	mem := checkedMem(t)
	c := startCluster(t)
	topic := uniqueTopic("orders")
	cfg := newConfig(c, topic, func(cfg *kafka.Config) {
		cfg.CreateTopic = &kafka.CreateTopic{Partitions: 3, ReplicationFactor: 1}
	})
	dir := t.TempDir()
	ctx := context.Background()
	key := writers.TxnKey{Writer: "job", Epoch: 4}

	a := openWriter(t, cfg, dir, mem)
	rows := `[{"user":"a","n":1},{"user":"b","n":2},{"user":"c","n":3}]`
	if err := a.Write(ctx, key, record(t, mem, rowsSchema, rows)); err != nil {
		t.Fatal(err)
	}
	desc, err := a.Precommit(ctx, key)
	if err != nil {
		t.Fatal(err)
	}

	// The crashed attempt: same transactional id, records produced, never
	// committed nor aborted. It stalls read_committed readers.
	pc := sarama.NewConfig()
	pc.Version = sarama.V3_6_0_0
	pc.Producer.Idempotent, pc.Producer.RequiredAcks, pc.Net.MaxOpenRequests = true, sarama.WaitForAll, 1
	pc.Producer.Return.Successes = true
	pc.Producer.Transaction.ID = "quiver/ep/job"
	orphan, err := sarama.NewSyncProducer(c.Addrs(), pc)
	if err != nil {
		t.Fatal(err)
	}
	if err := orphan.BeginTxn(); err != nil {
		t.Fatal(err)
	}
	if err := orphan.SendMessages([]*sarama.ProducerMessage{{Topic: topic, Value: sarama.StringEncoder("orphan")}}); err != nil {
		t.Fatal(err)
	}

	b := openWriter(t, cfg, dir, mem) // the restarted server
	if info, err := b.Commit(ctx, key, []writers.Descriptor{desc}); err != nil || info.Replayed {
		t.Fatalf("Commit after restart = %+v, %v", info, err)
	}
	orphan.Close()
	got := readCommitted(t, c.Addrs(), topic)
	if len(got) != 3 {
		t.Fatalf("%d records visible, want 3", len(got))
	}
	for _, r := range got {
		if string(r.Value) == "orphan" {
			t.Fatal("the crashed attempt's record is visible")
		}
	}
	if markers := readCommitted(t, c.Addrs(), cfg.MarkerTopic); len(markers) != 1 || string(markers[0].Value) != `{"endpoint":"ep","writer":"job","epoch":4}` || string(markers[0].Key) != "ep/job" {
		t.Fatalf("markers %v, want one {writer job, epoch 4}", markers)
	}
	if e, ok, err := b.CommittedEpoch(ctx, "job"); err != nil || !ok || e != 4 {
		t.Fatalf("CommittedEpoch = %d, %v, %v; want 4", e, ok, err)
	}
	// Committing again, also an older epoch, is a replay.
	for _, k := range []writers.TxnKey{key, {Writer: "job", Epoch: 2}} {
		if info, err := b.Commit(ctx, k, []writers.Descriptor{desc}); err != nil || !info.Replayed {
			t.Fatalf("Commit(%s) again = %+v, %v; want Replayed", k, info, err)
		}
	}
	// A rolled-back epoch publishes nothing.
	next := writers.TxnKey{Writer: "job", Epoch: 5}
	if err := b.Write(ctx, next, record(t, mem, rowsSchema, rows)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Precommit(ctx, next); err != nil {
		t.Fatal(err)
	}
	if err := b.Rollback(ctx, next); err != nil {
		t.Fatal(err)
	}
	if n := len(readCommitted(t, c.Addrs(), topic)); n != 3 {
		t.Fatalf("%d records after rollback, want 3", n)
	}
}

func TestCorruptStagingFileIsRefused(t *testing.T) {
	mem := checkedMem(t)
	c := startCluster(t)
	topic := uniqueTopic("orders")
	w := openWriter(t, newConfig(c, topic, func(cfg *kafka.Config) {
		cfg.CreateTopic = &kafka.CreateTopic{Partitions: 1, ReplicationFactor: 1}
	}), t.TempDir(), mem)
	ctx := context.Background()
	key := writers.TxnKey{Writer: "job", Epoch: 1}
	if err := w.Write(ctx, key, record(t, mem, rowsSchema, `[{"user":"a","n":1}]`)); err != nil {
		t.Fatal(err)
	}
	desc, err := w.Precommit(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// Same size, one flipped byte.
	tampered := strings.Replace(string(desc), `"crc":`, `"crc":1`, 1)
	if _, err := w.Commit(ctx, key, []writers.Descriptor{writers.Descriptor(tampered)}); !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("Commit of a descriptor with a wrong CRC: %v, want ErrInvalid", err)
	}
	if n := len(readCommitted(t, c.Addrs(), topic)); n != 0 {
		t.Fatalf("%d records published, want none", n)
	}
}

// TestBrokerDown: an auto-commit stream whose records find Kafka gone
// fails with ErrUnavailable once every record has had its final report,
// saying none was acknowledged; its transaction is aborted.
func TestBrokerDown(t *testing.T) {
	mem := checkedMem(t)
	c := startCluster(t)
	w := openWriter(t, newConfig(c, uniqueTopic("down"), func(cfg *kafka.Config) {
		cfg.CreateTopic = &kafka.CreateTopic{Partitions: 3, ReplicationFactor: 1}
	}), t.TempDir(), mem)
	ctx := context.Background()
	if err := commitAuto(t, w, record(t, mem, rowsSchema, `[{"user":"a","n":0}]`)); err != nil {
		t.Fatal(err) // connected, and a pooled producer ready, before the broker goes
	}
	c.Close()
	key := writers.AutoKey("s")
	err := w.Write(ctx, key, record(t, mem, rowsSchema, `[{"user":"a","n":1},{"user":"b","n":2}]`))
	if err == nil {
		_, err = w.Precommit(ctx, key)
	}
	if !errors.Is(err, writers.ErrUnavailable) || !strings.Contains(err.Error(), "0 of 2 records acknowledged") ||
		!strings.Contains(err.Error(), "stopped retrying") {
		t.Fatalf("stream with the broker down: %v, want ErrUnavailable saying 0 of 2 records acknowledged and that the producer stopped retrying", err)
	}
	if _, again := w.Commit(ctx, key, nil); !errors.Is(again, writers.ErrUnavailable) {
		t.Fatalf("Commit of the failed stream: %v, want its ErrUnavailable again", again)
	}
	if err := w.Rollback(ctx, key); err != nil {
		t.Fatal(err)
	}
}

// TestBrokerDownAtCommit: a stream precommitted (every record
// acknowledged inside its transaction) whose Kafka commit finds the broker
// gone has an unknown outcome: the commit may have reached it.
func TestBrokerDownAtCommit(t *testing.T) {
	mem := checkedMem(t)
	c := startCluster(t)
	w := openWriter(t, newConfig(c, uniqueTopic("down"), func(cfg *kafka.Config) {
		cfg.CreateTopic = &kafka.CreateTopic{Partitions: 3, ReplicationFactor: 1}
	}), t.TempDir(), mem)
	ctx := context.Background()
	key := writers.AutoKey("s")
	if err := w.Write(ctx, key, record(t, mem, rowsSchema, `[{"user":"a","n":1},{"user":"b","n":2}]`)); err != nil {
		t.Fatal(err)
	}
	desc, err := w.Precommit(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := w.Commit(ctx, key, []writers.Descriptor{desc}); !errors.Is(err, writers.ErrOutcomeUnknown) {
		t.Fatalf("Commit with the broker down: %v, want ErrOutcomeUnknown", err)
	}
}

// TestBrokerRejectsRecord: a record the broker refuses as invalid (not
// for its size) fails the auto-commit stream it is in with ErrInvalid: the
// stream's transaction aborts, so nothing of it is visible, and nothing
// goes to the dead-letter topic (only refusals predicted before sending
// are diverted: oversized records, keyless ones for compacted topics).
func TestBrokerRejectsRecord(t *testing.T) {
	mem := checkedMem(t)
	c := startCluster(t)
	topic, dlq := uniqueTopic("rej"), uniqueTopic("rej-dlq")
	for _, tp := range []string{topic, dlq} {
		if err := c.CreateTopic(tp, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	w := openWriter(t, newConfig(c, topic, func(cfg *kafka.Config) { cfg.DLQTopic = dlq }), t.TempDir(), mem)
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.InvalidRecord, Count: 1})
	err := commitAuto(t, w, record(t, mem, rowsSchema, `[{"user":"a","n":1}]`))
	if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "nothing was published") {
		t.Fatalf("stream with a refused record: %v, want ErrInvalid saying nothing was published", err)
	}
	if n := len(readCommitted(t, c.Addrs(), topic)); n != 0 {
		t.Fatalf("%d records in the topic, want 0", n)
	}
	if n := len(readCommitted(t, c.Addrs(), dlq)); n != 0 {
		t.Fatalf("%d records in the DLQ, want 0", n)
	}
	// The producer's aborted transaction leaves it fit for the next stream.
	if err := commitAuto(t, w, record(t, mem, rowsSchema, `[{"user":"b","n":2}]`)); err != nil {
		t.Fatalf("next stream: %v", err)
	}
	if n := len(readCommitted(t, c.Addrs(), topic)); n != 1 {
		t.Fatalf("%d records in the topic after the next stream, want 1", n)
	}
}

func TestAvroThroughRegistry(t *testing.T) {
	mem := checkedMem(t)
	c := startCluster(t)
	reg := srfake.Start(t)
	topic := uniqueTopic("avro")
	w := openWriter(t, newConfig(c, topic, func(cfg *kafka.Config) {
		cfg.Format, cfg.KeyColumn = kafka.FormatAvro, "user"
		cfg.SchemaRegistry = kafka.SchemaRegistry{URL: reg.URL, Compatibility: "backward"}
		cfg.CreateTopic = &kafka.CreateTopic{Partitions: 3, ReplicationFactor: 1}
	}), t.TempDir(), mem)
	if got := reg.Compatibility(topic + "-value"); got != "BACKWARD" {
		t.Fatalf("subject compatibility %q, want BACKWARD", got)
	}
	if err := commitAuto(t, w, record(t, mem, rowsSchema, `[{"user":"a","n":1},{"user":null,"n":2}]`)); err != nil {
		t.Fatal(err)
	}
	recs := readCommitted(t, c.Addrs(), topic)
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	client, err := kafkaenc.NewRegistry(reg.URL, topic+"-value")
	if err != nil {
		t.Fatal(err)
	}
	users := map[int64]any{}
	for _, r := range recs {
		if r.Value[0] != 0 {
			t.Fatalf("magic byte %d, want 0", r.Value[0])
		}
		text, err := client.SchemaByID(context.Background(), int(binary.BigEndian.Uint32(r.Value[1:5])))
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := avro.Unmarshal(avro.MustParse(text), r.Value[5:], &v); err != nil {
			t.Fatal(err)
		}
		users[v["n"].(int64)] = v["user"]
	}
	if users[1] != "a" || users[2] != nil {
		t.Fatalf("decoded users %v, want 1:a 2:nil", users)
	}

	// An incompatible schema is refused at the write, as ErrInvalid.
	reg.Reject(true)
	other := record(t, mem, changelogSchema, `[{"user":"a","n":1,"_op":"I"}]`)
	if err := commitAuto(t, w, other); !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("write with a rejected schema: %v, want ErrInvalid", err)
	}
}
