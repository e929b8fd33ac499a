package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// lanceEndpoint is the name of the Lance endpoint of lanceAppend.
const lanceEndpoint = "items"

// lanceAppend is the config of the Lance append endpoint lanceEndpoint on
// the dataset root datasetDir (a folder or a URI, see rootURI), for
// writeConfig.
func lanceAppend(datasetDir string) string {
	return fmt.Sprintf(`{name: %s, sink: lance, lance: {dataset_uri: "%s", mode: append}}`, lanceEndpoint, rootURI(datasetDir))
}

// lanceDataset is what a reader of the dataset sees at its latest version.
type lanceDataset struct {
	version uint64
	ids     []int64           // every live id of every fragment, sorted
	props   map[string]string // transaction properties of the latest version
}

// readLance reads the latest version of the dataset with lancetable.
func readLance(t *testing.T, datasetDir string) lanceDataset {
	t.Helper()
	var out lanceDataset
	eachFragment(t, datasetDir, func(d *lancetable.Dataset, b *storage.Bucket) {
		txn, err := d.Transaction(context.Background(), b)
		if err != nil || txn == nil {
			t.Fatalf("transaction of version %d: %v, %v", d.Version(), txn, err)
		}
		out = lanceDataset{version: d.Version(), props: txn.Properties}
	}, func(rec arrow.RecordBatch) {
		out.ids = append(out.ids, rec.Column(0).(*array.Int64).Int64Values()...)
	})
	slices.Sort(out.ids)
	return out
}

// eachFragment loads the latest version of the dataset, calls loaded with
// it and then fn with every fragment read in full.
func eachFragment(t *testing.T, datasetDir string, loaded func(d *lancetable.Dataset, b *storage.Bucket), fn func(rec arrow.RecordBatch)) {
	t.Helper()
	ctx := context.Background()
	b, err := storage.Open(ctx, rootURI(datasetDir), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d, err := lancetable.Latest(ctx, b)
	if err != nil {
		t.Fatalf("load dataset: %v", err)
	}
	loaded(d, b)
	for i := range d.Manifest.Fragments {
		recs, err := d.ReadFragment(ctx, b, &d.Manifest.Fragments[i], memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			fn(rec)
			rec.Release()
		}
	}
}

// wantIDs checks that the dataset holds exactly the ids [0, n), once each.
func (d lanceDataset) wantIDs(t *testing.T, n int64) {
	t.Helper()
	wantIDRange(t, "dataset", d.ids, n)
}

// TestLanceKillAfterPrecommit: the server is killed right after journaling
// the precommit of a transaction whose Lance data files are written. The
// restarted server commits them in one version recording the epoch; the
// dataset holds the rows exactly once, a second commit adds no version,
// and replaying the whole epoch from scratch adds none either.
func TestLanceKillAfterPrecommit(t *testing.T) {
	datasetDir := filepath.Join(t.TempDir(), "items.lance")
	cfg := writeConfig(t, t.TempDir(), lanceAppend(datasetDir))
	crashAfterPrecommit(t, cfg, putTxn(t, "job-a", 1, lanceEndpoint, idRows(t, 0, totalRows)))
	if _, err := os.Stat(filepath.Join(datasetDir, "_versions")); !os.IsNotExist(err) {
		t.Fatalf("a version exists before the commit (stat: %v)", err)
	}

	p := startQuiver(t, cfg)
	c := dial(t, p)
	tx := c.Txn("job-a", 1)
	version := endpointVersion(t, commitOK(t, tx, "commit after restart"), lanceEndpoint)
	ds := readLance(t, datasetDir)
	ds.wantIDs(t, totalRows)
	if int64(ds.version) != version || ds.version != 1 {
		t.Fatalf("dataset at version %d, the commit answered %d; want 1", ds.version, version)
	}
	if ds.props["quiver.writer"] != "job-a" || ds.props["quiver.epoch"] != "1" {
		t.Fatalf("version 1 records %v, want writer job-a epoch 1", ds.props)
	}

	commitOK(t, tx, "second commit")
	if again := readLance(t, datasetDir); again.version != ds.version {
		t.Fatalf("second commit moved the dataset from version %d to %d", ds.version, again.version)
	}

	// The pipeline replays the epoch from scratch.
	wantReplayed(t, runEpoch(t, c, "job-a", 1, lanceEndpoint, idRows(t, 0, totalRows)))
	again := readLance(t, datasetDir)
	if again.version != ds.version {
		t.Fatalf("replaying the epoch moved the dataset from version %d to %d", ds.version, again.version)
	}
	again.wantIDs(t, totalRows)
	wantCommittedEpoch(t, c, lanceEndpoint, "job-a", 1)
	wantMetric(t, p, `quiver_lance_dataset_version{endpoint="items"}`, 1)
	// The restarted server's sink committed once; the second commit and
	// the replayed epoch never reached a new version.
	wantMetric(t, p, `quiver_lance_commits_total{endpoint="items",result="committed"}`, 1)
}
