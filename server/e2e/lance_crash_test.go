package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/writers/lance/lanceformat"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// lanceEndpoint is the name of the Lance endpoint of writeLanceConfig.
const lanceEndpoint = "items"

// writeLanceConfig writes a config with one Lance append endpoint called
// items on the dataset folder datasetDir, free ports and dataDir,
// returning its path.
func writeLanceConfig(t *testing.T, dataDir, datasetDir string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\nhttp_listen: 127.0.0.1:0\ndata_dir: %s\nendpoints:\n", dataDir)
	fmt.Fprintf(&b, "  - name: %s\n    sink: lance\n    lance:\n      dataset_uri: file://%s\n      mode: append\n", lanceEndpoint, datasetDir)
	path := filepath.Join(t.TempDir(), "quiver.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// lanceDataset is what a reader of the dataset sees at its latest version.
type lanceDataset struct {
	version uint64
	ids     []int64           // every live id of every fragment, sorted
	props   map[string]string // transaction properties of the latest version
}

// readLance reads the latest version of the dataset with lanceformat.
func readLance(t *testing.T, datasetDir string) lanceDataset {
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
	txn, err := d.Transaction(ctx, b)
	if err != nil || txn == nil {
		t.Fatalf("transaction of version %d: %v, %v", d.Version(), txn, err)
	}
	out := lanceDataset{version: d.Version(), props: txn.Properties}
	for i := range d.Manifest.Fragments {
		rec, err := d.ReadFragment(ctx, b, &d.Manifest.Fragments[i], memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		out.ids = append(out.ids, rec.Column(0).(*array.Int64).Int64Values()...)
		rec.Release()
	}
	slices.Sort(out.ids)
	return out
}

// wantIDs checks that the dataset holds exactly the ids [0, n), once each.
func (d lanceDataset) wantIDs(t *testing.T, n int64) {
	t.Helper()
	if int64(len(d.ids)) != n {
		t.Fatalf("dataset holds %d rows, want %d", len(d.ids), n)
	}
	for i, id := range d.ids {
		if id != int64(i) {
			t.Fatalf("dataset rows: id %d at position %d: rows missing or duplicated", id, i)
		}
	}
}

// TestLanceKillAfterPrecommit: the server is killed right after journaling
// the precommit of a transaction whose Lance data files are written. The
// restarted server commits them in one version recording the epoch; the
// dataset holds the rows exactly once, a second commit adds no version,
// and replaying the whole epoch from scratch adds none either.
func TestLanceKillAfterPrecommit(t *testing.T) {
	ctx := ctxT(t)
	datasetDir := filepath.Join(t.TempDir(), "items.lance")
	cfg := writeLanceConfig(t, t.TempDir(), datasetDir)

	p := startQuiver(t, cfg, "QUIVER_TEST_CRASH=after-precommit")
	tx := dial(t, p).Txn("job-a", 1)
	if _, err := tx.Put(ctx, lanceEndpoint, idRows(t, 0, totalRows)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Precommit(ctx); err == nil {
		t.Fatal("precommit answered, but the crash point should have killed the server first")
	}
	p.waitExit(t)
	if _, err := os.Stat(filepath.Join(datasetDir, "_versions")); !os.IsNotExist(err) {
		t.Fatalf("a version exists before the commit (stat: %v)", err)
	}

	p = startQuiver(t, cfg)
	c := dial(t, p)
	tx = c.Txn("job-a", 1)
	st, err := tx.Commit(ctx, nil)
	if err != nil || st.State != quiver.StateCommitted {
		t.Fatalf("commit after restart: %+v, %v", st, err)
	}
	ec, ok := st.Endpoints[lanceEndpoint]
	if !ok || ec.Version == nil {
		t.Fatalf("commit answered no version for %s: %+v", lanceEndpoint, st)
	}
	ds := readLance(t, datasetDir)
	ds.wantIDs(t, totalRows)
	if int64(ds.version) != *ec.Version || ds.version != 1 {
		t.Fatalf("dataset at version %d, the commit answered %d; want 1", ds.version, *ec.Version)
	}
	if ds.props["quiver.writer"] != "job-a" || ds.props["quiver.epoch"] != "1" {
		t.Fatalf("version 1 records %v, want writer job-a epoch 1", ds.props)
	}

	st, err = tx.Commit(ctx, nil)
	if err != nil || st.State != quiver.StateCommitted {
		t.Fatalf("second commit: %+v, %v", st, err)
	}
	if again := readLance(t, datasetDir); again.version != ds.version {
		t.Fatalf("second commit moved the dataset from version %d to %d", ds.version, again.version)
	}

	// The pipeline replays the epoch from scratch.
	tx, err = c.Begin(ctx, "job-a", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Put(ctx, lanceEndpoint, idRows(t, 0, totalRows)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Precommit(ctx); err != nil {
		t.Fatal(err)
	}
	st, err = tx.Commit(ctx, nil)
	if err != nil || st.State != quiver.StateCommitted || !st.Replayed {
		t.Fatalf("replayed epoch: %+v, %v; want committed and replayed", st, err)
	}
	again := readLance(t, datasetDir)
	if again.version != ds.version {
		t.Fatalf("replaying the epoch moved the dataset from version %d to %d", ds.version, again.version)
	}
	again.wantIDs(t, totalRows)
	epoch, ok, err := c.CommittedEpoch(ctx, lanceEndpoint, "job-a")
	if err != nil || !ok || epoch != 1 {
		t.Fatalf("committed-epoch = %d, %v, %v; want 1", epoch, ok, err)
	}
	wantMetric(t, p, `quiver_lance_dataset_version{endpoint="items"}`, 1)
	// The restarted server's sink committed once; the second commit and
	// the replayed epoch never reached a new version.
	wantMetric(t, p, `quiver_lance_commits_total{endpoint="items",result="committed"}`, 1)
}
