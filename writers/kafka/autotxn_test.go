package kafka_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/kafka"
)

// logEnd returns the sum of topic's high watermarks: every record in the
// log, in open and aborted transactions too.
func logEnd(t *testing.T, c cluster, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// TestAutoStreamIsOneTransaction: an auto-commit stream's records reach
// the log as they are written (before Precommit) yet stay invisible to
// read_committed consumers until Commit; a rolled-back stream's records
// never become visible.
func TestAutoStreamIsOneTransaction(t *testing.T) { forEachCluster(t, testAutoStreamIsOneTransaction) }

func testAutoStreamIsOneTransaction(t *testing.T, c cluster) {
	mem := checkedMem(t)
	topic := uniqueTopic("auto")
	w := openWriter(t, newConfig(c, topic, func(cfg *kafka.Config) {
		cfg.KeyColumn = "user"
		cfg.CreateTopic = &kafka.CreateTopic{Partitions: 3, ReplicationFactor: 1}
	}), t.TempDir(), mem)
	ctx := context.Background()

	key := writers.AutoKey("a")
	for _, rows := range []string{`[{"user":"a","n":1},{"user":"b","n":2}]`, `[{"user":"c","n":3}]`} {
		if err := w.Write(ctx, key, record(t, mem, rowsSchema, rows)); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); logEnd(t, c, topic) < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("the stream's 3 records did not reach the log before Precommit (log end %d)", logEnd(t, c, topic))
		}
	}
	if n := len(readCommittedNow(t, c.Addrs(), topic)); n != 0 {
		t.Fatalf("read_committed sees %d records of an open stream, want 0", n)
	}
	d, err := w.Precommit(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(readCommittedNow(t, c.Addrs(), topic)); n != 0 {
		t.Fatalf("read_committed sees %d records after Precommit, want 0", n)
	}
	if _, err := w.Commit(ctx, key, []writers.Descriptor{d}); err != nil {
		t.Fatal(err)
	}
	if n := len(readCommitted(t, c.Addrs(), topic)); n != 3 {
		t.Fatalf("read_committed sees %d records after Commit, want 3", n)
	}

	rolled := writers.AutoKey("b")
	if err := w.Write(ctx, rolled, record(t, mem, rowsSchema, `[{"user":"d","n":4},{"user":"e","n":5}]`)); err != nil {
		t.Fatal(err)
	}
	if err := w.Rollback(ctx, rolled); err != nil {
		t.Fatal(err)
	}
	if end := logEnd(t, c, topic); end < 5 {
		t.Fatalf("log end %d after the rolled-back stream, want its records sent (at least 5)", end)
	}
	if n := len(readCommitted(t, c.Addrs(), topic)); n != 3 {
		t.Fatalf("read_committed sees %d records after a rollback, want the 3 committed", n)
	}
}

func autoProducersStarted(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "quiver_kafka_auto_producers_started_total" {
			return int(mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
	t.Fatal("no quiver_kafka_auto_producers_started_total metric")
	return 0
}

// TestAutoProducersArePooled: sequential streams share one transactional
// producer (one InitProducerId); concurrent streams each lease their own,
// and both stay pooled for later streams.
func TestAutoProducersArePooled(t *testing.T) {
	mem := checkedMem(t)
	c := startCluster(t)
	topic := uniqueTopic("pool")
	w, reg := openEndpoint(t, newConfig(c, topic, func(cfg *kafka.Config) {
		cfg.CreateTopic = &kafka.CreateTopic{Partitions: 3, ReplicationFactor: 1}
	}), "ep", mem)
	rec := record(t, mem, rowsSchema, `[{"user":"a","n":1}]`)
	for range 3 {
		if err := commitAuto(t, w, rec); err != nil {
			t.Fatal(err)
		}
	}
	if n := autoProducersStarted(t, reg); n != 1 {
		t.Fatalf("%d producers started for 3 sequential streams, want 1", n)
	}
	ctx := context.Background()
	keys := []writers.TxnKey{writers.AutoKey("x"), writers.AutoKey("y")}
	for _, k := range keys { // both open at once
		if err := w.Write(ctx, k, rec); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(keys))
	for i, k := range keys {
		wg.Go(func() {
			d, err := w.Precommit(ctx, k)
			if err == nil {
				_, err = w.Commit(ctx, k, []writers.Descriptor{d})
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent stream %d: %v", i, err)
		}
	}
	for range 3 {
		if err := commitAuto(t, w, rec); err != nil {
			t.Fatal(err)
		}
	}
	if n := autoProducersStarted(t, reg); n != 2 {
		t.Fatalf("%d producers started after two concurrent streams and more sequential ones, want 2", n)
	}
	if n := len(readCommitted(t, c.Addrs(), topic)); n != 8 {
		t.Fatalf("read_committed sees %d records, want 8", n)
	}
}

// TestCloseAbortsOpenStreams: closing the writer aborts a stream still
// open, so its records never become visible.
func TestCloseAbortsOpenStreams(t *testing.T) {
	mem := checkedMem(t)
	c := startCluster(t)
	topic := uniqueTopic("close")
	cfg := newConfig(c, topic, func(cfg *kafka.Config) {
		cfg.CreateTopic = &kafka.CreateTopic{Partitions: 3, ReplicationFactor: 1}
	})
	w := openWriter(t, cfg, t.TempDir(), mem)
	ctx := context.Background()
	if err := w.Write(ctx, writers.AutoKey("open"), record(t, mem, rowsSchema, `[{"user":"a","n":1}]`)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A later committed stream is readable: the aborted one holds back no
	// read_committed consumer.
	other := openWriter(t, cfg, t.TempDir(), mem)
	if err := commitAuto(t, other, record(t, mem, rowsSchema, `[{"user":"b","n":2}]`)); err != nil {
		t.Fatal(err)
	}
	recs := readCommitted(t, c.Addrs(), topic)
	if len(recs) != 1 || string(recs[0].Value) != fmt.Sprintf(`{"user":"b","n":%d}`, 2) {
		t.Fatalf("read_committed sees %v, want only the committed stream's record", recs)
	}
}
