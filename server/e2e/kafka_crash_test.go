package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiver-ingest/quiver/internal/devbroker"
)

// startKafka runs a kfake cluster in the test process, so that it outlives
// the quiver processes the test kills.
func startKafka(t *testing.T) *devbroker.Cluster {
	t.Helper()
	c, err := devbroker.Start(devbroker.Options{Listen: "127.0.0.1:0", Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// kafkaOrders is the config of a JSON Kafka endpoint "orders" on topic
// orders of brokers, whose topic is created with partitions partitions,
// for writeConfig.
func kafkaOrders(brokers []string, partitions int) string {
	list, _ := json.Marshal(brokers)
	return fmt.Sprintf("{name: orders, sink: kafka, kafka: {brokers: %s, topic: orders, key_column: id, create_topic: {partitions: %d, replication_factor: 1}}}", list, partitions)
}

// readIDs returns the ids of the records of topic a read_committed
// consumer sees, counting each.
func readIDs(t *testing.T, c *devbroker.Cluster, topic string) map[int64]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := devbroker.ReadCommitted(ctx, c.Addrs(), topic)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int64]int{}
	for _, r := range recs {
		var v struct{ ID int64 }
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("record %s: %v", r.Value, err)
		}
		ids[v.ID]++
	}
	return ids
}

func wantExactlyOnce(t *testing.T, ids map[int64]int, n int) {
	t.Helper()
	if len(ids) != n {
		t.Fatalf("%d distinct ids published, want %d", len(ids), n)
	}
	for id, k := range ids {
		if k != 1 {
			t.Fatalf("id %d published %d times", id, k)
		}
	}
}

// TestKafkaKillAfterPrecommit: the real binary is killed right after the
// precommit is journaled; the restarted server commits the staged records
// from the staging file, exactly once for read_committed readers, with one
// commit marker; committing again and replaying change nothing; a rolled
// back epoch publishes nothing.
func TestKafkaKillAfterPrecommit(t *testing.T) {
	ctx := ctxT(t)
	k := startKafka(t)
	cfg := writeConfig(t, t.TempDir(), devnullEndpoint, kafkaOrders(k.Addrs(), 3))
	crashAfterPrecommit(t, cfg, putTxn(t, "job-k", 1, "orders", rows(t)))
	if ids := readIDs(t, k, "orders"); len(ids) != 0 {
		t.Fatalf("%d records visible before commit", len(ids))
	}

	p := startQuiver(t, cfg)
	client := dial(t, p)
	tx := client.Txn("job-k", 1)
	for i := range 2 {
		commitOK(t, tx, fmt.Sprintf("commit %d", i))
	}
	wantExactlyOnce(t, readIDs(t, k, "orders"), totalRows)
	markers, err := devbroker.ReadCommitted(ctx, k.Addrs(), "_quiver_commits")
	if err != nil || len(markers) != 1 {
		t.Fatalf("markers %v, %v: want exactly one", markers, err)
	}
	wantCommittedEpoch(t, client, "orders", "job-k", 1)

	// Replaying epoch 1 stages nothing and publishes nothing.
	if _, err := tx.Put(ctx, "orders", rows(t)); err != nil {
		t.Fatal(err)
	}
	commitOK(t, tx, "replayed commit")
	// A rolled back epoch publishes nothing.
	tx2 := client.Txn("job-k", 2)
	if _, err := tx2.Put(ctx, "orders", rows(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx2.Precommit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tx2.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wantExactlyOnce(t, readIDs(t, k, "orders"), totalRows)
}

// TestKafkaBrokerDown: with Kafka gone, an auto-commit stream fails with
// Unavailable saying how many records were acknowledged, once the producer
// has stopped retrying them (within seconds, not sarama's default minutes),
// and the server keeps serving its other endpoints.
func TestKafkaBrokerDown(t *testing.T) {
	ctx := ctxT(t)
	k := startKafka(t)
	p := startQuiver(t, writeConfig(t, t.TempDir(), devnullEndpoint, kafkaOrders(k.Addrs(), 3)))
	c := dial(t, p)
	if _, err := c.Put(ctx, "orders", rows(t)); err != nil {
		t.Fatal(err)
	}
	k.Close()
	down := time.Now()
	_, err := c.Put(ctx, "orders", rows(t))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), fmt.Sprintf("0 of %d records acknowledged", totalRows)) ||
		!strings.Contains(err.Error(), "stopped retrying") {
		t.Fatalf("put with Kafka down: %v, want Unavailable with the acknowledged count, saying the producer stopped retrying", err)
	}
	if d := time.Since(down); d > 15*time.Second {
		t.Fatalf("the failed put took %s after Kafka went down, want the answer within 15s", d)
	}
	if ack, err := c.Put(ctx, "devnull", rows(t)); err != nil || ack.Rows != totalRows {
		t.Fatalf("put to devnull after the Kafka failure: %+v, %v", ack, err)
	}
}
