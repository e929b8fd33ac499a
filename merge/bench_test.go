package merge

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
)

const (
	benchRows      = 1 << 20
	benchBatchRows = 65536
)

// benchChangelog builds benchRows rows of a workload-like changelog in
// 65,536-row batches, keys drawn from benchRows/2 values (about half the
// rows repeat a key) and one row in ten a delete.
func benchChangelog(b *testing.B, stringKey bool) (*arrow.Schema, []arrow.RecordBatch) {
	b.Helper()
	keyType := arrow.DataType(arrow.PrimitiveTypes.Int64)
	if stringKey {
		keyType = arrow.BinaryTypes.String
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: keyType},
		{Name: "_op", Type: arrow.BinaryTypes.String},
		{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us},
		{Name: "amount", Type: arrow.PrimitiveTypes.Float64},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64},
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "active", Type: arrow.FixedWidthTypes.Boolean},
	}, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []arrow.RecordBatch
	bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer bld.Release()
	for range benchRows / benchBatchRows {
		for range benchBatchRows {
			k := rng.Int64N(benchRows / 2)
			if stringKey {
				bld.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("user-%012d", k))
			} else {
				bld.Field(0).(*array.Int64Builder).Append(k)
			}
			op := "U"
			if rng.IntN(10) == 0 {
				op = "D"
			}
			bld.Field(1).(*array.StringBuilder).Append(op)
			bld.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(k * 1000))
			bld.Field(3).(*array.Float64Builder).Append(rng.Float64() * 100)
			bld.Field(4).(*array.Float64Builder).Append(rng.Float64())
			bld.Field(5).(*array.StringBuilder).Append(fmt.Sprint("name-", k%1000))
			bld.Field(6).(*array.BooleanBuilder).Append(k%2 == 0)
		}
		recs = append(recs, bld.NewRecordBatch())
	}
	b.Cleanup(func() {
		for _, r := range recs {
			r.Release()
		}
	})
	return schema, recs
}

func BenchmarkCollapse(b *testing.B) {
	for _, stringKey := range []bool{false, true} {
		name := "int64-key"
		if stringKey {
			name = "string-key"
		}
		b.Run(name, func(b *testing.B) {
			schema, recs := benchChangelog(b, stringKey)
			var size int64
			for _, r := range recs {
				size += util.TotalRecordSize(r)
			}
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				c, err := NewCollapser(schema, Options{Keys: []string{"id"}})
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range recs {
					if err := c.Add(r); err != nil {
						b.Fatal(err)
					}
				}
				res, err := c.Result()
				if err != nil {
					b.Fatal(err)
				}
				res.Release()
			}
			b.ReportMetric(float64(benchRows*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
