package lance

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/internal/lanceprobe/probetest"
	"github.com/quiver-ingest/quiver/writers"
)

// TestVacuumLanceDB: vacuum removes the versions older than the retention
// but the latest and the one holding a writer's newest epoch, and the
// files only they referenced (LanceDB's deletion files included); a dry
// run deletes nothing; an unreferenced file waits for UntrackedMinAge.
// LanceDB then reads the latest rows and every version left, a fresh
// writer still knows the epoch (exactly-once survives), and both go on
// writing.
func TestVacuumLanceDB(t *testing.T) {
	probetest.Dir(t)
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	db, dir := dbDir(t, "items")
	w := newWriter(t, dir, mem)
	defer w.Close(ctx)
	for i, key := range []writers.TxnKey{writers.AutoKey("a"), {Writer: "job", Epoch: 1}, writers.AutoKey("b"), writers.AutoKey("c")} {
		r := scenarioRows(mem, i*5, i*5+5)
		commitRows(t, w, key, r) // versions 1-4, 5 rows each
		r.Release()
	}
	probetest.Run(t, "verify", db, "items", "--mutate") // LanceDB: update (a deletion file) and delete: versions 5, 6
	r := scenarioRows(mem, 100, 103)
	commitRows(t, w, writers.AutoKey("d"), r) // version 7
	r.Release()
	stray := filepath.Join(dir, "data", "stray.lance")
	if err := os.WriteFile(stray, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := func() int {
		n := 0
		filepath.WalkDir(dir, func(_ string, d os.DirEntry, _ error) error {
			if !d.IsDir() {
				n++
			}
			return nil
		})
		return n
	}
	before := files()

	dry, err := w.Vacuum(ctx, writers.VacuumRequest{UntrackedMinAge: time.Hour, DryRun: true})
	if err != nil || dry.LogFilesDeleted != 5 || dry.FilesDeleted == 0 || files() != before {
		t.Fatalf("dry run = %+v, %v (%d files, %d before): want versions 1 and 3-6 counted, nothing deleted", dry, err, files(), before)
	}
	res, err := w.Vacuum(ctx, writers.VacuumRequest{UntrackedMinAge: time.Hour})
	if err != nil || res.LogFilesDeleted != 5 || res.FilesDeleted != dry.FilesDeleted {
		t.Fatalf("vacuum = %+v, %v: want what the dry run counted", res, err)
	}
	if _, err := os.Stat(stray); err != nil {
		t.Fatalf("a new unreferenced file was deleted: %v", err)
	}
	out := probetest.Run(t, "verify", db, "items")
	wantLines(t, out, "== latest: version=7 rows=23", "v2 rows=10", "v7 rows=23")
	if strings.Contains(out, "v1 rows") || strings.Contains(out, "v6 rows") {
		t.Fatalf("removed versions still listed:\n%s", out)
	}

	// A fresh writer (a restart) still finds job's epoch, in version 2.
	fresh := newWriter(t, dir, mem)
	defer fresh.Close(ctx)
	if e, ok, err := fresh.CommittedEpoch(ctx, "job"); err != nil || !ok || e != 1 {
		t.Fatalf("CommittedEpoch after vacuum = %d, %v, %v; want 1", e, ok, err)
	}
	r = scenarioRows(mem, 200, 202)
	if info := commitRows(t, fresh, writers.TxnKey{Writer: "job", Epoch: 1}, r); !info.Replayed {
		t.Fatalf("epoch 1 committed again after vacuum: %+v", info)
	}
	r.Release()
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(stray, old, old)
	if _, err := fresh.Vacuum(ctx, writers.VacuumRequest{UntrackedMinAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stray); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an unreferenced file older than UntrackedMinAge survived: %v", err)
	}
	probetest.Run(t, "append", db, "items", "--from", "300", "--count", "2")
	wantLines(t, probetest.Run(t, "verify", db, "items"), "== latest: version=8 rows=25")
}
