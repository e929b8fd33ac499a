package lance

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quiver-ingest/quiver/writers"
)

// TestIndexPatchedByCommit: the first merge scans (the index is cold) and
// its commit builds the index in the background; a merge's commit then
// brings the key index to the version it made, so the next merge's sync
// has nothing to read; a commit that another writer's commit preceded
// syncs the index in the background, patching it from the changed
// fragments. Every plan matches
// the dataset (the rows are checked after each merge).
func TestIndexPatchedByCommit(t *testing.T) {
	w, dir, mem := seededIDMerge(t)
	other := newWriter(t, dir, mem)
	defer other.Close(context.Background())
	ctx := context.Background()
	syncs := func() (rebuilt, current, patched, committed float64) {
		indexIdle(w)
		l := func(r string) float64 { return testutil.ToFloat64(w.m.indexSyncs.WithLabelValues(r)) }
		return l("rebuilt"), l("current"), l("patched"), l("committed")
	}
	wantRows := func(step string, n int) {
		t.Helper()
		if got := liveRows(t, w, mem); len(got) != n {
			t.Fatalf("%s: %d rows, want %d", step, len(got), n)
		}
		indexIdle(w)
		var indexed uint64
		for _, f := range w.idx.frags {
			indexed += f.live
		}
		if w.idx.Len() != n || indexed != uint64(n) {
			t.Fatalf("%s: the index holds %d keys and %d rows, want %d", step, w.idx.Len(), indexed, n)
		}
	}

	rec := diffRecord(mem, []diffRow{{id: 1, k2: "a", name: "u"}, {id: 20, k2: "a", name: "n"}})
	if _, err := mergeRows(w, 1, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	wantRows("first merge", 11)
	rec = diffRecord(mem, []diffRow{{id: 20, k2: "a", name: "u2"}, {id: 2, k2: "a", name: "u"}, {id: 21, k2: "a", name: "n"}})
	if _, err := mergeRows(w, 2, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	wantRows("second merge", 12)
	if rebuilt, current, patched, committed := syncs(); rebuilt != 1 || current != 1 || patched != 0 || committed != 1 {
		t.Fatalf("syncs rebuilt %v, current %v, patched %v; commits patching %v: want 1, 1, 0; 1", rebuilt, current, patched, committed)
	}

	// Another writer commits between this merge's precommit and commit.
	key := writers.TxnKey{Writer: "job", Epoch: 3}
	rec = diffRecord(mem, []diffRow{{id: 3, k2: "a", name: "u"}, {id: 22, k2: "a", name: "n"}})
	if err := w.Write(ctx, key, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	d, err := w.Precommit(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	rec = diffRecord(mem, []diffRow{{id: 30, k2: "a", name: "o"}})
	commitRows(t, other, writers.AutoKey("other"), rec)
	rec.Release()
	if _, err := w.Commit(ctx, key, []writers.Descriptor{d}); err != nil {
		t.Fatal(err)
	}
	rec = diffRecord(mem, []diffRow{{id: 30, k2: "a", name: "u"}})
	if _, err := mergeRows(w, 4, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	wantRows("after the interleaved commit", 14)
	if _, _, patched, committed := syncs(); patched != 1 || committed != 2 {
		t.Fatalf("syncs patched %v, commits patching %v: want 1 (the interleaved commit), 2", patched, committed)
	}
}
