package delta

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/internal/duckcheck"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/writertest"
)

// TestOptimizeCompactsAndPurges: optimize rewrites the small files of a
// table with deletion vectors into one file without the deleted rows, in
// an OPTIMIZE commit that changes no data; readers (ours, DuckDB) see the
// same rows before and after, the version before still reads as it was,
// a second optimize finds nothing to do, and upserts go on.
func TestOptimizeCompactsAndPurges(t *testing.T) {
	ctx := context.Background()
	mem := checkedMem(t)
	cfg := upsertDVConfig(fileURI(t))
	w := openWriter(t, cfg, mem)
	db := duckcheck.Open(t)
	cols := []string{"id", "str"}
	seedIDs(t, w, mem, [2]int32{0, 50}, [2]int32{50, 100}, [2]int32{100, 150})
	rec := idBatch(mem, idChange{10, "ten", "U"}, idChange{60, "", "D"}, idChange{120, "x", "U"})
	commitOne(t, w, writers.TxnKey{Writer: "u", Epoch: 1}, rec)
	rec.Release()
	before := snapshot(t, cfg)
	rows := tableRows(t, cfg, cols)
	dvFiles := 0
	for _, a := range before.Files() {
		if a.DeletionVector != nil {
			dvFiles++
		}
	}
	if dvFiles == 0 || before.NumFiles() < 4 {
		t.Fatalf("setup: %d files, %d with deletion vectors; want several small files and deletion vectors", before.NumFiles(), dvFiles)
	}

	res, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: 128 << 20})
	if err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, cfg)
	if res.Version != before.Version+1 || res.FilesRemoved != int64(before.NumFiles()) || res.FilesAdded != 1 || after.NumFiles() != 1 || res.Rows != int64(len(rows)) {
		t.Fatalf("optimize %+v: want version %d, %d files removed, 1 added holding %d rows (table has %d files)", res, before.Version+1, before.NumFiles(), len(rows), after.NumFiles())
	}
	if a := after.Files()[0]; a.DeletionVector != nil || a.DataChange {
		t.Fatalf("compacted file %+v: want no deletion vector and dataChange false", a)
	}
	sameRows(t, "after optimize, our reader", tableRows(t, cfg, cols), rows)
	sameRows(t, "after optimize, DuckDB", duckRows(t, db, cfg, cols), rows)
	for _, a := range readCommit(t, cfg, res.Version) {
		switch {
		case a.CommitInfo != nil && (a.CommitInfo.Operation != "OPTIMIZE" || a.CommitInfo.OperationMetrics["numRemovedFiles"] != "4"):
			t.Errorf("commitInfo %+v: want operation OPTIMIZE with numRemovedFiles 4", a.CommitInfo)
		case a.Add != nil && a.Add.DataChange, a.Remove != nil && a.Remove.DataChange:
			t.Errorf("action %+v: optimize changes no data", a)
		}
	}
	old, err := deltalog.LoadVersion(ctx, tableBucket(t, cfg), before.Version)
	if err != nil || old.NumFiles() != before.NumFiles() {
		t.Fatalf("time travel to %d: %v (%d files)", before.Version, err, old.NumFiles())
	}

	again, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: 128 << 20})
	if err != nil || again != (writers.OptimizeResult{Version: res.Version}) {
		t.Fatalf("second optimize = %+v, %v: want nothing done at version %d", again, err, res.Version)
	}
	rec = idBatch(mem, idChange{11, "eleven", "U"})
	commitOne(t, w, writers.TxnKey{Writer: "u", Epoch: 2}, rec)
	rec.Release()
	sameRows(t, "upsert after optimize", tableRows(t, cfg, cols), applyIDs(rows, []idChange{{11, "eleven", "U"}}))
}

