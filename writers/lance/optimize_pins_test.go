package lance

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
	"github.com/quiver-ingest/quiver/writers/storage/storagetest"
)

// orphans lists the data files in dir that no fragment of ds references
// (temporary names left aside).
func orphans(t *testing.T, dir string, ds ...*lancetable.Dataset) []string {
	t.Helper()
	known := map[string]bool{}
	for _, d := range ds {
		for _, f := range d.Manifest.Fragments {
			for _, df := range f.Files {
				known[filepath.Join(dir, lancetable.DataKey(df.Path))] = true
			}
		}
	}
	var out []string
	for _, p := range dataFiles(t, dir) {
		if strings.HasPrefix(p, filepath.Join(dir, "data")) && !strings.HasPrefix(filepath.Base(p), ".") && !known[p] {
			out = append(out, p)
		}
	}
	return out
}

// latestOf is w's newest version.
func latestOf(t *testing.T, w *Writer) *lancetable.Dataset {
	t.Helper()
	d, err := w.latest(context.Background())
	if err != nil || d == nil {
		t.Fatalf("latest: %v, %v", d, err)
	}
	return d
}

// optimized is what Optimize answered.
type optimized struct {
	res writers.OptimizeResult
	err error
}

// optimizeBehindPlan starts an optimize of w (on the dataset at dir)
// while a merge is being planned and returns once the optimize has
// written its files and waits to commit; endPlan ends the merge's plan,
// pinning ids for key, and done gets the optimize's answer.
func optimizeBehindPlan(t *testing.T, ctx context.Context, w *Writer, dir string) (done <-chan optimized, endPlan func(key writers.TxnKey, ids []uint64)) {
	t.Helper()
	before := latestOf(t, w)
	if err := w.pins.BeginPlan(context.Background()); err != nil {
		t.Fatal(err)
	}
	ch := make(chan optimized, 1)
	go func() {
		res, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: writers.DefaultOptimizeTargetBytes})
		ch <- optimized{res, err}
	}()
	deadline := time.Now().Add(time.Minute)
	for len(orphans(t, dir, before)) == 0 {
		if time.Now().After(deadline) {
			w.pins.EndPlan(writers.TxnKey{}, nil)
			t.Fatal("optimize wrote no file within a minute")
		}
		time.Sleep(time.Millisecond)
	}
	return ch, w.pins.EndPlan
}

// checkedMergeWriter returns a merge_insert writer of a new dataset in dir;
// memory is checked and the writer closed when the test ends.
func checkedMergeWriter(t *testing.T) (w *Writer, mem memory.Allocator, dir string) {
	t.Helper()
	checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { checked.AssertSize(t, 0) })
	dir = t.TempDir()
	w = formatWriter(t, dir, "", checked)
	t.Cleanup(func() { w.Close(context.Background()) })
	return w, checked, dir
}

// fourFragments is checkedMergeWriter with ids 0-39 merged into fragments 0-3.
func fourFragments(t *testing.T) (w *Writer, mem memory.Allocator, dir string) {
	t.Helper()
	w, mem, dir = checkedMergeWriter(t)
	for i := range 4 {
		mergeRange(t, w, mem, int64(i+1), i*10, i*10+10, "a")
	}
	return w, mem, dir
}

// TestOptimizeSparesOtherEndpointsMerge: two endpoints of one server on
// one dataset (a merge_insert one and an append one) share its pins: the
// append endpoint's optimize leaves the fragment the merge endpoint's
// precommitted merge touched, and the merge commits.
func TestOptimizeSparesOtherEndpointsMerge(t *testing.T) {
	ctx := context.Background()
	merges, mem, dir := fourFragments(t)
	want := diffState(t, merges, mem)
	key := writers.TxnKey{Writer: "job", Epoch: 5}
	rec := diffRecord(mem, []diffRow{{id: 15, k2: "a", name: "p15"}}) // fragment 1
	if err := merges.Write(ctx, key, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	desc, err := merges.Precommit(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	appends := newWriter(t, dir, mem)
	defer appends.Close(ctx)
	if res, err := appends.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: writers.DefaultOptimizeTargetBytes}); err != nil || res.FilesRemoved != 2 {
		t.Fatalf("optimize on the other endpoint = %+v, %v; want fragments 2 and 3 compacted", res, err)
	}
	if _, err := merges.Commit(ctx, key, []writers.Descriptor{desc}); err != nil {
		t.Fatalf("a merge precommitted on this server failed after another endpoint's optimize: %v", err)
	}
	want[15] = "p15"
	if got := diffState(t, merges, mem); !maps.Equal(got, want) {
		t.Fatalf("rows differ:\n got %v\nwant %v", got, want)
	}
}

