package lance

import (
	"context"
	"runtime/debug"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/bench/workload"
	"github.com/quiver-ingest/quiver/writers"
)

// The merge-insert benchmark (bench/scenario/mergeinsert) in process,
// without Flight: a 2,000,000-row dataset of the standard workload, then
// sources of 200,000 rows (workload.MergeSource: half existing ids with
// new values, half new) merged on [id] with update_all + insert_all.
const benchBaseRows, benchSrcRows = 2_000_000, 200_000

// mergeBench is a base dataset of storage version (Quiver's default when
// empty) in a temporary directory.
type mergeBench struct {
	b       *testing.B
	mem     memory.Allocator
	dir     string
	version string
}

func newMergeBench(b *testing.B, version string) *mergeBench {
	mb := &mergeBench{b: b, mem: memory.NewGoAllocator(), dir: b.TempDir(), version: version}
	base, err := workload.Generate(mb.mem, workload.DefaultSeed, benchBaseRows, workload.DefaultBatchRows)
	if err != nil {
		b.Fatal(err)
	}
	appender := mb.open(ModeAppend)
	_, err = commitRecs(appender, 1, base)
	workload.ReleaseAll(base)
	appender.Close(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	src := mb.source(0)
	size, err := workload.TotalIPCBodyBytes(mb.mem, src)
	workload.ReleaseAll(src)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	return mb
}

// open returns an open writer of mode on the dataset.
func (mb *mergeBench) open(mode string) *Writer {
	cfg := NewConfig()
	cfg.DatasetURI = "file://" + mb.dir
	cfg.WriteMode = mode
	cfg.DataStorageVersion = mb.version
	if mode == ModeMergeInsert {
		cfg.On = []string{"id"}
	}
	w, err := New(cfg, writers.Env{Endpoint: "items", Allocator: mb.mem})
	if err != nil {
		mb.b.Fatal(err)
	}
	if err := w.Open(context.Background()); err != nil {
		mb.b.Fatal(err)
	}
	return w
}

// source returns merge source round (the caller releases it).
func (mb *mergeBench) source(round int) []arrow.RecordBatch {
	src, err := workload.MergeSource(mb.mem, benchBaseRows, benchSrcRows, round)
	if err != nil {
		mb.b.Fatal(err)
	}
	return src
}

// merge builds source round off the clock and merges it with w (whose
// commit is epoch round+2).
func (mb *mergeBench) merge(w *Writer, round int) {
	mb.b.StopTimer()
	src := mb.source(round)
	defer workload.ReleaseAll(src)
	mb.b.StartTimer()
	if _, err := commitRecs(w, int64(round)+2, src); err != nil {
		mb.b.Fatal(err)
	}
}

// BenchmarkMergeWarmIndex times merges by a writer whose key index the
// first source built, each until its commit's background index patch is
// done.
func BenchmarkMergeWarmIndex(b *testing.B) {
	mb := newMergeBench(b, "")
	w := mb.open(ModeMergeInsert)
	defer w.Close(context.Background())
	mb.merge(w, 0) // builds the index
	indexIdle(w)
	b.ResetTimer()
	round := 1
	for b.Loop() {
		mb.merge(w, round)
		indexIdle(w) // the clock covers the commit's background index patch
		round++
	}
	b.ReportMetric(float64(benchSrcRows*(round-1))/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkMergeCold times the first merge of a new writer (its key index
// cold: it scans the key columns) on datasets of each storage version,
// until the commit; the background index build after it is off the clock.
// Each merge adds 100,000 rows to the dataset.
func BenchmarkMergeCold(b *testing.B) {
	for _, v := range []string{"2.0", "2.1", "2.2"} {
		b.Run(v, func(b *testing.B) {
			mb := newMergeBench(b, v)
			round := 0
			for b.Loop() {
				b.StopTimer()
				w := mb.open(ModeMergeInsert)
				b.StartTimer()
				mb.merge(w, round)
				b.StopTimer()
				w.Close(context.Background())
				b.StartTimer()
				round++
			}
			b.ReportMetric(float64(benchSrcRows*round)/b.Elapsed().Seconds(), "rows/s")
		})
	}
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

// BenchmarkKeyIndexBuild times building the key index of the base dataset
// from scratch (what the background does after a cold merge's commit).
func BenchmarkKeyIndexBuild(b *testing.B) {
	mb := newMergeBench(b, "")
	w := mb.open(ModeMergeInsert)
	defer w.Close(context.Background())
	ctx := context.Background()
	d, err := w.latest(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		debug.FreeOSMemory() // a server builds its index in memory it had not used yet
		b.StartTimer()
		x := newKeyIndex()
		if _, err := x.sync(ctx, w.bucket, d, w.cfg.On, 0, mb.mem); err != nil {
			b.Fatal(err)
		}
		if x.Len() != benchBaseRows {
			b.Fatalf("%d keys", x.Len())
		}
	}
	b.ReportMetric(float64(benchBaseRows)*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
}
