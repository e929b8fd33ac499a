package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

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

// A transaction left open on the marker topic (a commit that crashed, until
// the broker aborts it, or one whose data is still being delivered) holds
// its last stable offset, and the markers past it cannot be read yet. A
// marker read used to answer from the records before it after a few
// seconds: a commit whose answer was lost was then taken for undone and
// published again. A read asking about a writer with a record past that
// offset now fails Unavailable until the transaction ends; reads about
// other writers answer.
func TestMarkersHiddenByAnOpenTransaction(t *testing.T) {
	forPlainClusters(t, testMarkersHiddenByAnOpenTransaction)
}

func testMarkersHiddenByAnOpenTransaction(t *testing.T, c cluster) {
	mem := checkedMem(t)
	cfg := onePartition(c, "hidden")
	w, _ := openEndpoint(t, cfg, "ep", mem)
	ctx := context.Background()
	commitTxn(t, w, mem, writers.TxnKey{Writer: "job", Epoch: 1}, `[{"user":"a","n":1}]`)

	// job's next marker, in a transaction left open.
	stuck, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.TransactionalID("stuck-"+cfg.Topic), kgo.TransactionTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	if err := stuck.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	rec := &kgo.Record{Topic: cfg.MarkerTopic, Key: []byte("ep/job"), Value: []byte(`{"endpoint":"ep","writer":"job","epoch":2}`)}
	if err := stuck.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Another server's view: no cached epoch, a read of the markers.
	other, _ := openEndpoint(t, cfg, "ep", mem)
	if _, _, err := other.CommittedEpoch(ctx, "job"); !errors.Is(err, writers.ErrUnavailable) || !strings.Contains(err.Error(), "still open") {
		t.Fatalf("a read of job's markers behind its open transaction: %v, want ErrUnavailable", err)
	}
	if _, found, err := other.CommittedEpoch(ctx, "someone-else"); err != nil || found {
		t.Fatalf("a read of another writer's markers: found %v, %v; want none, no error", found, err)
	}
	if err := stuck.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	if epoch, ok, err := other.CommittedEpoch(ctx, "job"); err != nil || !ok || epoch != 1 {
		t.Fatalf("marker read once the transaction ended: epoch %d, %v, %v; want 1", epoch, ok, err)
	}
}

// TestMarkerReadsGoOn: a marker read goes on from where the last one
// ended (a group commit reads the markers every interval; the topic holds
// a record per writer that ever committed) and sees what another server
// committed since; a marker topic deleted and created again (another
// topic id) is read from its start, its old markers forgotten.
func TestMarkerReadsGoOn(t *testing.T) { forPlainClusters(t, testMarkerReadsGoOn) }

func testMarkerReadsGoOn(t *testing.T, c cluster) {
	mem := checkedMem(t)
	cfg := onePartition(c, "markers")
	w, reg := openEndpoint(t, cfg, "ep", mem)
	ctx := context.Background()
	for i := range int64(5) {
		commitTxn(t, w, mem, writers.TxnKey{Writer: fmt.Sprint("w", i), Epoch: 1}, `[{"user":"a","n":1}]`)
	}
	if epoch, ok, err := w.CommittedEpoch(ctx, "w0"); err != nil || !ok || epoch != 1 {
		t.Fatalf("w0's committed epoch: %d, %v, %v; want 1", epoch, ok, err)
	}
	first := counter(t, reg, "quiver_kafka_marker_records_read_total")
	if first < 5 {
		t.Fatalf("the first read read %d records of the marker topic, want its 5 markers", first)
	}
	other, _ := openEndpoint(t, cfg, "ep", mem) // another server
	commitTxn(t, other, mem, writers.TxnKey{Writer: "w0", Epoch: 2}, `[{"user":"b","n":2}]`)
	if epoch, ok, err := w.CommittedEpoch(ctx, "w0"); err != nil || !ok || epoch != 2 {
		t.Fatalf("w0's committed epoch after another server committed 2: %d, %v, %v; want 2", epoch, ok, err)
	}
	if again := counter(t, reg, "quiver_kafka_marker_records_read_total") - first; again < 1 || again > 3 {
		t.Errorf("the second read read %d records, want only those since the first (the new marker)", again)
	}

	// The marker topic deleted and created again, with more records than
	// this server read of the old one before it asks again.
	adm := kadm.NewClient(newKgo(t, c))
	if _, err := adm.DeleteTopics(ctx, cfg.MarkerTopic); err != nil {
		t.Fatal(err)
	}
	third, _ := openEndpoint(t, cfg, "ep", mem) // creates it again
	for i := range int64(8) {
		commitTxn(t, third, mem, writers.TxnKey{Writer: fmt.Sprint("x", i), Epoch: 3}, `[{"user":"c","n":3}]`)
	}
	if epoch, ok, err := w.CommittedEpoch(ctx, "x0"); err != nil || !ok || epoch != 3 {
		t.Fatalf("x0's committed epoch on the new marker topic: %d, %v, %v; want 3", epoch, ok, err)
	}
	if _, ok, err := w.CommittedEpoch(ctx, "w0"); err != nil || ok {
		t.Fatalf("w0's marker of the deleted topic: found %v, %v; want forgotten", ok, err)
	}
}

// newKgo returns a franz-go client of c, closed at the end of the test.
func newKgo(t *testing.T, c cluster) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// onePartition is the config of a new one-partition topic on c, created
// by the sink.
func onePartition(c cluster, prefix string) *kafka.Config {
	return newConfig(c, uniqueTopic(prefix), func(cfg *kafka.Config) {
		cfg.CreateTopic = &kafka.CreateTopic{Partitions: 1, ReplicationFactor: 1}
	})
}
