package delta

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"golang.org/x/sync/errgroup"

	"github.com/quiver-ingest/quiver/bench/workload"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/parquetio"
)

// BenchmarkWrite measures the sink without Flight: per op, 1 or 4
// concurrent auto-commit streams of the standard workload written,
// precommitted and committed to a file:// table, next to parquetio
// encoding the same batches into io.Discard as often at once (the raw
// encoder the sink is built on), per codec.
func BenchmarkWrite(b *testing.B) {
	const rows int64 = 1 << 20
	batches, size := workloadBatches(b, rows)
	for _, bc := range []struct {
		codec   string
		streams int
	}{{CodecZstd, 1}, {CodecSnappy, 1}, {CodecZstd, 4}, {CodecSnappy, 4}} {
		codec, streams := bc.codec, bc.streams
		name := fmt.Sprintf("%s/streams=%d", codec, streams)
		b.Run("sink-"+name, func(b *testing.B) {
			cfg := testConfig("file://"+filepath.Join(b.TempDir(), "t"), func(c *Config) { c.Parquet.Compression = codec })
			w, err := New(cfg, writers.Env{})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if err := w.Open(ctx); err != nil {
				b.Fatal(err)
			}
			defer w.Close(ctx)
			measure(b, size, rows, streams, func(id int) error {
				return writeStream(ctx, w, writers.AutoKey(fmt.Sprint(id)), batches)
			})
		})
		b.Run("raw-"+name, func(b *testing.B) {
			measure(b, size, rows, streams, func(int) error { return encodeRaw(batches, codec) })
		})
	}
}

// measure runs op streams times at once per benchmark op, each with an id
// unique in the benchmark, and reports rows/s over all of them.
func measure(b *testing.B, size, rows int64, streams int, op func(id int) error) {
	b.ReportAllocs()
	b.SetBytes(size * int64(streams))
	n := 0
	for b.Loop() {
		n++
		var g errgroup.Group
		for i := range streams {
			g.Go(func() error { return op(n*streams + i) })
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows*int64(streams)*int64(n))/b.Elapsed().Seconds(), "rows/s")
}

func writeStream(ctx context.Context, w *Writer, key writers.TxnKey, batches []arrow.RecordBatch) error {
	for _, r := range batches {
		if err := w.Write(ctx, key, r); err != nil {
			return err
		}
	}
	d, err := w.Precommit(ctx, key)
	if err != nil {
		return err
	}
	_, err = w.Commit(ctx, key, []writers.Descriptor{d})
	return err
}

func encodeRaw(batches []arrow.RecordBatch, codec string) error {
	pw, err := parquetio.NewWriter(io.Discard, batches[0].Schema(), parquetio.Options{Compression: codec, RowGroupRows: 128 << 10})
	if err != nil {
		return err
	}
	for _, r := range batches {
		if err := pw.Write(r); err != nil {
			pw.Close()
			return err
		}
	}
	_, err = pw.Close()
	return err
}

// BenchmarkUpsert merges, per op, a 200,000-row changelog of the standard
// workload (100,000 existing ids spread over the whole table with new
// values, 100,000 new ids) into a file:// table seeded with 2,000,000
// rows, merge_keys [id], one transaction: collapse, key scan of every
// candidate file, rewrites (copy-on-write) or deletion vectors, new files
// and the commit. It reports rows/s of the changelog, files rewritten or
// marked and bytes written per op.
func BenchmarkUpsert(b *testing.B) {
	b.Run("copy-on-write", func(b *testing.B) { benchmarkUpsert(b, false, false) })
	b.Run("deletion-vectors", func(b *testing.B) { benchmarkUpsert(b, true, false) })
	b.Run("deletion-vectors-row-tracking", func(b *testing.B) { benchmarkUpsert(b, true, true) })
}