// TestOptimizePinDuringWrite: a merge that pins a fragment while optimize
// writes its files makes optimize's commit lose: it deletes the files it
// wrote, plans again without the pinned fragment, and every row stays.
func TestOptimizePinDuringWrite(t *testing.T) {
	ctx := context.Background()
	w, mem, dir := fourFragments(t)
	want := diffState(t, w, mem)
	before := latestOf(t, w)
	done, endPlan := optimizeBehindPlan(t, ctx, w, dir)
	endPlan(writers.TxnKey{Writer: "job", Epoch: 9}, []uint64{1}) // a merge pins fragment 1
	if got := <-done; got.err != nil {
		t.Fatal(got.err)
	}
	after := latestOf(t, w)
	kept := false
	for _, f := range after.Manifest.Fragments {
		kept = kept || f.ID == 1
	}
	if !kept || after.Version() != before.Version()+1 {
		t.Fatalf("fragments %+v in version %d: want fragment 1, pinned while optimize wrote, kept, in one compaction", after.Manifest.Fragments, after.Version())
	}
	if o := orphans(t, dir, before, after); len(o) != 0 {
		t.Fatalf("files of the lost commit left behind: %v", o)
	}
	if got := diffState(t, w, mem); !maps.Equal(got, want) {
		t.Fatalf("rows differ:\n got %v\nwant %v", got, want)
	}
}

// TestOptimizeContextAtGate: an optimize that wrote its files and waits
// to commit behind a merge being planned gives up when its context ends,
// with the context's error, and deletes the files it wrote.
func TestOptimizeContextAtGate(t *testing.T) {
	ctx := context.Background()
	w, _, dir := fourFragments(t)
	before := latestOf(t, w)
	cctx, cancel := context.WithCancel(ctx)
	done, endPlan := optimizeBehindPlan(t, cctx, w, dir)
	defer endPlan(writers.TxnKey{}, nil)
	cancel()
	select {
	case got := <-done:
		if !errors.Is(got.err, context.Canceled) {
			t.Fatalf("optimize = %v; want its context's error", got.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("optimize still waits a minute after its context ended")
	}
	if o := orphans(t, dir, before); len(o) != 0 {
		t.Fatalf("files of the abandoned optimize left behind: %v", o)
	}
	if v := latestOf(t, w).Version(); v != before.Version() {
		t.Fatalf("version %d after the abandoned optimize, want %d", v, before.Version())
	}
}

// TestOptimizeWrongDeletionCount: a manifest whose deletion file says
// more rows are deleted than it holds (a hostile or buggy writer) makes
// optimize refuse with ErrInvalid, commit nothing and leave no file,
// instead of dropping live rows.
func TestOptimizeWrongDeletionCount(t *testing.T) {
	ctx := context.Background()
	w, mem, dir := checkedMergeWriter(t)
	mergeRange(t, w, mem, 1, 0, 100, "a")
	mergeRange(t, w, mem, 2, 0, 20, "b") // fragment 0: 20 of 100 deleted
	d := latestOf(t, w)
	f := d.Manifest.Fragments[0]
	del := *f.Deletion
	del.NumDeletedRows = 60 // the file holds 20
	f.Deletion = &del
	if _, err := lancetable.Commit(ctx, w.bucket, d, &lancetable.Transaction{Op: lancetable.OpUpdate, Updated: []lancetable.Fragment{f}}); err != nil {
		t.Fatal(err)
	}
	before := latestOf(t, w)
	_, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: writers.DefaultOptimizeTargetBytes})
	if !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("optimize of a fragment with a wrong deletion count = %v; want ErrInvalid", err)
	}
	if v := latestOf(t, w).Version(); v != before.Version() {
		t.Fatalf("version %d after the refused optimize, want %d", v, before.Version())
	}
	if o := orphans(t, dir, before); len(o) != 0 {
		t.Fatalf("files of the refused optimize left behind: %v", o)
	}
}

