package kafka_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/kafka"
)

// A transaction whose commit marker the marker topic would refuse is
// refused at precommit: once decided, its commit could never succeed and
// could no longer be rolled back.
func TestPrecommitRefusesAMarkerTheTopicRefuses(t *testing.T) {
	mem := checkedMem(t)
	c := startCluster(t)
	topic := uniqueTopic("marker")
	if err := c.CreateTopic(topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateTopic(topic+"-commits", 1, map[string]string{"cleanup.policy": "compact", "max.message.bytes": "300"}); err != nil {
		t.Fatal(err)
	}
	w := openWriter(t, newConfig(c, topic, nil), t.TempDir(), mem)
	ctx := context.Background()

	long := writers.TxnKey{Writer: strings.Repeat("w", 200), Epoch: 1}
	if err := w.Write(ctx, long, record(t, mem, rowsSchema, `[{"user":"a","n":1}]`)); err != nil {
		t.Fatal(err)
	}
	_, err := w.Precommit(ctx, long)
	if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "max.message.bytes") {
		t.Fatalf("precommit of a %d-byte writer: %v, want ErrInvalid naming max.message.bytes", len(long.Writer), err)
	}
	if err := w.Rollback(ctx, long); err != nil {
		t.Fatal(err)
	}
	// A short writer's marker fits and commits.
	commitTxn(t, w, mem, writers.TxnKey{Writer: "job", Epoch: 1}, `[{"user":"a","n":1}]`)
}

// A topic whose max.message.bytes cannot hold any record is refused at
// Open instead of failing every commit.
func TestOpenRefusesATopicThatHoldsNoRecord(t *testing.T) {
	c := startCluster(t)
	topic := uniqueTopic("tiny")
	if err := c.CreateTopic(topic, 1, map[string]string{"max.message.bytes": "40"}); err != nil {
		t.Fatal(err)
	}
	cfg := newConfig(c, topic, nil)
	w, err := kafka.New(cfg, writers.Env{Endpoint: "ep", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	if err := w.Open(context.Background()); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "max.message.bytes 40") {
		t.Fatalf("Open: %v, want ErrInvalid naming max.message.bytes 40", err)
	}
}
