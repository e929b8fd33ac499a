package kafka_test

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/kafka"
	"github.com/quiver-ingest/quiver/writers/kafka/kafkaenc"
	"github.com/quiver-ingest/quiver/writers/kafka/kafkaenc/srfake"
)

// TestCommitAfterCrash: a precommitted epoch survives its process, and a
// crashed commit attempt that left an open Kafka transaction is aborted by
// the retry, so read_committed readers see every record exactly once.
func TestCommitAfterCrash(t *testing.T) { forEachCluster(t, testCommitAfterCrash) }

func testCommitAfterCrash(t *testing.T, c cluster) {
	mem := checkedMem(t)
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
	// Committing again, also an older epoch (with descriptors of its own,
	// none here: a descriptor names its own key's staging file), is a
	// replay.
	for k, ds := range map[writers.TxnKey][]writers.Descriptor{key: {desc}, {Writer: "job", Epoch: 2}: nil} {
		if info, err := b.Commit(ctx, k, ds); err != nil || !info.Replayed {
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

func TestAvroThroughRegistry(t *testing.T) { forEachCluster(t, testAvroThroughRegistry) }

func testAvroThroughRegistry(t *testing.T, c cluster) {
	mem := checkedMem(t)
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
	client, err := kafkaenc.NewRegistry(topic+"-value", sr.URLs(reg.URL))
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

// TestForgedDescriptorTouchesNoFile: a descriptor naming any file but the
// key's own staging file is refused before a file is read or removed (it
// used to remove the "staging file" it named after an empty commit); the
// genuine descriptor then commits, also in the absolute-path form of
// earlier builds.
func TestForgedDescriptorTouchesNoFile(t *testing.T) {
	mem := checkedMem(t)
	c := startCluster(t)
	topic := uniqueTopic("forged")
	dataDir := t.TempDir()
	w := openWriter(t, newConfig(c, topic, func(cfg *kafka.Config) {
		cfg.CreateTopic = &kafka.CreateTopic{Partitions: 1, ReplicationFactor: 1}
	}), dataDir, mem)
	ctx := context.Background()
	stageDir := filepath.Join(dataDir, "kafka", "ep")
	outside := filepath.Join(t.TempDir(), "victim")
	inData := filepath.Join(dataDir, "victim")
	key, other := writers.TxnKey{Writer: "job", Epoch: 1}, writers.TxnKey{Writer: "other", Epoch: 1}
	// Each precommit leaves one more staging file: the key's own.
	descs, names := map[writers.TxnKey]writers.Descriptor{}, map[writers.TxnKey]string{}
	for _, k := range []writers.TxnKey{key, other} {
		if err := w.Write(ctx, k, record(t, mem, rowsSchema, `[{"user":"a","n":1}]`)); err != nil {
			t.Fatal(err)
		}
		d, err := w.Precommit(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		descs[k] = d
		files, _ := filepath.Glob(filepath.Join(stageDir, "*.stage"))
		for _, f := range files {
			if f := filepath.Base(f); f != names[key] {
				names[k] = f
			}
		}
	}
	victims := []string{outside, inData, filepath.Join(stageDir, names[key]), filepath.Join(stageDir, names[other])}
	for _, v := range victims[:2] {
		if err := os.WriteFile(v, []byte("precious"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ name, desc string }{
		{"absolute path, no records", `{"endpoint":"ep","path":"` + outside + `","records":0}`},
		{"absolute path", `{"endpoint":"ep","path":"` + outside + `","size":8,"records":1}`},
		{"path escaping the staging folder", `{"endpoint":"ep","path":"` + stageDir + `/../../victim","size":8,"records":1}`},
		{"absolute file", `{"endpoint":"ep","file":"` + outside + `","size":8,"records":1}`},
		{"dotdot file", `{"endpoint":"ep","file":"../../victim","size":8,"records":1}`},
		{"name outside the pattern", `{"endpoint":"ep","file":"victim","size":8,"records":1}`},
		{"another key's staging file", string(descs[other])},
		{"own file without records", `{"endpoint":"ep","file":"` + names[key] + `","records":0}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := w.Commit(ctx, key, []writers.Descriptor{writers.Descriptor(tc.desc)})
			if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "descriptor 0") {
				t.Fatalf("Commit of %s: %v, want ErrInvalid naming descriptor 0", tc.desc, err)
			}
			for _, v := range victims {
				if _, err := os.Stat(v); err != nil {
					t.Fatalf("after the refused commit: %v", err)
				}
			}
		})
	}
	if _, err := w.Commit(ctx, key, []writers.Descriptor{descs[key], descs[key]}); !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("Commit of one staging file twice: %v, want ErrInvalid", err)
	}
	if n := len(readCommitted(t, c.Addrs(), topic)); n != 0 {
		t.Fatalf("%d records published by refused commits, want none", n)
	}
	legacy := strings.Replace(string(descs[key]), `"file":"`+names[key]+`"`, `"path":"`+filepath.Join(stageDir, names[key])+`"`, 1)
	if _, err := w.Commit(ctx, key, []writers.Descriptor{writers.Descriptor(legacy)}); err != nil {
		t.Fatalf("Commit of the genuine descriptor in the legacy path form: %v", err)
	}
	if n := len(readCommitted(t, c.Addrs(), topic)); n != 1 {
		t.Fatalf("%d records after the genuine commit, want 1", n)
	}
}