// TestOptimizeConcurrentWriters: optimize runs while appends commit (they
// never conflict: both rebase) and while upserts commit (one of the two
// may lose and is retried); no row is lost or repeated.
func TestOptimizeConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	mem := checkedMem(t)
	cfg := upsertDVConfig(memURI(t))
	w := openWriter(t, cfg, mem)
	seedIDs(t, w, mem, [2]int32{0, 20}, [2]int32{20, 40})
	rows := tableRows(t, cfg, []string{"id", "str"})

	var wg sync.WaitGroup
	stop := make(chan struct{})
	var upsertErr error
	var mu sync.Mutex
	wg.Go(func() {
		for epoch := int64(1); ; epoch++ {
			select {
			case <-stop:
				return
			default:
			}
			ch := idChange{int32(1000 + epoch), "new", "U"}
			rec := idBatch(mem, ch)
			key := writers.TxnKey{Writer: "up", Epoch: epoch}
			d := precommitOne(t, w, key, rec)
			rec.Release()
			_, err := w.Commit(ctx, key, []writers.Descriptor{d})
			mu.Lock()
			switch {
			case err == nil:
				rows = applyIDs(rows, []idChange{ch})
			case !errors.Is(err, writers.ErrConflict):
				upsertErr = err
			}
			mu.Unlock()
			if err != nil && !errors.Is(err, writers.ErrConflict) {
				return
			}
		}
	})
	optimized := 0
	for range 5 {
		_, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: 128 << 20})
		if err != nil && !errors.Is(err, writers.ErrConflict) {
			t.Fatalf("optimize: %v", err)
		}
		if err == nil {
			optimized++
		}
	}
	close(stop)
	wg.Wait()
	if upsertErr != nil {
		t.Fatal(upsertErr)
	}
	if optimized == 0 {
		t.Fatal("no optimize succeeded")
	}
	sameRows(t, "after concurrent optimize and upserts", tableRows(t, cfg, []string{"id", "str"}), rows)
}

