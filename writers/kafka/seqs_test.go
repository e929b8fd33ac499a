package kafka_test

import (
	"context"
	"errors"
	"testing"

	"github.com/quiver-ingest/quiver/writers"
)

// TestCommitSeqs: a group commit of continuous streams publishes the
// group's records and each writer's seq marker in one Kafka transaction,
// which CommittedEpoch reads back; committing the same seqs again is a
// replay that publishes nothing; seqs some of which are recorded are
// refused and publish nothing.
func TestCommitSeqs(t *testing.T) { forPlainClusters(t, testCommitSeqs) }

func testCommitSeqs(t *testing.T, c cluster) {
	mem := checkedMem(t)
	topic := uniqueTopic("seqs")
	for _, tp := range []string{topic, topic + "-commits"} {
		if err := c.CreateTopic(tp, 1, map[string]string{"cleanup.policy": map[bool]string{true: "compact", false: "delete"}[tp != topic]}); err != nil {
			t.Fatal(err)
		}
	}
	w := openWriter(t, newConfig(c, topic, nil), t.TempDir(), mem)
	ctx := context.Background()
	group := func(rows string, seqs []writers.WriterSeq) (writers.CommitInfo, error) {
		t.Helper()
		key := writers.AutoKey(uniqueTopic("group"))
		if err := w.Write(ctx, key, record(t, mem, rowsSchema, rows)); err != nil {
			t.Fatal(err)
		}
		desc, err := w.Precommit(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return w.CommitSeqs(ctx, key, []writers.Descriptor{desc}, seqs)
	}

	if _, err := group(`[{"user":"a","n":1},{"user":"b","n":2}]`, []writers.WriterSeq{{Writer: "c1", First: 0, Last: 4}, {Writer: "c2", First: 0, Last: 0}}); err != nil {
		t.Fatal(err)
	}
	for writer, want := range map[string]int64{"c1": 4, "c2": 0} {
		if e, ok, err := w.CommittedEpoch(ctx, writer); err != nil || !ok || e != want {
			t.Fatalf("CommittedEpoch(%s) = %d %v %v, want %d", writer, e, ok, err, want)
		}
	}
	// A retry of the same seqs (an unknown outcome) publishes nothing.
	if info, err := group(`[{"user":"x","n":9}]`, []writers.WriterSeq{{Writer: "c1", First: 0, Last: 4}, {Writer: "c2", First: 0, Last: 0}}); err != nil || !info.Replayed {
		t.Fatalf("replayed seqs: %+v %v, want Replayed", info, err)
	}
	// Seqs partly recorded (another server committed some): refused.
	if _, err := group(`[{"user":"y","n":9}]`, []writers.WriterSeq{{Writer: "c1", First: 3, Last: 6}}); !errors.Is(err, writers.ErrConflict) {
		t.Fatalf("partly recorded seqs: %v, want ErrConflict", err)
	}
	if _, err := group(`[{"user":"c","n":3}]`, []writers.WriterSeq{{Writer: "c1", First: 5, Last: 5}}); err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, r := range readCommitted(t, c.Addrs(), topic) {
		users = append(users, string(r.Value))
	}
	if len(users) != 3 {
		t.Fatalf("topic holds %d records, want 3 (the replayed and refused groups publish nothing): %q", len(users), users)
	}
	if e, _, _ := w.CommittedEpoch(ctx, "c1"); e != 5 {
		t.Fatalf("CommittedEpoch(c1) = %d, want 5", e)
	}
}
