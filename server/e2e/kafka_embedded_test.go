package e2e

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/quiver-ingest/quiver/internal/devbroker"
)

// freePort returns a 127.0.0.1 port nobody listens on now. Another process
// could take it before the server binds it; acceptable in a test.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeEmbeddedConfig writes a config whose embedded broker listens on
// listen, with endpoint devnull and, when brokers is not empty, a Kafka
// endpoint "orders" (6 partitions) on brokers.
func writeEmbeddedConfig(t *testing.T, listen, brokers string) string {
	t.Helper()
	endpoints := []string{devnullEndpoint}
	if brokers != "" {
		endpoints = append(endpoints, kafkaOrders([]string{brokers}, 6))
	}
	return writeConfigWith(t, t.TempDir(), fmt.Sprintf("embedded_kafka: {enabled: true, listen: %q, partitions: 6}\n", listen), endpoints...)
}

// TestKafkaEmbeddedBroker: `quiver serve` with embedded_kafka enabled
// serves a Kafka endpoint on its own broker: an auto-commit stream and a
// transaction land in the topic, each row once, readable by any client on
// the configured address.
func TestKafkaEmbeddedBroker(t *testing.T) {
	ctx := ctxT(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := startQuiver(t, writeEmbeddedConfig(t, addr, addr))
	c := dial(t, p)
	if ack, err := c.Put(ctx, "orders", rows(t)); err != nil || ack.Rows != totalRows {
		t.Fatalf("put: %+v, %v", ack, err)
	}
	precommitCommit(t, putTxn(t, "job-e", 1, "orders", rows(t))(c), "commit")

	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	recs, err := devbroker.ReadCommitted(rctx, []string{addr}, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2*totalRows {
		t.Fatalf("%d records on the embedded broker, want %d (a stream and a transaction of %d rows)", len(recs), 2*totalRows, totalRows)
	}
	keys := map[string]int{}
	partitions := map[int32]bool{}
	for _, r := range recs {
		keys[string(r.Key)]++
		partitions[r.Partition] = true
	}
	if len(keys) != totalRows {
		t.Fatalf("%d distinct keys, want %d", len(keys), totalRows)
	}
	for k, n := range keys {
		if n != 2 {
			t.Fatalf("key %s published %d times, want twice (once per write)", k, n)
		}
	}
	if len(partitions) != 6 {
		t.Fatalf("records on %d partitions, want all 6", len(partitions))
	}
}

var embeddedAddrRE = regexp.MustCompile(`embedded kafka listening.*addrs="?\[([^\]" ]+)\]`)

// TestKafkaEmbeddedRandomPort: with listen port 0 the embedded broker
// takes a free port and the server logs it; the broker answers there.
func TestKafkaEmbeddedRandomPort(t *testing.T) {
	p := startQuiver(t, writeEmbeddedConfig(t, "127.0.0.1:0", ""))
	m := embeddedAddrRE.FindStringSubmatch(p.output())
	if m == nil {
		t.Fatalf("no \"embedded kafka listening\" line with the address:\n%s", p.output())
	}
	if strings.HasSuffix(m[1], ":0") {
		t.Fatalf("logged address %s is not the bound one", m[1])
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctxT(t), 20*time.Second)
	defer cancel()
	brokers, err := kadm.NewClient(cl).ListBrokers(ctx)
	if err != nil || len(brokers) != 1 {
		t.Fatalf("brokers at %s: %v, %v; want one", m[1], brokers, err)
	}
}
