package kafka_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/quiver-ingest/quiver/internal/devbroker"
	"github.com/quiver-ingest/quiver/internal/realkafka"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/kafka"
)

// startCluster starts a one-broker kfake cluster with 3-partition topics,
// closed at the end of the test.
func startCluster(t testing.TB, topics ...string) *devbroker.Cluster {
	t.Helper()
	c, err := devbroker.Start(devbroker.Options{Listen: "127.0.0.1:0", Partitions: 3, Topics: topics})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

var topicSeq atomic.Int64

// uniqueTopic returns a topic name no other test uses.
// The process id keeps test binaries sharing the run's real broker apart.
func uniqueTopic(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), topicSeq.Add(1))
}

// newConfig returns a valid config for topic on c, with changes applied.
func newConfig(c cluster, topic string, change func(*kafka.Config)) *kafka.Config {
	cfg := kafka.NewConfig()
	cfg.Brokers = c.Addrs()
	if rc, ok := c.(realCluster); ok {
		rc.secure(cfg)
	}
	cfg.Topic = topic
	cfg.MarkerTopic = topic + "-commits"
	if change != nil {
		change(cfg)
	}
	return cfg
}

// openWriter builds and opens a writer of cfg with data under dataDir,
// closed at the end of the test.
func openWriter(t testing.TB, cfg *kafka.Config, dataDir string, mem memory.Allocator) *kafka.Writer {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	w, err := kafka.New(cfg, writers.Env{Endpoint: "ep", DataDir: dataDir, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Open(context.Background()); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { w.Close(context.Background()) })
	return w
}

// readCommitted returns every record of topic a read_committed consumer
// sees once the transactions open on it have ended (realkafka.Settle), in partition
// then offset order.
func readCommitted(t testing.TB, addrs []string, topic string) []*kgo.Record {
	t.Helper()
	realkafka.Settle(addrs, topic)
	return readCommittedNow(t, addrs, topic)
}

// readCommittedNow returns what a read_committed consumer sees now, with
// transactions still open.
func readCommittedNow(t testing.TB, addrs []string, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	recs, err := devbroker.ReadCommitted(ctx, addrs, topic)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// rowsSchema is the schema of userRows.
var rowsSchema = arrow.NewSchema([]arrow.Field{
	{Name: "user", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// record builds a batch from JSON rows of schema, released at test end.
func record(t testing.TB, mem memory.Allocator, schema *arrow.Schema, rows string) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(mem, schema, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Release)
	return rec
}

// commitAuto writes recs as one auto-commit stream and commits it.
func commitAuto(t testing.TB, w writers.Writer, recs ...arrow.RecordBatch) error {
	t.Helper()
	ctx := context.Background()
	key := writers.AutoKey(fmt.Sprintf("s-%d", topicSeq.Add(1)))
	for _, rec := range recs {
		if err := w.Write(ctx, key, rec); err != nil {
			w.Rollback(ctx, key)
			return err
		}
	}
	d, err := w.Precommit(ctx, key)
	if err != nil {
		return err
	}
	_, err = w.Commit(ctx, key, []writers.Descriptor{d})
	return err
}

func checkedMem(t testing.TB) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}
