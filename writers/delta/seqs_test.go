package delta

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/writertest"
)

// TestSeqsRaceAcrossServers: two writers of one table (two servers)
// commit group commits holding the same stream writer's seq at the same
// time, again and again: each seq is published once (deltalog's txn
// conflict makes the loser plan again and see the winner's txn), the
// other commit answering Replayed or ErrConflict; CommittedEpoch reads
// every writer's seq.
func TestSeqsRaceAcrossServers(t *testing.T) {
	mem := checkedMem(t)
	cfg := testConfig(fileURI(t))
	a, b := openWriter(t, cfg, mem), openWriter(t, cfg, mem)
	ctx := context.Background()
	group := func(w *Writer, i int) error {
		key := writers.AutoKey(fmt.Sprintf("g-%p-%d", w, i))
		rec := idRecord(mem, writertest.Schema(), i, 1)
		defer rec.Release()
		if err := w.Write(ctx, key, rec); err != nil {
			return err
		}
		desc, err := w.Precommit(ctx, key)
		if err != nil {
			return err
		}
		info, err := w.CommitSeqs(ctx, key, []writers.Descriptor{desc}, []writers.WriterSeq{{Writer: fmt.Sprintf("s%d", i), First: 0, Last: 0}})
		if err == nil && info.Replayed || errors.Is(err, writers.ErrConflict) {
			return w.Rollback(ctx, key)
		}
		return err
	}
	if err := group(a, 100); err != nil { // the table exists before the races
		t.Fatal(err)
	}
	const rounds = 20
	for i := range rounds {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, w := range []*Writer{a, b} {
			wg.Go(func() { errs[j] = group(w, i) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	}
	if n := publishedRows(t, cfg); n != rounds+1 {
		t.Fatalf("%d rows published, want %d: a seq raced by two servers landed twice", n, rounds+1)
	}
	if seq, ok, err := b.CommittedEpoch(ctx, "s7"); err != nil || !ok || seq != 0 {
		t.Fatalf("CommittedEpoch(s7) = %d %v %v, want 0", seq, ok, err)
	}
}