// TestVacuum: vacuum deletes the files optimize removed, and their
// deletion vectors, once past the retention; it keeps the live files,
// the files of a transaction precommitted but not committed (in flight)
// until UntrackedMinAge, and deletes nothing in a dry run.
func TestVacuum(t *testing.T) {
	ctx := context.Background()
	mem := checkedMem(t)
	cfg := upsertDVConfig(fileURI(t))
	w := openWriter(t, cfg, mem)
	cols := []string{"id", "str"}
	seedIDs(t, w, mem, [2]int32{0, 50}, [2]int32{50, 100})
	rec := idBatch(mem, idChange{10, "ten", "U"})
	commitOne(t, w, writers.TxnKey{Writer: "u", Epoch: 1}, rec)
	rec.Release()
	rec = idBatch(mem, idChange{70, "seventy", "U"})
	inflight := precommitOne(t, w, writers.TxnKey{Writer: "u", Epoch: 2}, rec)
	rec.Release()
	if _, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: 128 << 20}); err != nil {
		t.Fatal(err)
	}
	rows := tableRows(t, cfg, cols)
	root := strings.TrimPrefix(cfg.TableURI, "file://")
	countFiles := func() (data, dvs int) {
		entries, _ := os.ReadDir(root)
		for _, e := range entries {
			switch {
			case strings.HasSuffix(e.Name(), ".parquet"):
				data++
			case strings.HasSuffix(e.Name(), ".bin"):
				dvs++
			}
		}
		return data, dvs
	}
	data0, dvs0 := countFiles()

	dry, err := w.Vacuum(ctx, writers.VacuumRequest{Retention: 0, UntrackedMinAge: time.Hour, DryRun: true})
	if err != nil || !dry.DryRun || dry.FilesDeleted == 0 {
		t.Fatalf("dry run = %+v, %v: want files counted", dry, err)
	}
	if d, v := countFiles(); d != data0 || v != dvs0 {
		t.Fatalf("dry run deleted files: %d/%d data files, %d/%d deletion vectors left", d, data0, v, dvs0)
	}
	res, err := w.Vacuum(ctx, writers.VacuumRequest{Retention: 0, UntrackedMinAge: time.Hour})
	if err != nil || res.FilesDeleted != dry.FilesDeleted {
		t.Fatalf("vacuum = %+v, %v: want the %d files of the dry run deleted", res, err, dry.FilesDeleted)
	}
	// Left: the compacted file, the file the in-flight upsert read (which
	// optimize spared), and the in-flight upsert's new file and deletion
	// vector.
	if d, v := countFiles(); d != 3 || v != 1 {
		t.Fatalf("after vacuum: %d data files and %d deletion vectors, want 3 (compacted, read by the upsert in flight, its new one) and 1 (in flight)", d, v)
	}
	sameRows(t, "after vacuum", tableRows(t, cfg, cols), rows)
	// The in-flight upsert still commits: optimize left its files alone.
	if _, err := w.Commit(ctx, writers.TxnKey{Writer: "u", Epoch: 2}, []writers.Descriptor{inflight}); err != nil {
		t.Fatalf("commit of an upsert precommitted before optimize: %v", err)
	}
	sameRows(t, "after the upsert", tableRows(t, cfg, cols), applyIDs(rows, []idChange{{70, "seventy", "U"}}))

	// An unreferenced file is kept until UntrackedMinAge.
	stray := filepath.Join(root, "part-stray.parquet")
	if err := os.WriteFile(stray, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Vacuum(ctx, writers.VacuumRequest{Retention: 0, UntrackedMinAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stray); err != nil {
		t.Fatalf("a new unreferenced file was deleted before UntrackedMinAge: %v", err)
	}
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(stray, old, old)
	if _, err := w.Vacuum(ctx, writers.VacuumRequest{Retention: 0, UntrackedMinAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stray); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an unreferenced file older than UntrackedMinAge survived: %v", err)
	}
}

// TestVacuumCleansLog: with every log file older than the log retention,
// vacuum deletes the commits and checkpoints below the newest checkpoint;
// the table reads the same, time travel works from that checkpoint on and
// not before.
func TestVacuumCleansLog(t *testing.T) {
	ctx := context.Background()
	mem := checkedMem(t)
	cfg := testConfig(fileURI(t), func(c *Config) { c.CheckpointInterval = 3 })
	w := openWriter(t, cfg, mem)
	commitEach(t, w, mem, 0, 8)
	want := publishedRows(t, cfg)
	ageLog(cfg, 40*24*time.Hour)
	res, err := w.Vacuum(ctx, writers.VacuumRequest{Retention: 168 * time.Hour, UntrackedMinAge: 168 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// Versions 0..7; checkpoints at 3 and 6: versions 0-5 and checkpoint 3 go.
	if res.LogFilesDeleted != 7 {
		t.Fatalf("log files deleted = %d, want 7 (commits 0-5, checkpoint 3)", res.LogFilesDeleted)
	}
	b := tableBucket(t, cfg)
	if got := publishedRows(t, cfg); got != want {
		t.Fatalf("rows after log cleanup: %d, want %d", got, want)
	}
	if _, err := deltalog.LoadVersion(ctx, b, 6); err != nil {
		t.Fatalf("time travel to the checkpoint: %v", err)
	}
	if _, err := deltalog.LoadVersion(ctx, b, 4); err == nil {
		t.Fatal("time travel before the checkpoint still works: the log was not cleaned")
	}
}

// TestCheckpointCleansLog: a commit that writes a checkpoint cleans the
// log up in the background, as Spark's metadata cleanup does: the commits
// older than the log retention below that checkpoint go.
func TestCheckpointCleansLog(t *testing.T) {
	mem := checkedMem(t)
	cfg := testConfig(fileURI(t), func(c *Config) { c.CheckpointInterval = 3 })
	w := openWriter(t, cfg, mem)
	commitEach(t, w, mem, 0, 4) // versions 0-3, a checkpoint at 3
	ageLog(cfg, 40*24*time.Hour)
	commitEach(t, w, mem, 4, 7) // version 6 writes a checkpoint: versions 0-2 are older than 30 days, below checkpoint 3
	logDir := filepath.Join(strings.TrimPrefix(cfg.TableURI, "file://"), "_delta_log")
	first := filepath.Join(logDir, filepath.Base(deltalog.CommitKey(0)))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(first); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("version 0 is still in the log 10s after a checkpoint past the log retention")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(logDir, filepath.Base(deltalog.CommitKey(3)))); err != nil {
		t.Fatalf("version 3 (the checkpoint's) was deleted: %v", err)
	}
	if got := publishedRows(t, cfg); got != 70 {
		t.Fatalf("rows after log cleanup: %d, want 70", got)
	}
}

// TestOptimizeSparesPrecommittedUpserts: optimize leaves alone the files a
// precommitted upsert of this server read, so the upsert still commits
// (its transaction may be decided on other endpoints already); once it
// committed, or was rolled back, optimize compacts them too.
func TestOptimizeSparesPrecommittedUpserts(t *testing.T) {
	ctx := context.Background()
	mem := checkedMem(t)
	cfg := upsertDVConfig(memURI(t))
	w := openWriter(t, cfg, mem)
	seedIDs(t, w, mem, [2]int32{0, 20}, [2]int32{20, 40}, [2]int32{40, 60})
	rows := tableRows(t, cfg, []string{"id", "str"})

	for _, finish := range []string{"commit", "rollback"} {
		changes := []idChange{{5, "changed-" + finish, "U"}}
		rec := idBatch(mem, changes...)
		key := writers.TxnKey{Writer: "up-" + finish, Epoch: 1}
		d := precommitOne(t, w, key, rec)
		rec.Release()
		res, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: 128 << 20})
		if err != nil {
			t.Fatalf("%s: optimize while an upsert is precommitted: %v", finish, err)
		}
		if finish == "commit" {
			if _, err := w.Commit(ctx, key, []writers.Descriptor{d}); err != nil {
				t.Fatalf("the precommitted upsert after optimize (%d files rewritten): %v", res.FilesRemoved, err)
			}
			rows = applyIDs(rows, changes)
		} else if err := w.Rollback(ctx, key); err != nil {
			t.Fatal(err)
		}
		sameRows(t, finish, tableRows(t, cfg, []string{"id", "str"}), rows)
	}
	// Nothing pinned any more: everything compacts into one file.
	if _, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: 128 << 20}); err != nil {
		t.Fatal(err)
	}
	snap := snapshot(t, cfg)
	if n := len(snap.Files()); n != 1 {
		t.Errorf("%d files after the last optimize, want 1", n)
	}
	sameRows(t, "after the last optimize", tableRows(t, cfg, []string{"id", "str"}), rows)
}