func benchmarkUpsert(b *testing.B, dvs, rowTracking bool) {
	const (
		tableRows  = 2_000_000
		changeRows = 200_000
	)
	ctx := context.Background()
	uri := "file://" + filepath.Join(b.TempDir(), "t")
	seed, err := New(testConfig(uri, func(c *Config) { c.DeletionVectors = dvs }), writers.Env{})
	if err != nil {
		b.Fatal(err)
	}
	if err := seed.Open(ctx); err != nil {
		b.Fatal(err)
	}
	table, err := workload.Generate(memory.DefaultAllocator, workload.DefaultSeed, tableRows, workload.DefaultBatchRows)
	if err != nil {
		b.Fatal(err)
	}
	err = writeStream(ctx, seed, writers.AutoKey("seed"), table)
	workload.ReleaseAll(table)
	if err == nil {
		err = seed.Close(ctx)
	}
	if err != nil {
		b.Fatal(err)
	}

	cfg := testConfig(uri, func(c *Config) { c.WriteMode, c.MergeKeys, c.DeletionVectors = ModeUpsert, []string{"id"}, dvs })
	if rowTracking {
		enableRowTracking(b, cfg)
	}
	w, err := New(cfg, writers.Env{})
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Open(ctx); err != nil {
		b.Fatal(err)
	}
	defer w.Close(ctx)
	changes, err := workload.Generate(memory.DefaultAllocator, workload.DefaultSeed+1, changeRows, workload.DefaultBatchRows)
	if err != nil {
		b.Fatal(err)
	}
	defer workload.ReleaseAll(changes)
	var size int64
	for _, r := range changes {
		size += util.TotalRecordSize(r)
	}

	b.ReportAllocs()
	b.SetBytes(size)
	var rewritten, marked, written int
	epoch := int64(0)
	for b.Loop() {
		epoch++
		// Even rows hit existing ids 20k + s, s = (epoch-1) mod 20, still
		// in the seed's (rewritten) files, so every op rewrites the whole
		// table as the first does (the ids of an earlier op now sit in its
		// small file of live rows); odd rows insert ids never used before.
		batches := workload.WithIDs(memory.DefaultAllocator, changes, func(row int64) int64 {
			if row%2 == 0 {
				return row*10 + (epoch-1)%20
			}
			return tableRows + epoch*changeRows + row
		})
		key := writers.TxnKey{Writer: "bench", Epoch: epoch}
		for _, r := range batches {
			if err := w.Write(ctx, key, r); err != nil {
				b.Fatal(err)
			}
		}
		workload.ReleaseAll(batches)
		d, err := w.Precommit(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.Commit(ctx, key, []writers.Descriptor{d}); err != nil {
			b.Fatal(err)
		}
		desc, err := decodeDescriptor(d)
		if err != nil {
			b.Fatal(err)
		}
		rewritten += len(desc.Upsert.Removes)
		marked += len(desc.Upsert.Updates)
		for _, a := range desc.Adds {
			written += int(a.Size)
		}
	}
	n := float64(epoch)
	b.ReportMetric(changeRows*n/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(rewritten)/n, "files-rewritten/op")
	b.ReportMetric(float64(marked)/n, "files-marked/op")
	b.ReportMetric(float64(written)/n/(1<<20), "MiB-written/op")
}

// BenchmarkOptimize measures optimize of a table of 200 files of 2,000
// rows of the standard workload (zstd), each op on a fresh copy.
func BenchmarkOptimize(b *testing.B) {
	const files, perFile = 200, 2000
	batches, err := workload.Generate(memory.DefaultAllocator, workload.DefaultSeed, files*perFile, perFile)
	if err != nil {
		b.Fatal(err)
	}
	defer workload.ReleaseAll(batches)
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		cfg := testConfig("file://" + filepath.Join(b.TempDir(), "t"))
		w, err := New(cfg, writers.Env{})
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Open(ctx); err != nil {
			b.Fatal(err)
		}
		for i, rec := range batches {
			if err := writeStream(ctx, w, writers.AutoKey(fmt.Sprint(i)), []arrow.RecordBatch{rec}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		res, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: 128 << 20})
		if err != nil || res.FilesRemoved != files {
			b.Fatalf("optimize = %+v, %v", res, err)
		}
		b.StopTimer()
		w.Close(ctx)
	}
	b.ReportMetric(float64(files*perFile*b.N)/b.Elapsed().Seconds(), "rows/s")
}
