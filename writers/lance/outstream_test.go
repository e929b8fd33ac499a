package lance

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"

	"github.com/quiver-ingest/quiver/writers"
)

// streamedStage writes recs as one transaction of w and returns its stage.
func streamedStage(t *testing.T, w *Writer, key writers.TxnKey, recs ...arrow.RecordBatch) *stage {
	t.Helper()
	for _, rec := range recs {
		if err := w.Write(context.Background(), key, rec); err != nil {
			t.Fatal(err)
		}
	}
	s, err := w.stages.Get(key, false)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// precommitAndCommit publishes key's transaction.
func precommitAndCommit(t *testing.T, w *Writer, key writers.TxnKey) {
	t.Helper()
	ctx := context.Background()
	d, err := w.Precommit(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx, key, []writers.Descriptor{d}); err != nil {
		t.Fatal(err)
	}
}

// TestMergeStreamsOut: while the source's keys are distinct, a merge
// (update_all + insert_all) writes its guessed output as the batches
// arrive: before Precommit the stage's open data file holds every source
// row, and the merge publishes them in one new data file.
func TestMergeStreamsOut(t *testing.T) {
	w, dir, mem := seededIDMerge(t) // ids 0..9
	key := writers.AutoKey("put")
	a := diffRecord(mem, []diffRow{{id: 20, k2: "b", name: "n20"}, {id: 3, k2: "b", name: "n3"}})
	defer a.Release()
	b := diffRecord(mem, []diffRow{{id: 21, k2: "b", name: "n21"}})
	defer b.Release()
	before := len(onlyData(dataFiles(t, dir)))
	s := streamedStage(t, w, key, a, b)
	if !s.streamed || s.out == nil {
		t.Fatalf("streamed %v, out %v: the output is not written as the source arrives", s.streamed, s.out)
	}
	if err := s.awaitOut(); err != nil {
		t.Fatal(err)
	}
	if f, ok := s.openFile(); !ok || f.fw.Rows() != 3 {
		t.Fatalf("open data file (%v) holds %d rows before Precommit, want the source's 3", ok, f.fw.Rows())
	}
	precommitAndCommit(t, w, key)
	want := names(0, 1, 2, 4, 5, 6, 7, 8, 9)("r")
	want[3], want[20], want[21] = "n3", "n20", "n21"
	checkMerged(t, w, dir, mem, want, before)
}

// TestMergeStreamEmpty: a merge of an empty batch writes no data file.
func TestMergeStreamEmpty(t *testing.T) {
	w, dir, mem := seededIDMerge(t)
	key := writers.AutoKey("put")
	empty := diffRecord(mem, nil)
	defer empty.Release()
	before := len(onlyData(dataFiles(t, dir)))
	streamedStage(t, w, key, empty)
	precommitAndCommit(t, w, key)
	if after := len(onlyData(dataFiles(t, dir))); after != before {
		t.Fatalf("%d data files before the merge of no rows, %d after", before, after)
	}
}

// TestMergeStreamEndsAtRepeat: a source key that repeats ends the guess:
// the writes stop, Precommit drops what they wrote, and the merge applies
// source_duplicates (first_seen here) as without them.
func TestMergeStreamEndsAtRepeat(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	seedDiff(t, dir, mem)
	cfg := NewConfig()
	cfg.DatasetURI, cfg.WriteMode, cfg.On, cfg.SourceDuplicates = "file://"+dir, ModeMergeInsert, []string{"id"}, "first_seen"
	w := openWriter(t, cfg, mem)
	defer w.Close(context.Background())
	key := writers.AutoKey("put")
	a := diffRecord(mem, []diffRow{{id: 20, k2: "b", name: "first"}, {id: 4, k2: "b", name: "first"}})
	defer a.Release()
	b := diffRecord(mem, []diffRow{{id: 20, k2: "b", name: "again"}, {id: 22, k2: "b", name: "first"}})
	defer b.Release()
	before := len(onlyData(dataFiles(t, dir)))
	checkNotStreaming(t, streamedStage(t, w, key, a, b), "a repeated key")
	precommitAndCommit(t, w, key)
	want := names(0, 1, 2, 3, 5, 6, 7, 8, 9)("r")
	want[4], want[20], want[22] = "first", "first", "first"
	checkMerged(t, w, dir, mem, want, before)
}

// TestMergeStreamWriteFails: when a streamed write fails, Precommit
// writes the output again from the source; nothing of the failed writes
// is published or left behind.
func TestMergeStreamWriteFails(t *testing.T) {
	w, dir, mem := seededIDMerge(t)
	key := writers.AutoKey("put")
	a := diffRecord(mem, []diffRow{{id: 20, k2: "b", name: "n20"}, {id: 5, k2: "b", name: "n5"}})
	defer a.Release()
	before := len(onlyData(dataFiles(t, dir)))
	s := streamedStage(t, w, key, a)
	// A batch the file cannot take (another schema) fails the next write,
	// as a failing disk would.
	bad := arrowRecord(mem, arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int32}}, nil))
	defer bad.Release()
	if !s.out.send(context.Background(), bad) {
		t.Fatal("the queue refused a batch")
	}
	for deadline := time.Now().Add(10 * time.Second); !s.out.failed.Load(); {
		if time.Now().After(deadline) {
			t.Fatal("the bad batch's write did not fail")
		}
		runtime.Gosched()
	}
	// The next batch ends the guess: the writes stop.
	b := diffRecord(mem, []diffRow{{id: 21, k2: "b", name: "n21"}})
	defer b.Release()
	checkNotStreaming(t, streamedStage(t, w, key, b), "a failed write")
	precommitAndCommit(t, w, key)
	want := names(0, 1, 2, 3, 4, 6, 7, 8, 9)("r")
	want[5], want[20], want[21] = "n5", "n20", "n21"
	checkMerged(t, w, dir, mem, want, before)
}

