package lance

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
)

// newWriter opens a writer on dir (the dataset folder).
func newWriter(t *testing.T, dir string, mem memory.Allocator) *Writer {
	t.Helper()
	return newWriterURI(t, "file://"+dir, mem)
}

// newWriterURI opens a writer of the dataset at uri.
func newWriterURI(t *testing.T, uri string, mem memory.Allocator) *Writer {
	t.Helper()
	cfg := NewConfig()
	cfg.DatasetURI = uri
	return openWriter(t, cfg, mem)
}

// openWriter opens a writer of endpoint "items" with cfg.
func openWriter(t *testing.T, cfg *Config, mem memory.Allocator) *Writer {
	t.Helper()
	w, err := New(cfg, writers.Env{Endpoint: "items", Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w
}

// published counts the live rows of the latest version.
func published(t *testing.T, w *Writer) int64 {
	t.Helper()
	d, err := w.latest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d == nil {
		return 0
	}
	return int64(d.Manifest.NumRows())
}

// dbDir returns a LanceDB database folder and the dataset folder of name.
func dbDir(t *testing.T, name string) (string, string) {
	db := t.TempDir()
	return db, filepath.Join(db, name+".lance")
}

// indexIdle waits until no background key index patch runs (see
// Writer.patchIndex), so that a test may read w.idx and its metrics.
func indexIdle(w *Writer) {
	w.idxMu.Lock()
	defer w.idxMu.Unlock()
}

// warmIndex builds w's key index for d when it is cold, as the background
// work after a merge's commit does.
func warmIndex(t *testing.T, w *Writer, d *lancetable.Dataset, mem memory.Allocator) {
	t.Helper()
	w.idxMu.Lock()
	defer w.idxMu.Unlock()
	if w.idx != nil && w.idx.cold(d) {
		if err := w.syncIndex(context.Background(), d, mem); err != nil {
			t.Fatal(err)
		}
	}
}

// eachLiveRecord calls fn with each record of live rows of the latest
// version, in fragment order (a record is released after the call).
func eachLiveRecord(t *testing.T, w *Writer, mem memory.Allocator, fn func(rec arrow.RecordBatch)) {
	t.Helper()
	ctx := context.Background()
	d, err := w.latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range d.Manifest.Fragments {
		recs, err := d.ReadFragment(ctx, w.bucket, &d.Manifest.Fragments[i], mem)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			fn(rec)
			rec.Release()
		}
	}
}
