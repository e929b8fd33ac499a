package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/parquetio"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// deltaEndpoint is the name of the Delta endpoint of writeDeltaConfig.
const deltaEndpoint = "events"

// writeDeltaConfig writes a config with one Delta append endpoint called
// events on the table folder tableDir, free ports and dataDir, returning
// its path.
func writeDeltaConfig(t *testing.T, dataDir, tableDir string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\nhttp_listen: 127.0.0.1:0\ndata_dir: %s\nendpoints:\n", dataDir)
	fmt.Fprintf(&b, "  - name: %s\n    sink: delta\n    delta:\n      table_uri: file://%s\n      parquet: {compression: snappy}\n", deltaEndpoint, tableDir)
	path := filepath.Join(t.TempDir(), "quiver.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// idRows returns a reader of n rows of one int64 column id, start to
// start+n-1, in batches of at most 1000 rows.
func idRows(t *testing.T, start, n int64) array.RecordReader {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	var recs []arrow.RecordBatch
	for first := start; first < start+n; first += 1000 {
		ids := b.Field(0).(*array.Int64Builder)
		for id := first; id < min(first+1000, start+n); id++ {
			ids.Append(id)
		}
		recs = append(recs, b.NewRecordBatch())
	}
	r, err := array.NewRecordReader(schema, recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		rec.Release()
	}
	t.Cleanup(r.Release)
	return r
}

// deltaTable is what a reader of the table sees at its latest version.
type deltaTable struct {
	dir     string
	version int64
	ids     []int64 // every id of every active file, sorted
	snap    *deltalog.Snapshot
}

// store opens the table root for the rest of the test.
func (d deltaTable) store(t *testing.T) *storage.Bucket {
	t.Helper()
	b, err := storage.Open(context.Background(), "file://"+d.dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// readDelta replays the table's log and reads every active file.
func readDelta(t *testing.T, tableDir string) deltaTable {
	t.Helper()
	ctx := context.Background()
	b, err := storage.Open(ctx, "file://"+tableDir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	snap, err := deltalog.Load(ctx, b)
	if err != nil {
		t.Fatalf("load table: %v", err)
	}
	tab := deltaTable{dir: tableDir, version: snap.Version, snap: snap}
	for _, a := range snap.Files() {
		key, err := deltalog.DecodePath(a.Path)
		if err != nil {
			t.Fatal(err)
		}
		r, size, err := b.OpenReader(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		rr, err := parquetio.ReadFile(ctx, r, size, memory.DefaultAllocator, parquetio.ReadOptions{Columns: []string{"id"}})
		if err != nil {
			t.Fatal(err)
		}
		for rr.Next() {
			tab.ids = append(tab.ids, rr.RecordBatch().Column(0).(*array.Int64).Int64Values()...)
		}
		if err := rr.Err(); err != nil {
			t.Fatal(err)
		}
		rr.Release()
		r.Close()
	}
	slices.Sort(tab.ids)
	return tab
}

// wantIDs checks that the table holds exactly the ids [0, n), once each.
func (d deltaTable) wantIDs(t *testing.T, n int64) {
	t.Helper()
	if int64(len(d.ids)) != n {
		t.Fatalf("table holds %d rows, want %d", len(d.ids), n)
	}
	for i, id := range d.ids {
		if id != int64(i) {
			t.Fatalf("table rows: id %d at position %d: rows missing or duplicated", id, i)
		}
	}
}

// wantContiguousLog checks that _delta_log holds exactly the commits 0 to
// version.
func wantContiguousLog(t *testing.T, tableDir string, version int64) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(tableDir, "_delta_log"))
	if err != nil {
		t.Fatal(err)
	}
	var commits []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") && len(e.Name()) == 25 {
			commits = append(commits, e.Name())
		}
	}
	if int64(len(commits)) != version+1 {
		t.Fatalf("_delta_log holds %d commits, want %d (versions 0..%d): %v", len(commits), version+1, version, commits)
	}
	for v, name := range commits {
		if want := fmt.Sprintf("%020d.json", v); name != want {
			t.Fatalf("_delta_log: commit %s where %s was expected: versions are not contiguous", name, want)
		}
	}
}
