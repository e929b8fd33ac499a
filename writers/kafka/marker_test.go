package kafka_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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

// Open removes the staging files no transaction can commit any more (an
// auto-commit stream's, and unfinished ones) and keeps a transaction's
// precommitted file, which the journal may still commit.
func TestOpenRemovesDeadStagingFiles(t *testing.T) {
	mem := checkedMem(t)
	c := startCluster(t)
	topic := uniqueTopic("clean")
	if err := c.CreateTopic(topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	dir := filepath.Join(dataDir, "kafka", "ep")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{ // name → kept
		"auto-0123456789abcdef01234567.stage":  false,
		"auto-0123456789abcdef01234567.open":   false,
		"txn-0123456789abcdef01234567-3.open":  false,
		"txn-0123456789abcdef01234567-4.stage": true,
	}
	for name := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	openWriter(t, newConfig(c, topic, nil), dataDir, mem)
	for name, kept := range files {
		_, err := os.Stat(filepath.Join(dir, name))
		if kept != (err == nil) {
			t.Errorf("%s: kept %v, want %v", name, err == nil, kept)
		}
	}
}
