package lance

import (
	"context"
	"os"
	"path/filepath"
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
