package lance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
)

// TestPlanCompaction: Lance's plan_compaction rules — runs of adjacent
// small fragments, fragments with more than 10% deleted even alone, a
// large, skipped (indexed or pinned) fragment ends a run, a lone small
// fragment is left, bins split at the target.
func TestPlanCompaction(t *testing.T) {
	frag := func(id, rows, deleted, size uint64) lancetable.Fragment {
		f := lancetable.Fragment{ID: id, PhysicalRows: rows, Files: []lancetable.DataFile{{SizeBytes: size}}}
		if deleted > 0 {
			f.Deletion = &lancetable.DeletionFile{NumDeletedRows: deleted}
		}
		return f
	}
	target := compactTarget{rows: 100, bytes: 1000}
	for _, c := range []struct {
		name  string
		frags []lancetable.Fragment
		skip  []uint64
		want  [][]uint64
	}{
		{"small run", []lancetable.Fragment{frag(0, 10, 0, 10), frag(1, 10, 0, 10), frag(2, 10, 0, 10)}, nil, [][]uint64{{0, 1, 2}}},
		{"lone small", []lancetable.Fragment{frag(0, 10, 0, 10), frag(1, 100, 0, 10), frag(2, 10, 0, 10)}, nil, nil},
		{"large by bytes ends a run", []lancetable.Fragment{frag(0, 10, 0, 10), frag(1, 10, 0, 10), frag(2, 10, 0, 1000), frag(3, 10, 0, 10), frag(4, 10, 0, 10)}, nil, [][]uint64{{0, 1}, {3, 4}}},
		{"deleted alone", []lancetable.Fragment{frag(0, 100, 11, 10), frag(1, 100, 10, 10)}, nil, [][]uint64{{0}}},
		{"small with few deletions joins", []lancetable.Fragment{frag(0, 10, 1, 10), frag(1, 10, 0, 10)}, nil, [][]uint64{{0, 1}}},
		{"skipped ends a run", []lancetable.Fragment{frag(0, 10, 0, 10), frag(1, 10, 0, 10), frag(2, 10, 5, 10), frag(3, 10, 0, 10)}, []uint64{2}, [][]uint64{{0, 1}}},
		{"split at the target", []lancetable.Fragment{frag(0, 60, 0, 10), frag(1, 60, 0, 10), frag(2, 60, 0, 10), frag(3, 60, 0, 10), frag(4, 10, 0, 10)}, nil, [][]uint64{{0, 1}, {2, 3, 4}}},
		{"split by bytes", []lancetable.Fragment{frag(0, 1, 0, 600), frag(1, 1, 0, 600), frag(2, 1, 0, 600), frag(3, 1, 0, 600)}, nil, [][]uint64{{0, 1}, {2, 3}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got [][]uint64
			for _, g := range planCompaction(c.frags, target, func(id uint64) bool { return slices.Contains(c.skip, id) }) {
				var ids []uint64
				for _, f := range g {
					ids = append(ids, f.ID)
				}
				got = append(got, ids)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("groups %v, want %v", got, c.want)
			}
		})
	}
}

// formatWriter opens a merge_insert writer (on id) of dir writing file
// format 2.minor.
func formatWriter(t *testing.T, dir, format string, mem memory.Allocator) *Writer {
	t.Helper()
	cfg := NewConfig()
	cfg.DatasetURI = "file://" + dir
	cfg.WriteMode = ModeMergeInsert
	cfg.On = []string{"id"}
	cfg.DataStorageVersion = format
	return openWriter(t, cfg, mem)
}

// mergeRange merges rows id in [from, to) named prefix<id> as epoch.
func mergeRange(t *testing.T, w *Writer, mem memory.Allocator, epoch int64, from, to int, prefix string) {
	t.Helper()
	var rows []diffRow
	for i := from; i < to; i++ {
		rows = append(rows, diffRow{id: int64(i), k2: "a", val: float64(i), name: fmt.Sprintf("%s%d", prefix, i)})
	}
	rec := diffRecord(mem, rows)
	defer rec.Release()
	if _, err := mergeRows(w, epoch, rec); err != nil {
		t.Fatal(err)
	}
}