// countingAlloc counts the bytes allocated through it.
type countingAlloc struct {
	memory.Allocator
	n atomic.Int64
}

func (c *countingAlloc) Allocate(size int) []byte {
	c.n.Add(int64(size))
	return c.Allocator.Allocate(size)
}

// TestOptimizeReadsFragmentOnce: a fragment rewritten into eight files
// is read once, not once per file: optimize allocates about as much as
// when it writes one file.
func TestOptimizeReadsFragmentOnce(t *testing.T) {
	ctx := context.Background()
	allocated := map[int]int64{}
	for _, files := range []int{1, 8} {
		base := memory.NewGoAllocator()
		w := formatWriter(t, t.TempDir(), "", base)
		mergeRange(t, w, base, 1, 0, 20000, "a")
		mergeRange(t, w, base, 2, 0, 4000, "b") // 20% of fragment 0 deleted
		f := latestOf(t, w).Manifest.Fragments[0]
		target := int64(writers.DefaultOptimizeTargetBytes)
		if files > 1 {
			perRow := float64(dataBytes(&f)) / float64(f.PhysicalRows)
			target = int64(float64(f.LiveRows()) / float64(files) * perRow * 1.01)
		}
		c := &countingAlloc{Allocator: base}
		w.env.Allocator = c
		res, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: target})
		if err != nil || res.FilesAdded < int64(files) {
			t.Fatalf("optimize into %d files = %+v, %v", files, res, err)
		}
		allocated[files] = c.n.Load()
		w.Close(ctx)
	}
	t.Logf("bytes allocated: %d writing 8 files, %d writing 1", allocated[8], allocated[1])
	if allocated[8] > 2*allocated[1] {
		t.Fatalf("optimize allocated %d bytes writing 8 files, %d writing 1: the fragment is read more than once", allocated[8], allocated[1])
	}
}

// TestOptimizeOutcomeUnknown: when optimize's commit answer is lost,
// optimize reports ErrOutcomeUnknown without planning again and keeps the
// files it wrote (the version may reference them); whether it landed or
// not, the dataset reads the same rows, and a later optimize finishes
// the job or finds nothing to do.
func TestOptimizeOutcomeUnknown(t *testing.T) {
	for _, land := range []bool{false, true} {
		t.Run(map[bool]string{false: "lost", true: "landed"}[land], func(t *testing.T) {
			ctx := context.Background()
			w, mem, dir := fourFragments(t)
			want := diffState(t, w, mem)
			before := latestOf(t, w)
			restore := storagetest.LoseAnswer(w.bucket, func(key string) bool {
				return strings.HasSuffix(key, ".manifest")
			}, land)
			_, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: writers.DefaultOptimizeTargetBytes})
			restore()
			if !errors.Is(err, writers.ErrOutcomeUnknown) {
				t.Fatalf("optimize with its commit answer lost: %v; want ErrOutcomeUnknown", err)
			}
			if o := orphans(t, dir, before); len(o) != 1 {
				t.Fatalf("new data files after the unknown outcome: %v; want the compacted one kept", o)
			}
			after := latestOf(t, w)
			if wantV := before.Version() + map[bool]uint64{false: 0, true: 1}[land]; after.Version() != wantV {
				t.Fatalf("version %d after the unknown outcome, want %d", after.Version(), wantV)
			}
			if got := diffState(t, w, mem); !maps.Equal(got, want) {
				t.Fatalf("rows differ after the unknown outcome:\n got %v\nwant %v", got, want)
			}
			res, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: writers.DefaultOptimizeTargetBytes})
			if err != nil || (res.FilesAdded == 1) == land {
				t.Fatalf("optimize after the unknown outcome = %+v, %v (commit landed: %v)", res, err, land)
			}
			if got := diffState(t, w, mem); !maps.Equal(got, want) {
				t.Fatalf("rows differ after the second optimize:\n got %v\nwant %v", got, want)
			}
		})
	}
}
