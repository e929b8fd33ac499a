package lance

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/bench/workload"
	"github.com/quiver-ingest/quiver/writers"
)

// BenchmarkMergeWarmIndex is the warm-index merge of the merge-insert
// benchmark (bench/scenario/mergeinsert) in process, without Flight: a
// 2,000,000-row dataset of the standard workload, then sources of 200,000
// rows (workload.MergeSource: half existing ids with new values, half new)
// merged on [id] with update_all + insert_all by a writer whose key index
// the first source built. Each merge is timed until its commit's
// background index patch is done.
func BenchmarkMergeWarmIndex(b *testing.B) {
	const baseRows, srcRows = 2_000_000, 200_000
	mem := memory.NewGoAllocator()
	dir := b.TempDir()
	ctx := context.Background()
	open := func(mode string) *Writer {
		cfg := NewConfig()
		cfg.DatasetURI = "file://" + dir
		cfg.WriteMode = mode
		if mode == ModeMergeInsert {
			cfg.On = []string{"id"}
		}
		w, err := New(cfg, writers.Env{Endpoint: "items", Allocator: mem})
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Open(ctx); err != nil {
			b.Fatal(err)
		}
		return w
	}
	base, err := workload.Generate(mem, workload.DefaultSeed, baseRows, workload.DefaultBatchRows)
	if err != nil {
		b.Fatal(err)
	}
	appender := open(ModeAppend)
	_, err = commitRecs(appender, 1, base)
	workload.ReleaseAll(base)
	appender.Close(ctx)
	if err != nil {
		b.Fatal(err)
	}
	w := open(ModeMergeInsert)
	defer w.Close(ctx)
	// merge builds source round off the clock and merges it.
	merge := func(round int) {
		b.StopTimer()
		src, err := workload.MergeSource(mem, baseRows, srcRows, round)
		if err != nil {
			b.Fatal(err)
		}
		defer workload.ReleaseAll(src)
		b.StartTimer()
		if _, err := commitRecs(w, int64(round)+2, src); err != nil {
			b.Fatal(err)
		}
		indexIdle(w) // the clock covers the commit's background index patch
	}
	merge(0) // builds the index
	src, err := workload.MergeSource(mem, baseRows, srcRows, 0)
	if err != nil {
		b.Fatal(err)
	}
	size, err := workload.TotalIPCBodyBytes(mem, src)
	workload.ReleaseAll(src)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	round := 1
	for b.Loop() {
		merge(round)
		round++
	}
	b.ReportMetric(float64(srcRows*(round-1))/b.Elapsed().Seconds(), "rows/s")
}

// commitRecs writes recs (borrowed) as transaction (bench, epoch) and
// commits it.
func commitRecs(w *Writer, epoch int64, recs []arrow.RecordBatch) (writers.CommitInfo, error) {
	ctx := context.Background()
	key := writers.TxnKey{Writer: "bench", Epoch: epoch}
	for _, rec := range recs {
		if err := w.Write(ctx, key, rec); err != nil {
			return writers.CommitInfo{}, err
		}
	}
	d, err := w.Precommit(ctx, key)
	if err != nil {
		return writers.CommitInfo{}, err
	}
	return w.Commit(ctx, key, []writers.Descriptor{d})
}
