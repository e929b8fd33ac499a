package delta

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
)

// TestUpsertKeyIndex: an upsert indexes the keys of the files it scans,
// and those its commit adds (in the background); later upserts answered
// from the index give the same table as without one; a file holding a key
// twice is never indexed, and both of its rows are replaced.
func TestUpsertKeyIndex(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxBytes int64
	}{{"indexed", DefaultKeyIndexMaxBytes}, {"no-index", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			mem := checkedMem(t)
			cfg := upsertDVConfig(memURI(t))
			cfg.KeyIndexMaxBytes = tc.maxBytes
			w := openWriter(t, cfg, mem)
			cols := []string{"id", "str"}
			seedIDs(t, w, mem, [2]int32{0, 100})
			seedFile := snapshot(t, cfg).Files()[0].Path
			appender := openWriter(t, testConfig(cfg.TableURI, func(c *Config) { c.DeletionVectors = true }), mem)
			appendIDs(t, appender, mem, 7, 7, 200) // one file holding id 7 twice
			var dupFile string
			for _, a := range snapshot(t, cfg).Files() {
				if a.Path != seedFile {
					dupFile = a.Path
				}
			}
			rows := tableRows(t, cfg, cols)
			for epoch, changes := range [][]idChange{
				{{10, "a", "U"}, {7, "seven", "U"}, {300, "new", "I"}},
				{{11, "b", "U"}, {10, "a2", "U"}, {7, "", "D"}, {200, "", "D"}},
				{{12, "c", "U"}, {300, "", "D"}, {7, "back", "I"}, {99, "z", "U"}},
			} {
				rec := idBatch(mem, changes...)
				commitOne(t, w, writers.TxnKey{Writer: "idx", Epoch: int64(epoch + 1)}, rec)
				rec.Release()
				rows = applyIDs(rows, changes)
				sameRows(t, fmt.Sprintf("after upsert %d", epoch+1), tableRows(t, cfg, cols), rows)
			}
			if tc.maxBytes == 0 {
				if w.keys != nil {
					t.Fatal("key_index_max_bytes 0 built a key cache")
				}
				return
			}
			if w.keys.Get(seedFile, "") == nil || w.keys.UsedBytes() == 0 {
				t.Error("the seed file's keys were not indexed")
			}
			// The files of the last commit were indexed after it, in the
			// background (warmKeys), before any upsert read them.
			if err := w.waitWarm(context.Background()); err != nil {
				t.Fatal(err)
			}
			added := 0
			for _, a := range readCommit(t, cfg, snapshot(t, cfg).Version) {
				if a.Add != nil && a.Add.DeletionVector == nil {
					added++
					if w.keys.Get(a.Add.Path, "") == nil {
						t.Errorf("file %s added by the last upsert was not indexed", a.Add.Path)
					}
				}
			}
			if added == 0 {
				t.Error("the last upsert added no file: the warm-up was not exercised")
			}
			if dupFile == "" || w.keys.Get(dupFile, "") != nil {
				t.Errorf("the file holding id 7 twice (%q) was indexed", dupFile)
			}
		})
	}
}

// appendIDs appends rows with the given ids (str "appended") as one
// auto-commit stream of the append-mode writer w: one file.
func appendIDs(t *testing.T, w *Writer, mem memory.Allocator, ids ...int32) {
	t.Helper()
	b := array.NewRecordBuilder(mem, arrow.NewSchema(idSchema().Fields()[:2], nil))
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int32Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append("appended")
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	commitOne(t, w, writers.AutoKey("append"), rec)
}
