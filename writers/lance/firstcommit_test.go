package lance

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/writertest"
)

// A first stream writes data files but no manifest until its commit: a
// rolled-back one leaves no version behind, and an empty transactional
// commit on a fresh endpoint creates no dataset either.
func TestFirstStreamCreatesDatasetAtCommit(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	_, dir := dbDir(t, "t")
	w := newWriter(t, dir, mem)
	defer w.Close(context.Background())
	ctx := context.Background()
	versions := func() int {
		entries, _ := os.ReadDir(filepath.Join(dir, "_versions"))
		return len(entries)
	}
	key := writers.TxnKey{Writer: "first", Epoch: 1}
	rec := writertest.ZeroRecord(mem, writertest.Schema(), 3)
	defer rec.Release()
	if err := w.Write(ctx, key, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Precommit(ctx, key); err != nil {
		t.Fatal(err)
	}
	if n := versions(); n != 0 {
		t.Fatalf("%d versions while the first stream is precommitted, want none", n)
	}
	if err := w.Rollback(ctx, key); err != nil {
		t.Fatal(err)
	}
	empty, err := w.Precommit(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	info, err := w.Commit(ctx, key, []writers.Descriptor{empty})
	if err != nil || info.Version != writers.NoVersion {
		t.Fatalf("empty commit on a fresh endpoint = %+v, %v; want NoVersion", info, err)
	}
	if n := versions(); n != 0 {
		t.Fatalf("%d versions after an empty commit on a fresh endpoint, want none", n)
	}
}

// A stream into a new dataset writes files of the configured format (2.2)
// while another writer creates the dataset in format 2.0: its commit is
// refused naming both formats and publishes nothing; the replay writes its
// files in 2.0 and commits.
func TestFirstCommitIntoDatasetOfAnotherFormat(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	_, dir := dbDir(t, "t")
	ctx := context.Background()
	w := newWriter(t, dir, mem) // data_storage_version: the default, 2.2
	defer w.Close(ctx)
	cfg := NewConfig()
	cfg.DatasetURI, cfg.DataStorageVersion = "file://"+dir, "2.0"
	other, err := New(cfg, writers.Env{Endpoint: "other", Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	stream := func(w *Writer, key writers.TxnKey, rows int) (writers.CommitInfo, error) {
		rec := writertest.ZeroRecord(mem, writertest.Schema(), rows)
		defer rec.Release()
		if err := w.Write(ctx, key, rec); err != nil {
			t.Fatal(err)
		}
		desc, err := w.Precommit(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return w.Commit(ctx, key, []writers.Descriptor{desc})
	}
	key := writers.TxnKey{Writer: "a", Epoch: 1}
	rec := writertest.ZeroRecord(mem, writertest.Schema(), 5)
	err = w.Write(ctx, key, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	desc, err := w.Precommit(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream(other, writers.TxnKey{Writer: "b", Epoch: 1}, 3); err != nil {
		t.Fatal(err)
	}
	_, err = w.Commit(ctx, key, []writers.Descriptor{desc})
	if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "2.2") || !strings.Contains(err.Error(), "2.0") {
		t.Fatalf("commit of 2.2 files into a 2.0 dataset: %v, want ErrInvalid naming both formats", err)
	}
	if got := published(t, w); got != 3 {
		t.Fatalf("%d rows published, want the other writer's 3", got)
	}
	if err := w.Rollback(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := stream(w, key, 5); err != nil {
		t.Fatalf("replay: %v", err)
	}
	d, err := w.latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range d.Manifest.Fragments {
		for _, df := range f.Files {
			if df.Minor != 0 {
				t.Errorf("fragment %d: file format %d.%d in a 2.0 dataset", f.ID, df.Major, df.Minor)
			}
		}
	}
	if got := published(t, w); got != 8 {
		t.Fatalf("%d rows published, want 8", got)
	}
}

// TestEmptyEpochOnAFreshMergeDataset: a merge_insert endpoint's first
// epoch with no rows (a stream that sent its schema only) records the
// epoch, so that committed-epoch answers it, and the next epoch merges.
func TestEmptyEpochOnAFreshMergeDataset(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg := NewConfig()
	cfg.DatasetURI = "file://" + t.TempDir()
	cfg.WriteMode, cfg.On = ModeMergeInsert, []string{"id"}
	w := openWriter(t, cfg, mem)
	defer w.Close(context.Background())
	empty := scenarioRows(mem, 0, 0)
	commitRows(t, w, writers.TxnKey{Writer: "q", Epoch: 0}, empty)
	empty.Release()
	if epoch, ok, err := w.CommittedEpoch(context.Background(), "q"); err != nil || !ok || epoch != 0 {
		t.Fatalf("CommittedEpoch = %d, %v, %v; want epoch 0 recorded", epoch, ok, err)
	}
	rows := scenarioRows(mem, 0, 5)
	commitRows(t, w, writers.TxnKey{Writer: "q", Epoch: 1}, rows)
	rows.Release()
	if n := published(t, w); n != 5 {
		t.Fatalf("%d rows published, want 5", n)
	}
}
