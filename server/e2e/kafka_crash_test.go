package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiver-ingest/quiver/internal/devbroker"
	"github.com/quiver-ingest/quiver/internal/realkafka"
	"github.com/quiver-ingest/quiver/writers/kafka"
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

// kafkaTarget is a cluster the crash test runs against: the endpoint's
// brokers and security settings (YAML flow mappings), where the test reads
// (PLAINTEXT), and topics of its own on the run's shared real broker.
type kafkaTarget struct {
	read           []string
	settings       string // brokers, tls, sasl
	topic, markers string
}

// forEachKafka runs test against kfake, the run's real Apache Kafka broker
// over PLAINTEXT, and over SASL_SSL (SCRAM-SHA-512, password from a file).
func forEachKafka(t *testing.T, test func(t *testing.T, k kafkaTarget)) {
	brokers := func(addrs ...string) string {
		list, _ := json.Marshal(addrs)
		return "brokers: " + string(list)
	}
	t.Run("kfake", func(t *testing.T) {
		k := startKafka(t)
		test(t, kafkaTarget{read: k.Addrs(), settings: brokers(k.Addrs()...), topic: "orders", markers: kafka.DefaultMarkerTopic})
	})
	t.Run("kafka", func(t *testing.T) {
		b := realkafka.ForTest(t)
		test(t, kafkaTarget{read: []string{b.Plain}, settings: brokers(b.Plain), topic: "orders-plain", markers: "commits-plain"})
	})
	t.Run("kafka-sasl_ssl", func(t *testing.T) {
		b := realkafka.ForTest(t)
		test(t, kafkaTarget{read: []string{b.Plain}, topic: "orders-sasl", markers: "commits-sasl",
			settings: fmt.Sprintf("%s, tls: {ca_file: %q}, sasl: {mechanism: SCRAM-SHA-512, username: %s, password_file: %q}",
				brokers(b.SASLSSL), b.CAFile, realkafka.User, b.PasswordFile)})
	})
}

// endpoint is the config of the JSON Kafka endpoint "orders" on k.
func (k kafkaTarget) endpoint() string {
	return fmt.Sprintf("{name: orders, sink: kafka, kafka: {%s, topic: %s, marker_topic: %s, key_column: id, create_topic: {partitions: 3, replication_factor: 1}}}",
		k.settings, k.topic, k.markers)
}

// readIDs returns the ids of the records of topic a read_committed
// consumer sees, counting each.
func readIDs(t *testing.T, addrs []string, topic string) map[int64]int {
	t.Helper()
	realkafka.Settle(addrs, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := devbroker.ReadCommitted(ctx, addrs, topic)
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
func TestKafkaKillAfterPrecommit(t *testing.T) { forEachKafka(t, testKafkaKillAfterPrecommit) }

func testKafkaKillAfterPrecommit(t *testing.T, k kafkaTarget) {
	ctx := ctxT(t)
	cfg := writeConfig(t, t.TempDir(), devnullEndpoint, k.endpoint())
	crashAfterPrecommit(t, cfg, putTxn(t, "job-k", 1, "orders", rows(t)))
	if ids := readIDs(t, k.read, k.topic); len(ids) != 0 {
		t.Fatalf("%d records visible before commit", len(ids))
	}

	p := startQuiver(t, cfg)
	client := dial(t, p)
	tx := client.Txn("job-k", 1)
	for i := range 2 {
		commitOK(t, tx, fmt.Sprintf("commit %d", i))
	}
	wantExactlyOnce(t, readIDs(t, k.read, k.topic), totalRows)
	realkafka.Settle(k.read, k.markers)
	markers, err := devbroker.ReadCommitted(ctx, k.read, k.markers)
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
	wantExactlyOnce(t, readIDs(t, k.read, k.topic), totalRows)
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

// TestKafkaRefusedCredentials: an endpoint whose broker refuses its SASL
// password does not stop the server: it starts, serves its other
// endpoint, and answers puts to the refused one naming the failed
// authentication, never the password.
func TestKafkaRefusedCredentials(t *testing.T) {
	ctx := ctxT(t)
	b := realkafka.ForTest(t)
	wrong := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(wrong, []byte("not-"+b.Password), 0o600); err != nil {
		t.Fatal(err)
	}
	list, _ := json.Marshal([]string{b.SASLSSL})
	refused := fmt.Sprintf("{name: orders, sink: kafka, kafka: {brokers: %s, topic: refused, tls: {ca_file: %q}, sasl: {mechanism: SCRAM-SHA-256, username: %s, password_file: %q}}}",
		list, b.CAFile, realkafka.User, wrong)
	p := startQuiver(t, writeConfig(t, t.TempDir(), devnullEndpoint, refused))
	c := dial(t, p)
	if ack, err := c.Put(ctx, "devnull", rows(t)); err != nil || ack.Rows != totalRows {
		t.Fatalf("put to devnull: %+v, %v", ack, err)
	}
	_, err := c.Put(ctx, "orders", rows(t))
	if err == nil || !strings.Contains(err.Error(), "SASL authentication failed for user quiver with SCRAM-SHA-256") || strings.Contains(err.Error(), b.Password) {
		t.Fatalf("put to the refused endpoint: %v, want the failed authentication named, without the password", err)
	}
	if strings.Contains(p.output(), b.Password) {
		t.Fatal("the server's log shows the password")
	}
}