// TestOptimizeFormats: in each file format, fragments of small merges,
// some with deletion files, compact into one fragment without deletions,
// in one Rewrite version in the dataset's format, holding exactly the
// rows they held; a second optimize has nothing to do; merges go on,
// their key index synced over the rewrite.
func TestOptimizeFormats(t *testing.T) {
	for _, format := range []string{"2.0", "2.1", "2.2"} {
		t.Run(format, func(t *testing.T) {
			ctx := context.Background()
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			dir := t.TempDir()
			w := formatWriter(t, dir, format, mem)
			defer w.Close(ctx)
			for i := range 6 {
				mergeRange(t, w, mem, int64(i+1), i*10, i*10+10, "a") // 6 fragments
			}
			mergeRange(t, w, mem, 7, 5, 25, "b") // deletion files in fragments 0 and 2, fragment 1 gone, one new fragment
			want := diffState(t, w, mem)
			before, _ := w.latest(ctx)

			res, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: writers.DefaultOptimizeTargetBytes})
			if err != nil {
				t.Fatal(err)
			}
			d, _ := w.latest(ctx)
			if res.Version != int64(before.Version()+1) || int64(d.Version()) != res.Version || res.FilesRemoved != 6 || res.FilesAdded != 1 || res.Rows != 60 || res.BytesRemoved <= 0 || res.BytesAdded <= 0 {
				t.Fatalf("optimize = %+v (version before %d)", res, before.Version())
			}
			if len(d.Manifest.Fragments) != 1 || d.Manifest.Fragments[0].Deletion != nil || d.Manifest.Fragments[0].Files[0].Minor != uint32(minorOf(t, format)) || d.Manifest.FormatVersion != before.Manifest.FormatVersion {
				t.Fatalf("after optimize: fragments %+v, format %s", d.Manifest.Fragments, d.Manifest.FormatVersion)
			}
			if txn, err := d.Transaction(ctx, w.bucket); err != nil || txn.Op != lancetable.OpRewrite {
				t.Fatalf("optimize's transaction = %+v, %v; want a Rewrite", txn, err)
			}
			if got := diffState(t, w, mem); !maps.Equal(got, want) {
				t.Fatalf("rows after optimize differ:\n got %v\nwant %v", got, want)
			}
			again, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: writers.DefaultOptimizeTargetBytes})
			if err != nil || again != (writers.OptimizeResult{Version: res.Version}) {
				t.Fatalf("second optimize = %+v, %v; want nothing done", again, err)
			}
			mergeRange(t, w, mem, 8, 55, 65, "c")
			for i := 55; i < 65; i++ {
				want[int64(i)] = fmt.Sprintf("c%d", i)
			}
			if got := diffState(t, w, mem); !maps.Equal(got, want) {
				t.Fatalf("rows after a merge following optimize differ:\n got %v\nwant %v", got, want)
			}
		})
	}
}

