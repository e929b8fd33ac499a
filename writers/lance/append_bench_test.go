package lance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
)

// cardinalityBatches builds rows like bench/lance_append_vs_pylance.py's
// cardinality table (int64 id, timestamp, strings of 16 and 20,000
// distinct values, float64, int32, bool) in batches of batchRows.
func cardinalityBatches(rows, batchRows int) []arrow.RecordBatch {
	rng := rand.New(rand.NewPCG(1, 2))
	low := make([]string, 16)
	for i := range low {
		low[i] = fmt.Sprintf("category-%d", i)
	}
	medium := make([]string, 20_000)
	for i := range medium {
		medium[i] = fmt.Sprintf("user-%010x", rng.Uint64()>>24)
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "category", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "user", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "quantity", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "active", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	}, nil)
	var out []arrow.RecordBatch
	for start := 0; start < rows; start += batchRows {
		n := min(batchRows, rows-start)
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for i := start; i < start+n; i++ {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(1_764_700_000_000_000 + int64(i)*1000))
			b.Field(2).(*array.StringBuilder).Append(low[rng.IntN(len(low))])
			b.Field(3).(*array.StringBuilder).Append(medium[rng.IntN(len(medium))])
			b.Field(4).(*array.Float64Builder).Append(rng.Float64() * 1000)
			b.Field(5).(*array.Int32Builder).Append(int32(rng.IntN(1000)))
			b.Field(6).(*array.BooleanBuilder).Append(rng.IntN(2) == 0)
		}
		out = append(out, b.NewRecordBatch())
		b.Release()
	}
	return out
}

// BenchmarkAppendCardinality: one append of 500,000 rows of the
// cardinality table into a fresh dataset, in process (no Flight): what the
// server spends per row of bench-lance-append.
func BenchmarkAppendCardinality(b *testing.B) {
	const rows = 500_000
	batches := cardinalityBatches(rows, 65_536)
	defer func() {
		for _, r := range batches {
			r.Release()
		}
	}()
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		w := newWriter(&testing.T{}, b.TempDir(), memory.DefaultAllocator)
		key := writers.AutoKey(fmt.Sprint(i))
		for _, r := range batches {
			if err := w.Write(ctx, key, r); err != nil {
				b.Fatal(err)
			}
		}
		desc, err := w.Precommit(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.Commit(ctx, key, []writers.Descriptor{desc}); err != nil {
			b.Fatal(err)
		}
		w.Close(ctx)
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrows/s")
}
