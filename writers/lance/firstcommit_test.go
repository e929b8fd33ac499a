package lance

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
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

// Two servers commit the first streams of a dataset at once, of different
// schemas: one creates the dataset, the other is refused (ErrInvalid) and
// publishes nothing.
func TestConcurrentFirstCommitsOfDifferentSchemas(t *testing.T) {
	other := arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.BinaryTypes.String},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	for range 5 {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		_, dir := dbDir(t, "t")
		ws := []*Writer{newWriter(t, dir, mem), newWriter(t, dir, mem)}
		recs := []arrow.RecordBatch{writertest.ZeroRecord(mem, writertest.Schema(), 5), writertest.ZeroRecord(mem, other, 7)}
		keys := []writers.TxnKey{{Writer: "a", Epoch: 1}, {Writer: "b", Epoch: 1}}
		descs := make([]writers.Descriptor, 2)
		for i, w := range ws {
			err := w.Write(context.Background(), keys[i], recs[i])
			recs[i].Release()
			if err != nil {
				t.Fatal(err)
			}
			if descs[i], err = w.Precommit(context.Background(), keys[i]); err != nil {
				t.Fatal(err)
			}
		}
		errs := make([]error, 2)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, w := range ws {
			wg.Go(func() {
				<-start
				_, errs[i] = w.Commit(context.Background(), keys[i], []writers.Descriptor{descs[i]})
			})
		}
		close(start)
		wg.Wait()
		winner := 0
		if errs[0] != nil {
			winner = 1
		}
		if errs[winner] != nil || !errors.Is(errs[1-winner], writers.ErrInvalid) {
			t.Fatalf("commits: %v; want one to commit and the other refused with ErrInvalid", errs)
		}
		if got, want := published(t, ws[0]), []int64{5, 7}[winner]; got != want {
			t.Fatalf("%d rows published, want the winner's %d", got, want)
		}
		if _, ok, _ := ws[1-winner].CommittedEpoch(context.Background(), keys[1-winner].Writer); ok {
			t.Fatal("the refused commit recorded its epoch")
		}
		for _, w := range ws {
			w.Close(context.Background())
		}
		mem.AssertSize(t, 0)
	}
}
