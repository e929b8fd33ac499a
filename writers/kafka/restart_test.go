package kafka_test

import (
	"context"
	"errors"
	"testing"

	"github.com/quiver-ingest/quiver/internal/realkafka"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/kafka"
)

// TestRealBrokerRestart kills a real Apache Kafka broker (SIGKILL) between
// a precommit and its commit, on a broker of the test's own (the run's is
// shared): while it is down a stream and the commit fail with
// ErrUnavailable (retryable); after it is back the retried commit
// publishes the precommitted records exactly once for read_committed
// readers, a second commit is a replay, and new streams are written again.
func TestRealBrokerRestart(t *testing.T) {
	b := realkafka.Dedicated(t)
	c := realCluster{b: b}
	mem := checkedMem(t)
	topic := uniqueTopic("restart")
	cfg := newConfig(c, topic, func(cfg *kafka.Config) {
		cfg.CreateTopic = &kafka.CreateTopic{Partitions: 3, ReplicationFactor: 1}
	})
	w := openWriter(t, cfg, t.TempDir(), mem)
	ctx := context.Background()
	if err := commitAuto(t, w, record(t, mem, rowsSchema, `[{"user":"a","n":0}]`)); err != nil {
		t.Fatal(err)
	}
	key := writers.TxnKey{Writer: "job", Epoch: 1}
	if err := w.Write(ctx, key, record(t, mem, rowsSchema, `[{"user":"a","n":1},{"user":"b","n":2},{"user":"c","n":3}]`)); err != nil {
		t.Fatal(err)
	}
	desc, err := w.Precommit(ctx, key)
	if err != nil {
		t.Fatal(err)
	}

	b.Kill()
	err = commitAuto(t, w, record(t, mem, rowsSchema, `[{"user":"d","n":4}]`))
	if !errors.Is(err, writers.ErrUnavailable) {
		t.Fatalf("stream with the broker down: %v, want ErrUnavailable", err)
	}
	// The commit of a precommitted transaction starts its own producer
	// (InitProducerId fences any earlier attempt), which fails before
	// anything is sent: retryable, not an unknown outcome.
	if _, err := w.Commit(ctx, key, []writers.Descriptor{desc}); !errors.Is(err, writers.ErrUnavailable) || errors.Is(err, writers.ErrOutcomeUnknown) {
		t.Fatalf("Commit with the broker down: %v, want ErrUnavailable", err)
	}

	if err := b.Relaunch(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx, key, []writers.Descriptor{desc}); err != nil {
		t.Fatalf("Commit retried after the restart: %v", err)
	}
	if info, err := w.Commit(ctx, key, []writers.Descriptor{desc}); err != nil || !info.Replayed {
		t.Fatalf("Commit again = %+v, %v; want Replayed", info, err)
	}
	if err := commitAuto(t, w, record(t, mem, rowsSchema, `[{"user":"e","n":5}]`)); err != nil {
		t.Fatalf("stream after the restart: %v", err)
	}
	counts := map[string]int{}
	for _, r := range readCommitted(t, c.Addrs(), topic) {
		counts[string(r.Value)]++
	}
	want := map[string]int{
		`{"user":"a","n":0}`: 1, `{"user":"a","n":1}`: 1, `{"user":"b","n":2}`: 1,
		`{"user":"c","n":3}`: 1, `{"user":"e","n":5}`: 1,
	}
	if len(counts) != len(want) {
		t.Fatalf("read_committed sees %v, want %v", counts, want)
	}
	for v, n := range want {
		if counts[v] != n {
			t.Fatalf("read_committed sees %v, want %v", counts, want)
		}
	}
	if markers := readCommitted(t, c.Addrs(), cfg.MarkerTopic); len(markers) != 1 {
		t.Fatalf("%d commit markers, want 1", len(markers))
	}
}
