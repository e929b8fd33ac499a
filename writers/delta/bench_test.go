package delta

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"golang.org/x/sync/errgroup"

	"github.com/quiver-ingest/quiver/bench/workload"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
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
	b.Run("deletion-vectors-all-features", func(b *testing.B) { benchmarkUpsertAllFeatures(b) })
}

// benchmarkUpsertAllFeatures is deletion-vectors in a table with the log
// features of a new Databricks table, created empty as Spark's CREATE
// TABLE does (allFeaturesTable) and seeded by Quiver.
func benchmarkUpsertAllFeatures(b *testing.B) {
	uri := "file://" + filepath.Join(b.TempDir(), "t")
	allFeaturesTable(b, uri)
	benchmarkUpsertInto(b, uri, true, false)
}

// allFeaturesTable writes version 0 of an empty table of the workload's
// schema at uri with the features of bench/delta_vs_reference.py's
// all-features table: column mapping in name mode (col-<uuid> physical
// names), row tracking, deletion vectors, V2 checkpoints, in-commit
// timestamps, checkpoint interval 2.
func allFeaturesTable(b *testing.B, uri string) {
	b.Helper()
	types := map[arrow.Type]string{arrow.INT64: "long", arrow.TIMESTAMP: "timestamp", arrow.FLOAT64: "double", arrow.STRING: "string", arrow.BOOL: "boolean"}
	var fields []map[string]any
	for i, f := range workload.Schema().Fields() {
		fields = append(fields, map[string]any{"name": f.Name, "type": types[f.Type.ID()], "nullable": true,
			"metadata": map[string]any{"delta.columnMapping.id": i + 1, "delta.columnMapping.physicalName": fmt.Sprintf("col-%d-%s", i, f.Name)}})
	}
	schema, err := json.Marshal(map[string]any{"type": "struct", "fields": fields})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UnixMilli()
	actions := []map[string]any{
		{"commitInfo": map[string]any{"timestamp": now, "inCommitTimestamp": now, "operation": "CREATE TABLE"}},
		{"protocol": map[string]any{"minReaderVersion": 3, "minWriterVersion": 7,
			"readerFeatures": []string{"columnMapping", "deletionVectors", "v2Checkpoint"},
			"writerFeatures": []string{"columnMapping", "deletionVectors", "v2Checkpoint", "rowTracking", "domainMetadata", "inCommitTimestamp", "appendOnly", "invariants"}}},
		{"metaData": map[string]any{"id": "bench-all-features", "format": map[string]any{"provider": "parquet", "options": map[string]any{}},
			"schemaString": string(schema), "partitionColumns": []string{}, "createdTime": now,
			"configuration": map[string]string{
				"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": fmt.Sprint(len(fields)),
				"delta.enableRowTracking":                     "true",
				deltalog.MaterializedRowIDProperty:            "_row-id-col-bench",
				deltalog.MaterializedRowCommitVersionProperty: "_row-commit-version-col-bench",
				"delta.enableDeletionVectors":                 "true",
				"delta.checkpointPolicy":                      "v2",
				"delta.enableInCommitTimestamps":              "true",
				"delta.inCommitTimestampEnablementVersion":    "0",
				"delta.inCommitTimestampEnablementTimestamp":  fmt.Sprint(now),
				"delta.checkpointInterval":                    "2",
			}}},
	}
	var log []byte
	for _, a := range actions {
		line, err := json.Marshal(a)
		if err != nil {
			b.Fatal(err)
		}
		log = append(append(log, line...), '\n')
	}
	dir := filepath.Join(strings.TrimPrefix(uri, "file://"), "_delta_log")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d.json", 0)), log, 0o644); err != nil {
		b.Fatal(err)
	}
}

func benchmarkUpsert(b *testing.B, dvs, rowTracking bool) {
	benchmarkUpsertInto(b, "file://"+filepath.Join(b.TempDir(), "t"), dvs, rowTracking)
}

// benchmarkUpsertInto seeds the table at uri (created by the seed's first
// commit unless it exists) and measures upserts into it.
func benchmarkUpsertInto(b *testing.B, uri string, dvs, rowTracking bool) {
	const (
		tableRows  = 2_000_000
		changeRows = 200_000
	)
	ctx := context.Background()
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
	cpu0 := cpuSeconds(b)
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
	// CPU time (the process's: background key indexing included) varies
	// less than wall time on a loaded machine.
	b.ReportMetric((cpuSeconds(b)-cpu0)/n, "cpu-s/op")
	b.ReportMetric(changeRows*n/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(rewritten)/n, "files-rewritten/op")
	b.ReportMetric(float64(marked)/n, "files-marked/op")
	b.ReportMetric(float64(written)/n/(1<<20), "MiB-written/op")
}

// cpuSeconds returns the user and system CPU time the process has used.
func cpuSeconds(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
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
