package delta

import (
	"testing"

	"github.com/quiver-ingest/quiver/writers"
)

// TestUpsertRewrite: a rewritten file keeps exactly its unmatched rows
// when it reads back in several batches (matches in the first and last
// batch, a batch wholly matched, a batch without a match), and a file
// whose every row matched is removed without a rewrite.
func TestUpsertRewrite(t *testing.T) {
	const batch = 65536 // parquetio's read batch
	for _, tc := range []struct {
		name    string
		seed    [2]int32
		changes []idChange
		adds    int // files the commit adds: the rewrite (if any) and the live rows
	}{
		{"several-batches", [2]int32{0, 3*batch + 100}, append(append(
			[]idChange{{10, "u", "U"}, {batch - 1, "u", "U"}, {3*batch + 99, "", "D"}, {900000, "new", "I"}},
			idDeletes(batch, 2*batch)...), idChange{batch + 5, "again", "U"}), 2},
		{"every-row-matched", [2]int32{0, 10}, append(idRange(0, 5, "u"), idDeletes(5, 10)...), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := checkedMem(t)
			cfg := upsertIDConfig(memURI(t))
			w := openWriter(t, cfg, mem)
			seedIDs(t, w, mem, tc.seed)
			cols := []string{"id", "str"}
			want := applyIDs(tableRows(t, cfg, cols), tc.changes)
			rec := idBatch(mem, tc.changes...)
			defer rec.Release()
			info := commitOne(t, w, writers.TxnKey{Writer: "rewrite", Epoch: 1}, rec)
			var removes, adds int
			for _, a := range readCommit(t, cfg, info.Version) {
				if a.Remove != nil {
					removes++
				}
				if a.Add != nil {
					adds++
				}
			}
			if removes != 1 || adds != tc.adds {
				t.Fatalf("commit removes %d and adds %d files, want 1 and %d", removes, adds, tc.adds)
			}
			sameRows(t, "after the upsert", tableRows(t, cfg, cols), want)
		})
	}
}

// idDeletes returns deletes of ids lo..hi-1.
func idDeletes(lo, hi int32) []idChange {
	out := idRange(lo, hi, "")
	for i := range out {
		out[i].op = "D"
	}
	return out
}
