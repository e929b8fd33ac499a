package deltalayout

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Conform returns rec with the columns of schema, in its order: columns
// rec lacks (files written before a column was added) as nulls, columns of
// another Arrow type (a dictionary, another string width) cast. The
// caller releases the result.
func Conform(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch, schema *arrow.Schema) (arrow.RecordBatch, error) {
	n := rec.NumRows()
	cols := make([]arrow.Array, 0, schema.NumFields())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for _, f := range schema.Fields() {
		idx := rec.Schema().FieldIndices(f.Name)
		if len(idx) == 0 {
			cols = append(cols, array.MakeArrayOfNull(mem, f.Type, int(n)))
			continue
		}
		col := rec.Column(idx[0])
		if arrow.TypeEqual(col.DataType(), f.Type) {
			col.Retain()
			cols = append(cols, col)
			continue
		}
		cast, err := compute.CastArray(compute.WithAllocator(ctx, mem), col, compute.SafeCastOptions(f.Type))
		if err != nil {
			return nil, fmt.Errorf("column %q: %s to %s: %w", f.Name, col.DataType(), f.Type, err)
		}
		cols = append(cols, cast)
	}
	return array.NewRecordBatch(schema, cols, n), nil
}
