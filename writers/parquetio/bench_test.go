package parquetio

import (
	"io"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/bench/workload"
)

// benchRows is the size of the benchmark file. The standard workload has
// 2,000,000 rows; a quarter keeps one iteration short while still filling
// several row groups.
const benchRows = 500_000

// BenchmarkWrite encodes the standard workload (workload.Generate) into one
// Parquet file per iteration, discarding the bytes.
func BenchmarkWrite(b *testing.B) {
	recs, err := workload.Generate(memory.DefaultAllocator, workload.DefaultSeed, benchRows, workload.DefaultBatchRows)
	if err != nil {
		b.Fatal(err)
	}
	defer releaseAll(recs)
	var arrowBytes int64
	for _, rec := range recs {
		for _, c := range rec.Columns() {
			for _, buf := range c.Data().Buffers() {
				if buf != nil {
					arrowBytes += int64(buf.Len())
				}
			}
		}
	}
	// Nullable fields without nulls, as pyarrow and pandas send them by
	// default: optional Parquet columns, with definition levels.
	nullable := nullableCopies(recs)
	defer releaseAll(nullable)
	for _, codec := range []string{CompressionSnappy, CompressionZstd} {
		for name, recs := range map[string][]arrow.RecordBatch{"": recs, "-nullable": nullable} {
			b.Run(codec+name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(arrowBytes)
				var size int64
				for b.Loop() {
					size = writeDiscard(b, recs, Options{Compression: codec})
				}
				b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
				b.ReportMetric(float64(size), "file-bytes")
			})
		}
	}
}

// nullableCopies returns recs with every field marked nullable.
func nullableCopies(recs []arrow.RecordBatch) []arrow.RecordBatch {
	fields := slices.Clone(recs[0].Schema().Fields())
	for i := range fields {
		fields[i].Nullable = true
	}
	schema := arrow.NewSchema(fields, nil)
	out := make([]arrow.RecordBatch, len(recs))
	for i, r := range recs {
		out[i] = array.NewRecordBatch(schema, r.Columns(), r.NumRows())
	}
	return out
}

func writeDiscard(b *testing.B, recs []arrow.RecordBatch, opts Options) int64 {
	w, err := NewWriter(io.Discard, recs[0].Schema(), opts)
	if err != nil {
		b.Fatal(err)
	}
	for _, rec := range recs {
		if err := w.Write(rec); err != nil {
			b.Fatal(err)
		}
	}
	fs, err := w.Close()
	if err != nil {
		b.Fatal(err)
	}
	return fs.Bytes
}
