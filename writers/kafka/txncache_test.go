package kafka_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/kafka"
)

// openEndpoint opens a writer of cfg as endpoint, with its metrics in a
// registry of its own, closed at the end of the test.
func openEndpoint(t *testing.T, cfg *kafka.Config, endpoint string, mem memory.Allocator) (*kafka.Writer, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	w, err := kafka.New(cfg, writers.Env{Endpoint: endpoint, DataDir: t.TempDir(), Allocator: mem, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Open(context.Background()); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { w.Close(context.Background()) })
	return w, reg
}

func markerReads(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	return counter(t, reg, "quiver_kafka_marker_reads_total")
}

// counter returns the value of the counter name gathered from reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return int(mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
	t.Fatalf("no %s metric", name)
	return 0
}

// commitTxn stages rows under key on w, precommits and commits them.
func commitTxn(t *testing.T, w *kafka.Writer, mem memory.Allocator, key writers.TxnKey, rows string) writers.CommitInfo {
	t.Helper()
	ctx := context.Background()
	if err := w.Write(ctx, key, record(t, mem, rowsSchema, rows)); err != nil {
		t.Fatal(err)
	}
	d, err := w.Precommit(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	info, err := w.Commit(ctx, key, []writers.Descriptor{d})
	if err != nil {
		t.Fatalf("Commit(%s): %v", key, err)
	}
	return info
}

// TestCommitReadsMarkersOnce: a writer's commits read the marker topic
// only for the first one; replays are answered from the cache; a
// restarted writer (empty cache) reads again and still sees the replay.
func TestCommitReadsMarkersOnce(t *testing.T) {
	mem := checkedMem(t)
	c := startCluster(t)
	topic := uniqueTopic("cache")
	cfg := newConfig(c, topic, func(cfg *kafka.Config) {
		cfg.CreateTopic = &kafka.CreateTopic{Partitions: 3, ReplicationFactor: 1}
	})
	w, reg := openEndpoint(t, cfg, "ep", mem)
	for e := int64(1); e <= 3; e++ {
		if info := commitTxn(t, w, mem, writers.TxnKey{Writer: "job", Epoch: e}, `[{"user":"a","n":1}]`); info.Replayed {
			t.Fatalf("epoch %d replayed", e)
		}
	}
	if info := commitTxn(t, w, mem, writers.TxnKey{Writer: "job", Epoch: 2}, `[{"user":"a","n":1}]`); !info.Replayed {
		t.Fatal("epoch 2 again was not a replay")
	}
	if n := markerReads(t, reg); n != 1 {
		t.Fatalf("%d marker topic reads for 4 commits of one writer, want 1", n)
	}
	if n := len(readCommitted(t, c.Addrs(), topic)); n != 3 {
		t.Fatalf("%d records, want 3", n)
	}

	restarted, reg2 := openEndpoint(t, cfg, "ep", mem)
	if info := commitTxn(t, restarted, mem, writers.TxnKey{Writer: "job", Epoch: 3}, `[{"user":"a","n":1}]`); !info.Replayed {
		t.Fatal("epoch 3 after a restart was not a replay")
	}
	if n := markerReads(t, reg2); n != 1 {
		t.Fatalf("restarted writer read the marker topic %d times, want 1", n)
	}
}

// TestEndpointsShareMarkerTopic: one transaction commits on two endpoints
// sharing the marker topic; the second commit is no replay of the first.
func TestEndpointsShareMarkerTopic(t *testing.T) {
	mem := checkedMem(t)
	c := startCluster(t)
	markers := uniqueTopic("markers")
	open := func(endpoint string) (*kafka.Writer, string) {
		topic := uniqueTopic(endpoint)
		cfg := newConfig(c, topic, func(cfg *kafka.Config) {
			cfg.MarkerTopic = markers
			cfg.CreateTopic = &kafka.CreateTopic{Partitions: 1, ReplicationFactor: 1}
		})
		w, _ := openEndpoint(t, cfg, endpoint, mem)
		return w, topic
	}
	orders, ordersTopic := open("orders")
	clicks, clicksTopic := open("clicks")
	key := writers.TxnKey{Writer: "job", Epoch: 7}
	for _, w := range []*kafka.Writer{orders, clicks} {
		if info := commitTxn(t, w, mem, key, `[{"user":"a","n":1}]`); info.Replayed {
			t.Fatal("a commit on the second endpoint was taken for a replay of the first's")
		}
	}
	for _, topic := range []string{ordersTopic, clicksTopic} {
		if n := len(readCommitted(t, c.Addrs(), topic)); n != 1 {
			t.Fatalf("topic %s holds %d records, want 1", topic, n)
		}
	}
	other, _ := open("other")
	if e, ok, err := other.CommittedEpoch(context.Background(), "job"); err != nil || ok {
		t.Fatalf("CommittedEpoch on an endpoint that never committed = %d, %v, %v; want none", e, ok, err)
	}
	if e, ok, err := clicks.CommittedEpoch(context.Background(), "job"); err != nil || !ok || e != 7 {
		t.Fatalf("CommittedEpoch(clicks) = %d, %v, %v; want 7", e, ok, err)
	}
}
