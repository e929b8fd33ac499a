package e2e

import (
	"fmt"
	"maps"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// mergeEndpoint is the Lance merge_insert endpoint of lanceMerge;
// lanceEndpoint appends to the same dataset.
const mergeEndpoint = "merged"

// lanceMerge is the config of the Lance endpoint mergeEndpoint
// (merge_insert on id, update_all + insert_all) on the dataset folder
// datasetDir, for writeConfig.
func lanceMerge(datasetDir string) string {
	return fmt.Sprintf(`{name: %s, sink: lance, lance: {dataset_uri: "file://%s", mode: merge_insert, on: [id]}}`, mergeEndpoint, datasetDir)
}

// readLanceRows returns the latest version and id -> v of its live rows,
// failing on an id that is live twice.
func readLanceRows(t *testing.T, datasetDir string) (uint64, map[int64]string) {
	t.Helper()
	var version uint64
	out := map[int64]string{}
	eachFragment(t, datasetDir, func(d *lancetable.Dataset, _ *storage.Bucket) {
		version = d.Version()
	}, func(rec arrow.RecordBatch) {
		for r := range int(rec.NumRows()) {
			id := rec.Column(0).(*array.Int64).Value(r)
			if _, dup := out[id]; dup {
				t.Fatalf("version %d: id %d is live twice", version, id)
			}
			out[id] = rec.Column(1).(*array.String).Value(r)
		}
	})
	return version, out
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
	datasetDir := filepath.Join(t.TempDir(), "items.lance")
	cfg := writeConfig(t, t.TempDir(), lanceAppend(datasetDir), lanceMerge(datasetDir))

	p := startQuiver(t, cfg)
	c := dial(t, p)
	seed := mergeChanges("s", 0, 100)
	precommitCommit(t, putTxn(t, "seed", 1, lanceEndpoint, changelog(t, seed))(c), "seed commit")
	p.kill()

	// Ids 50..149: half update, half insert.
	merge := mergeChanges("m", 50, 100)
	crashAfterPrecommit(t, cfg, putTxn(t, "job-m", 1, mergeEndpoint, changelog(t, merge)))
	want := map[int64]string{}
	for _, ch := range append(seed, merge...) {
		want[ch.id] = ch.v
	}
	if v, rows := readLanceRows(t, datasetDir); v != 1 || len(rows) != 100 {
		t.Fatalf("before the commit the dataset is at version %d with %d rows, want 1 and 100", v, len(rows))
	}

	p = startQuiver(t, cfg)
	c = dial(t, p)
	tx := c.Txn("job-m", 1)
	version := endpointVersion(t, commitOK(t, tx, "commit after restart"), mergeEndpoint)
	v, rows := readLanceRows(t, datasetDir)
	if int64(v) != version || v != 2 {
		t.Fatalf("dataset at version %d, the commit answered %d; want 2", v, version)
	}
	if !maps.Equal(rows, want) {
		t.Fatalf("after the merge: %d rows, want %d (ids 0..149, 50..149 merged)", len(rows), len(want))
	}
	ds := readLance(t, datasetDir)
	if ds.props["quiver.writer"] != "job-m" || ds.props["quiver.epoch"] != "1" {
		t.Fatalf("version 2 records %v, want writer job-m epoch 1", ds.props)
	}

	commitOK(t, tx, "second commit")
	// The pipeline replays the epoch from scratch, with other values: the
	// replay is recognized and changes nothing.
	wantReplayed(t, runEpoch(t, c, "job-m", 1, mergeEndpoint, changelog(t, mergeChanges("replay", 50, 100))))
	if v, rows := readLanceRows(t, datasetDir); v != 2 || !maps.Equal(rows, want) {
		t.Fatalf("the second commit or the replay changed the dataset: version %d, %d rows", v, len(rows))
	}
	wantCommittedEpoch(t, c, mergeEndpoint, "job-m", 1)

	// The next epoch: update 0..9 and 140..149, insert 150..159.
	next := append(mergeChanges("n", 0, 10), mergeChanges("n", 140, 20)...)
	precommitCommit(t, putTxn(t, "job-m", 2, mergeEndpoint, changelog(t, next))(c), "epoch 2")
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
