package deltaexpr

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// BenchmarkFirstViolation evaluates a constraint of each kind over a batch
// of 64Ki rows that all pass (the whole batch is evaluated); allocations
// are per batch, not per row.
func BenchmarkFirstViolation(b *testing.B) {
	const n = 64 << 10
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "price", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "status", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	statuses := []string{"new", "paid", "shipped"}
	for i := range n {
		rb.Field(0).(*array.Int64Builder).Append(int64(i + 1))
		rb.Field(1).(*array.Float64Builder).Append(float64(i%1000) / 2)
		rb.Field(2).(*array.StringBuilder).Append(statuses[i%3])
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	for name, text := range map[string]string{
		"comparison": "id > 0",
		"between":    "price BETWEEN 0 AND 1000.5",
		"in":         "status IN ('new', 'paid', 'shipped')",
		"combined":   "id IS NOT NULL AND (price >= 0 OR status = 'new') AND NOT (status <=> 'lost')",
	} {
		b.Run(name, func(b *testing.B) {
			e, err := Parse(text)
			if err != nil {
				b.Fatal(err)
			}
			bound, err := e.Bind(schema)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(n) // "MB/s" reads as million rows per second
			b.ReportAllocs()
			for b.Loop() {
				if row, bad := bound.FirstViolation(rec); bad {
					b.Fatalf("row %d violates", row)
				}
			}
		})
	}
}