// TestMergeTransactionNotStreamed: a transaction's merge (not an
// auto-commit stream) writes nothing before Precommit, which it may call
// much later: its files would hold a file-writer slot meanwhile.
func TestMergeTransactionNotStreamed(t *testing.T) {
	w, dir, mem := seededIDMerge(t)
	key := writers.TxnKey{Writer: "job", Epoch: 1}
	a := diffRecord(mem, []diffRow{{id: 20, k2: "b", name: "n20"}})
	defer a.Release()
	before := len(onlyData(dataFiles(t, dir)))
	checkNotStreaming(t, streamedStage(t, w, key, a), "a transaction's batch")
	precommitAndCommit(t, w, key)
	want := names(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)("r")
	want[20] = "n20"
	checkMerged(t, w, dir, mem, want, before)
}

// TestMergeStreamRolledBack: a rollback while the output streams stops
// the writes and leaves no file; every batch is released (the checked
// allocator).
func TestMergeStreamRolledBack(t *testing.T) {
	w, dir, mem := seededIDMerge(t)
	key := writers.AutoKey("put")
	before := dataFiles(t, dir)
	for i := range 5 {
		rec := diffRecord(mem, []diffRow{{id: int64(100 + i), k2: "b", name: "x"}})
		streamedStage(t, w, key, rec)
		rec.Release()
	}
	if err := w.Rollback(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if after := dataFiles(t, dir); len(after) != len(before) {
		t.Fatalf("files before %v, after the rollback %v", before, after)
	}
	if got := diffState(t, w, mem); !maps.Equal(got, names(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)("r")) {
		t.Fatalf("rows = %v after a rollback", got)
	}
}

// TestMergeStreamFlushesIdle: once the queue is empty, the streamed file
// cuts what it holds into a page (at least minIdlePage of it), so that
// Precommit does not encode those rows: the file has written bytes
// before Precommit although it holds less than a full page.
func TestMergeStreamFlushesIdle(t *testing.T) {
	w, _, mem := seededIDMerge(t)
	key := writers.AutoKey("put")
	rows := make([]diffRow, 60_000)
	for i := range rows {
		rows[i] = diffRow{id: int64(1000 + i), k2: "b", val: float64(i), name: fmt.Sprintf("a longer name for row %d", i)}
	}
	rec := diffRecord(mem, rows)
	defer rec.Release()
	if size := util.TotalRecordSize(rec); size < minIdlePage || size >= 2*minIdlePage {
		t.Fatalf("the batch holds %d bytes: want between one and two idle pages (%d)", size, minIdlePage)
	}
	s := streamedStage(t, w, key, rec)
	if err := s.awaitOut(); err != nil {
		t.Fatal(err)
	}
	f, ok := s.openFile()
	if !ok || f.fw.BytesWritten() == 0 || f.Buffered() >= minIdlePage {
		t.Fatalf("open file (%v): %d bytes written, %d held: want the rows cut into a page", ok, f.fw.BytesWritten(), f.Buffered())
	}
	precommitAndCommit(t, w, key)
	if got := len(diffState(t, w, mem)); got != 10+len(rows) {
		t.Fatalf("%d live rows, want %d", got, 10+len(rows))
	}
}

// checkNotStreaming fails unless s writes nothing before Precommit and
// holds no file (and so no file-writer slot) after what.
func checkNotStreaming(t *testing.T, s *stage, what string) {
	t.Helper()
	if s.streamed || s.out != nil || s.files != nil {
		t.Fatalf("after %s: streamed %v, out %v, files %v: the writes go on, or hold their file slot", what, s.streamed, s.out, s.files)
	}
}

// checkMerged fails unless w's live rows (id -> name) are want and the
// dataset in dir holds one data file more than before: the merge's
// output, no file of a dropped guess left behind.
func checkMerged(t *testing.T, w *Writer, dir string, mem memory.Allocator, want map[int64]string, before int) {
	t.Helper()
	if got := diffState(t, w, mem); !maps.Equal(got, want) {
		t.Fatalf("rows = %v, want %v", got, want)
	}
	if after := len(onlyData(dataFiles(t, dir))); after != before+1 {
		t.Fatalf("%d data files before the merge, %d after: want one more", before, after)
	}
}

// arrowRecord returns a one-row record of schema s (int32 columns).
func arrowRecord(mem memory.Allocator, s *arrow.Schema) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, s)
	defer b.Release()
	for _, f := range b.Fields() {
		f.(*array.Int32Builder).Append(1)
	}
	return b.NewRecordBatch()
}
