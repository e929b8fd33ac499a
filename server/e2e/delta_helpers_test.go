package e2e

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog/dv"
	"github.com/quiver-ingest/quiver/writers/parquetio"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// deltaEndpoint is the name of the Delta endpoint of deltaAppend.
const deltaEndpoint = "events"

// deltaAppend is the config of the Delta append endpoint deltaEndpoint on
// the table root tableDir (a folder or a URI, see rootURI), for
// writeConfig.
func deltaAppend(tableDir string) string {
	return fmt.Sprintf(`{name: %s, sink: delta, delta: {table_uri: "%s", parquet: {compression: snappy}}}`, deltaEndpoint, rootURI(tableDir))
}

// idRows returns a reader of n rows of one int64 column id, start to
// start+n-1, in batches of at most 1000 rows.
func idRows(t testing.TB, start, n int64) array.RecordReader {
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
func (d deltaTable) store(t testing.TB) *storage.Bucket {
	t.Helper()
	b, err := storage.Open(context.Background(), rootURI(d.dir), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// readDelta replays the table's log and reads every active file.
func readDelta(t testing.TB, tableDir string) deltaTable {
	t.Helper()
	tab := deltaTable{dir: tableDir}
	snap, err := deltalog.Load(context.Background(), tab.store(t))
	if err != nil {
		t.Fatalf("load table: %v", err)
	}
	tab.version, tab.snap = snap.Version, snap
	tab.eachBatch(t, []string{"id"}, func(_ string, rec arrow.RecordBatch) {
		tab.ids = append(tab.ids, rec.Column(0).(*array.Int64).Int64Values()...)
	})
	slices.Sort(tab.ids)
	return tab
}

// eachBatch reads columns of every active file of the table at
// tab.version, calling fn with the file's path and each batch, without the
// rows the file's deletion vector marks.
func (d deltaTable) eachBatch(t testing.TB, columns []string, fn func(path string, rec arrow.RecordBatch)) {
	t.Helper()
	ctx := context.Background()
	b := d.store(t)
	for _, a := range d.snap.Files() {
		key, err := deltalog.DecodePath(a.Path)
		if err != nil {
			t.Fatal(err)
		}
		gone, err := dv.ReadDeletionVector(ctx, b, a.DeletionVector)
		if err != nil {
			t.Fatal(err)
		}
		r, size, err := b.OpenReader(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		rr, err := parquetio.ReadFile(ctx, r, size, memory.DefaultAllocator, parquetio.ReadOptions{Columns: columns})
		if err != nil {
			t.Fatal(err)
		}
		var first int64 // file position of the batch's first row
		for rr.Next() {
			rec := rr.RecordBatch()
			live := liveRows(t, rec, first, gone)
			first += rec.NumRows()
			fn(a.Path, live)
			live.Release()
		}
		if err := rr.Err(); err != nil {
			t.Fatal(err)
		}
		rr.Release()
		r.Close()
	}
}

// liveRows returns rec (whose first row is at file position first) without
// the rows at the positions gone (ascending).
func liveRows(t testing.TB, rec arrow.RecordBatch, first int64, gone []int64) arrow.RecordBatch {
	t.Helper()
	keep := array.NewBooleanBuilder(memory.DefaultAllocator)
	defer keep.Release()
	for row := range rec.NumRows() {
		_, marked := slices.BinarySearch(gone, first+row)
		keep.Append(!marked)
	}
	mask := keep.NewBooleanArray()
	defer mask.Release()
	out, err := compute.FilterRecordBatch(context.Background(), rec, mask, compute.DefaultFilterOptions())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// wantIDs checks that the table holds exactly the ids [0, n), once each.
func (d deltaTable) wantIDs(t testing.TB, n int64) {
	t.Helper()
	wantIDRange(t, "table", d.ids, n)
}

// wantContiguousLog checks that _delta_log holds exactly the commits 0 to
// version.
func wantContiguousLog(t *testing.T, tableDir string, version int64) {
	t.Helper()
	var commits []string
	for o, err := range (deltaTable{dir: tableDir}).store(t).List(context.Background(), "_delta_log/", "") {
		if err != nil {
			t.Fatal(err)
		}
		if name := path.Base(o.Key); strings.HasSuffix(name, ".json") && len(name) == 25 {
			commits = append(commits, name)
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
