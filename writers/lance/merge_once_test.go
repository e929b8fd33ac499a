package lance

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quiver-ingest/quiver/writers"
)

// dataFiles lists the data and deletion files under dir.
func dataFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, sub := range []string{"data", "_deletions"} {
		_ = filepath.WalkDir(filepath.Join(dir, sub), func(p string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				out = append(out, p)
			}
			return nil
		})
	}
	slices.Sort(out)
	return out
}

func mergeCountsOf(w *Writer) mergeCounts {
	n := func(a string) int64 { return int64(testutil.ToFloat64(w.m.mergeRows.WithLabelValues(a))) }
	return mergeCounts{Inserted: n("inserted"), Updated: n("updated"), Deleted: n("deleted"), Skipped: n("skipped_duplicates")}
}

// TestMergeInsertExactlyOnce: a replayed epoch changes nothing; a
// precommitted merge commits over a concurrent append (rebased), but not
// over a concurrent merge that changed a fragment it deletes from (stale
// deletion file: ErrConflict, dataset unchanged); a descriptor commits
// from another writer (a restarted server).
func TestMergeInsertExactlyOnce(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	dir := t.TempDir()
	seedDiff(t, dir, mem)
	opts := [3]string{"update_all", "insert_all", "keep"}
	w := mergeWriter(t, dir, mem, []string{"id"}, opts)
	defer w.Close(ctx)
	precommit := func(w *Writer, epoch int64, rows []diffRow) writers.Descriptor {
		t.Helper()
		rec := diffRecord(mem, rows)
		defer rec.Release()
		key := writers.TxnKey{Writer: "job", Epoch: epoch}
		if err := w.Write(ctx, key, rec); err != nil {
			t.Fatal(err)
		}
		d, err := w.Precommit(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	// Epoch 1 (update 1, insert 20) precommits; an append lands before its
	// commit, which a restarted server (another Writer) then makes.
	d1 := precommit(w, 1, []diffRow{{id: 1, k2: "a", name: "e1"}, {id: 20, k2: "a", name: "e1"}})
	app := newWriter(t, dir, mem)
	extra := diffRecord(mem, []diffRow{{id: 50, k2: "a", name: "app"}})
	commitRows(t, app, writers.AutoKey("app"), extra)
	extra.Release()
	app.Close(ctx)
	w2 := mergeWriter(t, dir, mem, []string{"id"}, opts)
	defer w2.Close(ctx)
	info, err := w2.Commit(ctx, writers.TxnKey{Writer: "job", Epoch: 1}, []writers.Descriptor{d1})
	if err != nil || info.Version != 4 || info.Replayed {
		t.Fatalf("commit over a concurrent append: %+v, %v; want version 4", info, err)
	}
	want := names(0, 2, 3, 4, 5, 6, 7, 8, 9)("r")
	want[1], want[20], want[50] = "e1", "e1", "app"
	if got := diffState(t, w, mem); !maps.Equal(got, want) {
		t.Fatalf("rows = %v, want %v", got, want)
	}
	// The replay changes nothing.
	info, err = w.Commit(ctx, writers.TxnKey{Writer: "job", Epoch: 1}, []writers.Descriptor{d1})
	if err != nil || !info.Replayed || info.Version != 4 {
		t.Fatalf("replay: %+v, %v; want replayed version 4", info, err)
	}

	// Epoch 2 deletes from fragment 0 (id 2); before it commits, epoch 3
	// (of another writer) changes fragment 0's deletion file (id 3).
	d2 := precommit(w, 2, []diffRow{{id: 2, k2: "a", name: "e2"}})
	w3 := mergeWriter(t, dir, mem, []string{"id"}, opts)
	defer w3.Close(ctx)
	rec := diffRecord(mem, []diffRow{{id: 3, k2: "a", name: "e3"}})
	commitRows(t, w3, writers.TxnKey{Writer: "other", Epoch: 3}, rec)
	rec.Release()
	want[3] = "e3"
	_, err = w.Commit(ctx, writers.TxnKey{Writer: "job", Epoch: 2}, []writers.Descriptor{d2})
	if !errors.Is(err, writers.ErrConflict) {
		t.Fatalf("commit of a stale merge: %v, want ErrConflict", err)
	}
	if got := diffState(t, w, mem); !maps.Equal(got, want) {
		t.Fatalf("a stale merge changed the dataset: %v, want %v", got, want)
	}
}