func minorOf(t *testing.T, format string) uint16 {
	m, err := lancefile.ParseFormatVersion(format)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestOptimizeSparesPrecommittedMerge: a merge precommitted on this
// server pins the fragments it touched: optimize compacts the others, and
// the merge still commits, with exactly its rows. A merge precommitted on
// another server (no pins here) loses cleanly to the compaction: its
// commit is ErrConflict and no row is lost or duplicated.
func TestOptimizeSparesPrecommittedMerge(t *testing.T) {
	ctx := context.Background()
	w, mem, dir := fourFragments(t)
	want := diffState(t, w, mem)
	precommit := func(w *Writer, key writers.TxnKey, id int) writers.Descriptor {
		rec := diffRecord(mem, []diffRow{{id: int64(id), k2: "a", name: fmt.Sprintf("p%d", id)}})
		defer rec.Release()
		if err := w.Write(ctx, key, rec); err != nil {
			t.Fatal(err)
		}
		desc, err := w.Precommit(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return desc
	}
	desc := precommit(w, writers.TxnKey{Writer: "job", Epoch: 5}, 15) // touches fragment 1
	res, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: writers.DefaultOptimizeTargetBytes})
	if err != nil || res.FilesRemoved != 2 {
		t.Fatalf("optimize = %+v, %v; want fragments 2 and 3 compacted (0 alone, 1 pinned)", res, err)
	}
	if _, err := w.Commit(ctx, writers.TxnKey{Writer: "job", Epoch: 5}, []writers.Descriptor{desc}); err != nil {
		t.Fatalf("the precommitted merge failed after optimize: %v", err)
	}
	want[15] = "p15"
	if got := diffState(t, w, mem); !maps.Equal(got, want) {
		t.Fatalf("rows differ:\n got %v\nwant %v", got, want)
	}
	if len(w.pins.Pinned()) != 0 {
		t.Fatalf("pins left after the commit: %v", w.pins.Pinned())
	}

	// A restart: the coordinator hands the recovered merge to the new
	// writer (KeepPrecommitted), which pins it again.
	restarted := formatWriter(t, otherProcess(t, dir), "", mem)
	defer restarted.Close(ctx)
	recovered := writers.TxnKey{Writer: "job", Epoch: 6}
	desc = precommit(w, recovered, 1) // touches fragment 0, small and now next to compacted ones
	restarted.KeepPrecommitted(recovered, []writers.Descriptor{desc})
	if _, err := restarted.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: writers.DefaultOptimizeTargetBytes}); err != nil {
		t.Fatal(err)
	}
	if _, err := restarted.Commit(ctx, recovered, []writers.Descriptor{desc}); err != nil {
		t.Fatalf("the recovered merge failed after optimize: %v", err)
	}
	want[1] = "p1"
	if got := diffState(t, w, mem); !maps.Equal(got, want) {
		t.Fatalf("rows differ:\n got %v\nwant %v", got, want)
	}

	// Another server's merge: planned on a fragment optimize rewrites.
	other := formatWriter(t, otherProcess(t, dir), "", mem)
	defer other.Close(ctx)
	mergeRange(t, w, mem, 7, 100, 101, "n")
	mergeRange(t, w, mem, 8, 200, 201, "n") // two small fragments, compacted together
	want[100], want[200] = "n100", "n200"
	foreignKey := writers.TxnKey{Writer: "other", Epoch: 1}
	foreign := precommit(other, foreignKey, 100)
	if res, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: writers.DefaultOptimizeTargetBytes}); err != nil || res.FilesRemoved == 0 {
		t.Fatalf("optimize = %+v, %v", res, err)
	}
	_, err = other.Commit(ctx, foreignKey, []writers.Descriptor{foreign})
	if !errors.Is(err, writers.ErrConflict) {
		t.Fatalf("a merge planned on fragments compacted meanwhile committed: %v; want ErrConflict", err)
	}
	if got := diffState(t, w, mem); !maps.Equal(got, want) {
		t.Fatalf("rows differ after the lost merge:\n got %v\nwant %v", got, want)
	}
}

// otherProcess returns a path of the dataset at dir that writers open as
// another process would, with pins of their own (the pins are shared by
// the canonical URI, which a symbolic link changes).
func otherProcess(t *testing.T, dir string) string {
	t.Helper()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	return link
}

// TestRowsPerFile: a file holds the target's rows, fewer when the rows
// are wide, never fewer than minFileRows.
func TestRowsPerFile(t *testing.T) {
	wide := []lancetable.Fragment{{PhysicalRows: 10, Files: []lancetable.DataFile{{SizeBytes: 1000}}}}
	for _, c := range []struct{ rows, bytes, want uint64 }{
		{1 << 20, 300_000, 3000}, // 100-byte rows
		{2000, 300_000, 2000},    // the row target first
		{1 << 20, 300, minFileRows},
	} {
		if n := rowsPerFile(wide, compactTarget{rows: c.rows, bytes: c.bytes}); n != c.want {
			t.Errorf("rows per file of 100-byte rows, target %d rows or %d bytes = %d, want %d", c.rows, c.bytes, n, c.want)
		}
	}
}

