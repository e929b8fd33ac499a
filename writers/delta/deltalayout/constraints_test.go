package deltalayout

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/quiver-ingest/quiver/writers/delta/deltaexpr"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// TestConstraintsBoundPerSchema: a layout binds its constraints once per
// Arrow schema of the rows it checks, not per batch.
func TestConstraintsBoundPerSchema(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	e, err := deltaexpr.Parse("v >= 0")
	if err != nil {
		t.Fatal(err)
	}
	l := &Layout{Cons: []deltalog.Constraint{{Name: "pos", Text: "v >= 0", Expr: e}}}
	var first []*deltaexpr.Bound
	for i, cols := range [][]string{{"id", "v"}, {"id", "v"}, {"v"}} {
		rec := int64Batch(mem, cols...)
		if err := l.CheckRows(context.Background(), mem, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		switch got := l.checks.bound[0]; {
		case i == 0:
			first = l.checks.bound
		case i == 1 && got != first[0]:
			t.Errorf("batch of the same schema bound again")
		case i == 2 && got == first[0]:
			t.Errorf("batch of another schema not bound to it")
		}
	}
}

// int64Batch returns one row of int64 columns named names, each holding 1.
func int64Batch(mem memory.Allocator, names ...string) arrow.RecordBatch {
	var fields []arrow.Field
	for _, n := range names {
		fields = append(fields, arrow.Field{Name: n, Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	}
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer b.Release()
	for i := range names {
		b.Field(i).(*array.Int64Builder).Append(1)
	}
	return b.NewRecordBatch()
}
