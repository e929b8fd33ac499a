package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/writers/lance/lanceformat"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// mergeEndpoint is the Lance merge_insert endpoint of
// writeLanceMergeConfig; lanceEndpoint appends to the same dataset.
const mergeEndpoint = "merged"

// writeLanceMergeConfig writes a config with two Lance endpoints on the
// dataset folder datasetDir: lanceEndpoint (append) and mergeEndpoint
// (merge_insert on id, update_all + insert_all), returning its path.
func writeLanceMergeConfig(t *testing.T, dataDir, datasetDir string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\nhttp_listen: 127.0.0.1:0\ndata_dir: %s\nendpoints:\n", dataDir)
	fmt.Fprintf(&b, "  - name: %s\n    sink: lance\n    lance: {dataset_uri: \"file://%s\", mode: append}\n", lanceEndpoint, datasetDir)
	fmt.Fprintf(&b, "  - name: %s\n    sink: lance\n    lance: {dataset_uri: \"file://%s\", mode: merge_insert, on: [id]}\n", mergeEndpoint, datasetDir)
	path := filepath.Join(t.TempDir(), "quiver.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// readLanceRows returns the latest version and id -> v of its live rows,
// failing on an id that is live twice.
func readLanceRows(t *testing.T, datasetDir string) (uint64, map[int64]string) {
	t.Helper()
	ctx := context.Background()
	b, err := storage.Open(ctx, "file://"+datasetDir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d, err := lanceformat.Latest(ctx, b)
	if err != nil {
		t.Fatalf("load dataset: %v", err)
	}
	out := map[int64]string{}
	for i := range d.Manifest.Fragments {
		rec, err := d.ReadFragment(ctx, b, &d.Manifest.Fragments[i], memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		for r := range int(rec.NumRows()) {
			id := rec.Column(0).(*array.Int64).Value(r)
			if _, dup := out[id]; dup {
				t.Fatalf("version %d: id %d is live twice", d.Version(), id)
			}
			out[id] = rec.Column(1).(*array.String).Value(r)
		}
		rec.Release()
	}
	return d.Version(), out
}

// mergeChanges returns the rows of ids [start, start+n) with v prefix<id>.
func mergeChanges(prefix string, start, n int64) []change {
	out := make([]change, 0, n)
	for id := start; id < start+n; id++ {
		out = append(out, change{id: id, v: fmt.Sprintf("%s%d", prefix, id)})
	}
	return out
}

// TestLanceMergeKillAfterPrecommit: the server is killed right after
// journaling the precommit of a merge_insert transaction (its data and
// deletion files are written). The restarted server commits the merge in
// one Update version recording the epoch; every key is live once with the
// merged value; a second commit and a replay of the whole epoch add no
// version and change no row; the next epoch merges on top (through the
// restarted server's key index).
func TestLanceMergeKillAfterPrecommit(t *testing.T) {
	ctx := ctxT(t)
	datasetDir := filepath.Join(t.TempDir(), "items.lance")
	cfg := writeLanceMergeConfig(t, t.TempDir(), datasetDir)

	p := startQuiver(t, cfg)
	c := dial(t, p)
	seed := mergeChanges("s", 0, 100)
	stx := c.Txn("seed", 1)
	if _, err := stx.Put(ctx, lanceEndpoint, changelog(t, seed)); err != nil {
		t.Fatal(err)
	}
	if _, err := stx.Precommit(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := stx.Commit(ctx, nil); err != nil || st.State != quiver.StateCommitted {
		t.Fatalf("seed commit: %+v, %v", st, err)
	}
	p.kill()

	// Ids 50..149: half update, half insert.
	merge := mergeChanges("m", 50, 100)
	p = startQuiver(t, cfg, "QUIVER_TEST_CRASH=after-precommit")
	tx := dial(t, p).Txn("job-m", 1)
	if _, err := tx.Put(ctx, mergeEndpoint, changelog(t, merge)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Precommit(ctx); err == nil {
		t.Fatal("precommit answered, but the crash point should have killed the server first")
	}
	p.waitExit(t)
	want := map[int64]string{}
	for _, ch := range append(seed, merge...) {
		want[ch.id] = ch.v
	}
	if v, rows := readLanceRows(t, datasetDir); v != 1 || len(rows) != 100 {
		t.Fatalf("before the commit the dataset is at version %d with %d rows, want 1 and 100", v, len(rows))
	}

	p = startQuiver(t, cfg)
	c = dial(t, p)
	tx = c.Txn("job-m", 1)
	st, err := tx.Commit(ctx, nil)
	if err != nil || st.State != quiver.StateCommitted {
		t.Fatalf("commit after restart: %+v, %v", st, err)
	}
	v, rows := readLanceRows(t, datasetDir)
	if ec := st.Endpoints[mergeEndpoint]; ec.Version == nil || int64(v) != *ec.Version || v != 2 {
		t.Fatalf("dataset at version %d, the commit answered %+v; want 2", v, st.Endpoints)
	}
	if !maps.Equal(rows, want) {
		t.Fatalf("after the merge: %d rows, want %d (ids 0..149, 50..149 merged)", len(rows), len(want))
	}
	ds := readLance(t, datasetDir)
	if ds.props["quiver.writer"] != "job-m" || ds.props["quiver.epoch"] != "1" {
		t.Fatalf("version 2 records %v, want writer job-m epoch 1", ds.props)
	}

	if st, err := tx.Commit(ctx, nil); err != nil || st.State != quiver.StateCommitted {
		t.Fatalf("second commit: %+v, %v", st, err)
	}
	// The pipeline replays the epoch from scratch, with other values: the
	// replay is recognized and changes nothing.
	rtx, err := c.Begin(ctx, "job-m", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rtx.Put(ctx, mergeEndpoint, changelog(t, mergeChanges("replay", 50, 100))); err != nil {
		t.Fatal(err)
	}
	if _, err := rtx.Precommit(ctx); err != nil {
		t.Fatal(err)
	}
	st, err = rtx.Commit(ctx, nil)
	if err != nil || st.State != quiver.StateCommitted || !st.Replayed {
		t.Fatalf("replayed epoch: %+v, %v; want committed and replayed", st, err)
	}
	if v, rows := readLanceRows(t, datasetDir); v != 2 || !maps.Equal(rows, want) {
		t.Fatalf("the second commit or the replay changed the dataset: version %d, %d rows", v, len(rows))
	}
	if epoch, ok, err := c.CommittedEpoch(ctx, mergeEndpoint, "job-m"); err != nil || !ok || epoch != 1 {
		t.Fatalf("committed-epoch = %d, %v, %v; want 1", epoch, ok, err)
	}

	// The next epoch: update 0..9 and 140..149, insert 150..159.
	next := append(mergeChanges("n", 0, 10), mergeChanges("n", 140, 20)...)
	tx = c.Txn("job-m", 2)
	if _, err := tx.Put(ctx, mergeEndpoint, changelog(t, next)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Precommit(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := tx.Commit(ctx, nil); err != nil || st.State != quiver.StateCommitted {
		t.Fatalf("epoch 2: %+v, %v", st, err)
	}
	for _, ch := range next {
		want[ch.id] = ch.v
	}
	if v, rows := readLanceRows(t, datasetDir); v != 3 || !maps.Equal(rows, want) {
		t.Fatalf("after epoch 2: version %d, %d rows; want version 3, %d rows", v, len(rows), len(want))
	}
	// The restarted server's sink committed epochs 1 and 2: 50+20 updates
	// and 50+10 inserts.
	wantMetric(t, p, `quiver_lance_merge_rows_total{action="updated",endpoint="merged"}`, 70)
	wantMetric(t, p, `quiver_lance_merge_rows_total{action="inserted",endpoint="merged"}`, 60)
	wantMetric(t, p, `quiver_lance_commits_total{endpoint="merged",result="committed"}`, 2)
}