// TestLogCleanupGuards: log cleanup keeps a week of log whatever
// delta.logRetentionDuration says (a precommitted upsert commits by reading
// the log from its plan's version), and none of it once the table sets
// delta.enableExpiredLogCleanup false, as Spark does.
func TestLogCleanupGuards(t *testing.T) {
	ctx := context.Background()
	mem := checkedMem(t)
	cfg := testConfig(fileURI(t), func(c *Config) { c.CheckpointInterval = 3 })
	w := openWriter(t, cfg, mem)
	commitEach(t, w, mem, 0, 4)
	setTableProperty(t, cfg, "delta.logRetentionDuration", "interval 1 hour")
	commitEach(t, w, mem, 4, 7) // a checkpoint at 6
	vacuum := func() int64 {
		res, err := w.Vacuum(ctx, writers.VacuumRequest{Retention: 168 * time.Hour, UntrackedMinAge: 168 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return res.LogFilesDeleted
	}
	ageLog(cfg, 2*24*time.Hour)
	if n := vacuum(); n != 0 {
		t.Fatalf("a 1-hour log retention deleted %d log files of 2 days: want a week kept", n)
	}
	setTableProperty(t, cfg, "delta.enableExpiredLogCleanup", "false")
	ageLog(cfg, 40*24*time.Hour)
	if n := vacuum(); n != 0 {
		t.Fatalf("delta.enableExpiredLogCleanup false: %d log files deleted, want none", n)
	}
}

// commitEach commits one auto-commit stream of 10 rows per i in [from, to):
// one table version each.
func commitEach(t *testing.T, w *Writer, mem memory.Allocator, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		rec := idRecord(mem, writertest.Schema(), i*10, 10)
		commitOne(t, w, writers.AutoKey("s"), rec)
		rec.Release()
	}
}

// ageLog sets the modification time of every file in cfg's _delta_log to
// d ago.
func ageLog(cfg *Config, d time.Duration) {
	logDir := filepath.Join(strings.TrimPrefix(cfg.TableURI, "file://"), "_delta_log")
	old := time.Now().Add(-d)
	entries, _ := os.ReadDir(logDir)
	for _, e := range entries {
		os.Chtimes(filepath.Join(logDir, e.Name()), old, old)
	}
}

// upsertPrecommitted is an upsert precommitted on a table of three
// files, with the table's rows before it.
type upsertPrecommitted struct {
	w       *Writer
	cfg     *Config
	mem     memory.Allocator
	key     writers.TxnKey
	desc    writers.Descriptor
	rows    []string
	changes []idChange
}

// precommitUpsert precommits an upsert of ids 5 and 45 on a new table of
// ids 0-59 in three files.
func precommitUpsert(t *testing.T) upsertPrecommitted {
	t.Helper()
	p := upsertPrecommitted{mem: checkedMem(t), cfg: upsertDVConfig(memURI(t)), key: writers.TxnKey{Writer: "up", Epoch: 1}}
	p.w = openWriter(t, p.cfg, p.mem)
	seedIDs(t, p.w, p.mem, [2]int32{0, 20}, [2]int32{20, 40}, [2]int32{40, 60})
	p.rows = tableRows(t, p.cfg, []string{"id", "str"})
	p.changes = []idChange{{5, "changed", "U"}, {45, "changed", "U"}}
	rec := idBatch(p.mem, p.changes...)
	p.desc = precommitOne(t, p.w, p.key, rec)
	rec.Release()
	return p
}

// TestOptimizeSparesRecoveredUpserts: an upsert precommitted before a
// restart is pinned again when the coordinator hands it to the new writer
// (KeepPrecommitted), so optimize leaves its files alone and it commits.
func TestOptimizeSparesRecoveredUpserts(t *testing.T) {
	ctx := context.Background()
	p := precommitUpsert(t)
	before, cfg, mem, key, d := p.w, p.cfg, p.mem, p.key, p.desc

	if err := before.Close(ctx); err != nil { // the restart
		t.Fatal(err)
	}
	after := openWriter(t, cfg, mem) // the restarted server's writer
	after.KeepPrecommitted(key, []writers.Descriptor{d})
	if _, err := after.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: 128 << 20}); err != nil {
		t.Fatal(err)
	}
	if _, err := after.Commit(ctx, key, []writers.Descriptor{d}); err != nil {
		t.Fatalf("the upsert precommitted before the restart, after optimize: %v", err)
	}
	sameRows(t, "after the upsert", tableRows(t, cfg, []string{"id", "str"}), applyIDs(p.rows, p.changes))
}

// TestOptimizeSparesOtherEndpointsUpsert: two endpoints of one server on
// one table share its pins: an optimize through the other endpoint's
// writer leaves the files an upsert precommitted here read, and the
// upsert commits.
func TestOptimizeSparesOtherEndpointsUpsert(t *testing.T) {
	ctx := context.Background()
	p := precommitUpsert(t)
	upserts, cfg, mem, key, d := p.w, p.cfg, p.mem, p.key, p.desc

	other := openWriter(t, cfg, mem) // another endpoint of the table
	if _, err := other.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: 128 << 20}); err != nil {
		t.Fatal(err)
	}
	if _, err := upserts.Commit(ctx, key, []writers.Descriptor{d}); err != nil {
		t.Fatalf("an upsert precommitted on this server failed after another endpoint's optimize: %v", err)
	}
	sameRows(t, "after the upsert", tableRows(t, cfg, []string{"id", "str"}), applyIDs(p.rows, p.changes))
}