// TestFileRuns: a group splits into runs of whole fragments of at most
// perFile live rows, one file each, only when that makes no more files
// than rolling every perFile rows would.
func TestFileRuns(t *testing.T) {
	frags := func(live ...uint64) []lancetable.Fragment {
		fs := make([]lancetable.Fragment, len(live))
		for i, n := range live {
			fs[i] = lancetable.Fragment{ID: uint64(i), PhysicalRows: n}
		}
		return fs
	}
	sizes := func(runs [][]lancetable.Fragment) []int {
		var n []int
		for _, r := range runs {
			n = append(n, len(r))
		}
		return n
	}
	for _, c := range []struct {
		name    string
		live    []uint64
		perFile uint64
		want    []int // fragments per run
	}{
		{"200 small into 2 files", slices.Repeat([]uint64{10}, 200), 1048, []int{104, 96}},
		{"fits one file", []uint64{10, 20, 30}, 100, []int{3}},
		{"exactly two files", []uint64{50, 50, 50, 50}, 100, []int{2, 2}},
		{"would make more files than rolling", []uint64{60, 60, 60}, 100, []int{3}},
		{"one fragment larger than a file", []uint64{250}, 100, []int{1}},
	} {
		if got := sizes(fileRuns(frags(c.live...), c.perFile)); !slices.Equal(got, c.want) {
			t.Errorf("%s: runs of %v fragments, want %v", c.name, got, c.want)
		}
	}
}

// TestOptimizeManyFiles: fragments with most rows deleted are rewritten
// alone, each into several files of the byte target, written
// concurrently, holding exactly the live rows.
func TestOptimizeManyFiles(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	w := formatWriter(t, t.TempDir(), "", mem)
	defer w.Close(ctx)
	for i := range 3 {
		mergeRange(t, w, mem, int64(i+1), i*3000, i*3000+3000, "a")
	}
	for i := range 3 { // 1200 of each fragment's 3000 rows updated: 40% deleted
		mergeRange(t, w, mem, int64(i+4), i*3000, i*3000+1200, "b")
	}
	want := diffState(t, w, mem)
	d, _ := w.latest(ctx)
	f := d.Manifest.Fragments[0]
	perRow := float64(dataBytes(&f)) / float64(f.PhysicalRows)
	res, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: int64(perRow * minFileRows)})
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesRemoved != 3 || res.FilesAdded != 6 || res.Rows != 5400 {
		t.Fatalf("optimize = %+v; want the 3 fragments rewritten into 2 files each (1024 and 776 of their 1800 live rows)", res)
	}
	if got := diffState(t, w, mem); !maps.Equal(got, want) {
		t.Fatalf("rows differ:\n got %v\nwant %v", got, want)
	}
}

// TestOptimizeConcurrentAppend: an append committed by another writer
// after optimize read its version, while optimize waits to commit (held
// by a merge being planned), commits without conflict, and the Rewrite
// rebases over it: both land, every row once.
func TestOptimizeConcurrentAppend(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	w := newWriter(t, dir, mem)
	defer w.Close(ctx)
	for i := range 4 {
		r := scenarioRows(mem, i*10, i*10+10)
		commitRows(t, w, writers.AutoKey("a"), r)
		r.Release()
	}
	done, endPlan := optimizeBehindPlan(t, ctx, w, dir)
	other := newWriter(t, dir, mem)
	defer other.Close(ctx)
	r := scenarioRows(mem, 100, 105)
	appended := commitRows(t, other, writers.AutoKey("b"), r)
	r.Release()
	endPlan(writers.TxnKey{}, nil)
	got := <-done
	if got.err != nil || got.res.Version != appended.Version+1 || got.res.FilesRemoved != 4 {
		t.Fatalf("optimize = %+v, %v; want the 4 fragments compacted in version %d, after the append", got.res, got.err, appended.Version+1)
	}
	d, _ := w.latest(ctx)
	if len(d.Manifest.Fragments) != 2 {
		t.Fatalf("fragments after optimize: %+v; want the compacted one and the appended one", d.Manifest.Fragments)
	}
	ids := readIDs(t, w, mem)
	if len(ids) != 45 || published(t, w) != 45 {
		t.Fatalf("%d distinct ids, %d rows; want 45 each", len(ids), published(t, w))
	}
}
