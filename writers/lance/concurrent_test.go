package lance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
	"github.com/quiver-ingest/quiver/writers/writertest"
)

// TestConcurrentRecords: a commit conflicts with a concurrent version
// that records its epoch (or a later one) for its writer, or a seq of its
// stream writers at or above the first one it publishes; other writers
// and earlier seqs do not conflict.
func TestConcurrentRecords(t *testing.T) {
	seqs := []writers.WriterSeq{{Writer: "c1", First: 5, Last: 9}}
	version := func(props map[string]string) *lancetable.Transaction {
		return &lancetable.Transaction{Properties: props}
	}
	for _, tt := range []struct {
		name     string
		key      writers.TxnKey
		seqs     []writers.WriterSeq
		other    map[string]string
		conflict bool
	}{
		{"same epoch", writers.TxnKey{Writer: "job", Epoch: 3}, nil, map[string]string{propWriter: "job", propEpoch: "3"}, true},
		{"older epoch", writers.TxnKey{Writer: "job", Epoch: 3}, nil, map[string]string{propWriter: "job", propEpoch: "2"}, false},
		{"other writer", writers.TxnKey{Writer: "job", Epoch: 3}, nil, map[string]string{propWriter: "other", propEpoch: "7"}, false},
		{"seqs overlap", writers.AutoKey("g"), seqs, map[string]string{propSeqs: `{"c1":5,"c2":1}`}, true},
		{"seqs before", writers.AutoKey("g"), seqs, map[string]string{propSeqs: `{"c1":4}`}, false},
		{"auto without seqs", writers.AutoKey("g"), nil, map[string]string{propSeqs: `{"c1":5}`}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rule := concurrentRecords(tt.key, tt.seqs)
			var err error
			if rule != nil {
				err = rule(version(tt.other))
			}
			if got := errors.Is(err, writers.ErrConflict); got != tt.conflict {
				t.Fatalf("conflict = %v (%v), want %v", got, err, tt.conflict)
			}
		})
	}
}

// TestSeqsRaceAcrossServers: two writers of one dataset (two servers)
// commit group commits holding the same stream writer's seq at the same
// time, again and again: each seq is published once, the other commit
// answering Replayed or ErrConflict (it lost the race and its plan saw
// the winner's seqs).
func TestSeqsRaceAcrossServers(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	_, dir := dbDir(t, "race")
	a, b := newWriter(t, dir, mem), newWriter(t, dir, mem)
	defer a.Close(context.Background())
	defer b.Close(context.Background())
	ctx := context.Background()
	rec := writertest.ZeroRecord(mem, writertest.Schema(), 1)
	defer rec.Release()
	group := func(w *Writer, i int) error {
		key := writers.AutoKey(fmt.Sprintf("g-%p-%d", w, i))
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
	if err := group(a, -1); err != nil { // the dataset exists before the races
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
	if n := published(t, a); n != rounds+1 {
		t.Fatalf("%d rows published, want %d: a seq raced by two servers landed twice", n, rounds+1)
	}
}
