package delta

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog/dv"
	"github.com/quiver-ingest/quiver/writers/storage"
)

var memTables atomic.Int64

// memURI returns a mem:// table root no other test uses.
func memURI(t *testing.T) string {
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return fmt.Sprintf("mem://quiver-delta-test/%s-%d", strings.ToLower(name), memTables.Add(1))
}

// fileURI returns a file:// table root in a fresh temporary folder.
func fileURI(t *testing.T) string {
	return "file://" + filepath.Join(t.TempDir(), "table")
}

// testConfig returns a valid config for uri with small files, changed by
// the given functions.
func testConfig(uri string, change ...func(*Config)) *Config {
	cfg := NewConfig()
	cfg.TableURI = uri
	for _, f := range change {
		f(cfg)
	}
	return cfg
}

// openWriter builds and opens a writer on cfg allocating from mem; the
// test closes it.
func openWriter(t *testing.T, cfg *Config, mem memory.Allocator) *Writer {
	t.Helper()
	w, err := New(cfg, writers.Env{Endpoint: "test", ConfigDir: t.TempDir(), Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return w
}

// checkedMem returns a checked allocator every byte of which must be
// freed once the test and its cleanups are done: writers close in
// cleanups (openWriter), and only then has their background work (key
// indexing after an upsert's commit) ended.
func checkedMem(t *testing.T) *memory.CheckedAllocator {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// tableBucket opens the table root of cfg for the rest of the test.
func tableBucket(t *testing.T, cfg *Config) *storage.Bucket {
	t.Helper()
	b, err := storage.Open(context.Background(), cfg.TableURI, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// snapshot loads the table's latest version through a bucket of its own.
func snapshot(t *testing.T, cfg *Config) *deltalog.Snapshot {
	t.Helper()
	snap, err := deltalog.Load(context.Background(), tableBucket(t, cfg))
	if err != nil {
		t.Fatalf("load table %s: %v", cfg.TableURI, err)
	}
	return snap
}

// readTable reads every active file of the table with parquetio and
// returns its records (owned by the caller; none when there is no table),
// rows marked by deletion vectors left out. Partition columns are not in
// the files and are not added back.
func readTable(t *testing.T, cfg *Config, mem memory.Allocator) []arrow.RecordBatch {
	t.Helper()
	var out []arrow.RecordBatch
	eachLiveBatch(t, cfg, mem, func(_ *deltalog.Add, rec arrow.RecordBatch) {
		rec.Retain()
		out = append(out, rec)
	})
	return out
}

// eachLiveBatch calls fn with every batch of every active file of the
// table at its latest version (none when there is no table), without the
// rows its deletion vector marks; fn must Retain a batch it keeps. Each
// file's size is checked against its add, and its rows against numRecords
// minus the deletion vector's cardinality.
func eachLiveBatch(t *testing.T, cfg *Config, mem memory.Allocator, fn func(a *deltalog.Add, rec arrow.RecordBatch)) {
	t.Helper()
	eachTrackedBatch(t, cfg, mem, false, fn)
}

// eachTrackedBatch is eachLiveBatch with, when track is set, the row ids
// and commit versions of a table that tracks rows materialized
// (deltalayout.RowTracking.Materialize).
func eachTrackedBatch(t *testing.T, cfg *Config, mem memory.Allocator, track bool, fn func(a *deltalog.Add, rec arrow.RecordBatch)) {
	t.Helper()
	ctx := context.Background()
	b := tableBucket(t, cfg)
	snap, err := deltalog.Load(ctx, b)
	if errors.Is(err, deltalog.ErrTableNotFound) {
		return
	}
	if err != nil {
		t.Fatalf("load table %s: %v", cfg.TableURI, err)
	}
	var rt *deltalayout.RowTracking
	if track {
		rt = deltalayout.RowTrackingOf(snap)
	}
	for _, a := range snap.Files() {
		key, r, size, gone := openLiveFile(t, b, a)
		if size != a.Size {
			t.Errorf("file %s: size %d, add.size %d", key, size, a.Size)
		}
		var rows int64
		err = readKept(ctx, mem, deltalayout.ColumnMapOf(snap), r, size, a, gone, rt, func(rec arrow.RecordBatch) error {
			defer rec.Release()
			rows += rec.NumRows()
			fn(a, rec)
			return nil
		})
		r.Close()
		if err != nil {
			t.Fatalf("read data file %s: %v", key, err)
		}
		if want := statsRows(t, a) - int64(len(gone)); rows != want {
			t.Errorf("file %s: %d live rows, stats numRecords %d minus %d marked deleted", key, rows, statsRows(t, a), len(gone))
		}
	}
}

// openLiveFile opens the data file of a in b and reads the positions its
// deletion vector marks; the caller closes the file.
func openLiveFile(t *testing.T, b *storage.Bucket, a *deltalog.Add) (key string, r storage.ReaderAtCloser, size int64, gone []int64) {
	t.Helper()
	ctx := context.Background()
	key, err := deltalog.DecodePath(a.Path)
	if err != nil {
		t.Fatal(err)
	}
	if gone, err = dv.ReadDeletionVector(ctx, b, a.DeletionVector); err != nil {
		t.Fatalf("deletion vector of %s: %v", key, err)
	}
	if r, size, err = b.OpenReader(ctx, key); err != nil {
		t.Fatalf("open data file %s: %v", key, err)
	}
	return key, r, size, gone
}

// publishedRows counts the rows of every active file, read back.
func publishedRows(t *testing.T, cfg *Config) int64 {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var n int64
	for _, rec := range readTable(t, cfg, mem) {
		n += rec.NumRows()
		rec.Release()
	}
	return n
}

// idRecord builds n rows of writertest's schema shape with ids from start.
func idRecord(mem memory.Allocator, schema *arrow.Schema, start, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := start; i < start+n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("name-%d", i%7))
	}
	return b.NewRecordBatch()
}

// statsRows returns the numRecords of a's stats.
func statsRows(t *testing.T, a *deltalog.Add) int64 {
	t.Helper()
	st, err := deltalog.ParseStats(a.Stats)
	if err != nil {
		t.Fatal(err)
	}
	return st.NumRecords
}
