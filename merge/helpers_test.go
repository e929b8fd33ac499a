package merge

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// checkedMem returns a checked allocator asserted empty at test end.
func checkedMem(t testing.TB) *memory.CheckedAllocator {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// fromJSON builds a record of schema from a JSON array of row objects.
func fromJSON(t testing.TB, mem memory.Allocator, schema *arrow.Schema, rows string) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(mem, schema, strings.NewReader(rows))
	if err != nil {
		t.Fatalf("record from JSON: %v", err)
	}
	return rec
}

// int64Keys returns an encoder of a lone int64 key column that has
// encoded vals.
func int64Keys(t testing.TB, vals []int64) *KeyEncoder {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	enc, err := NewKeyEncoder(schema, []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues(vals, nil)
	col := b.NewArray()
	b.Release()
	defer col.Release()
	if err := enc.EncodeColumns([]arrow.Array{col}, len(vals)); err != nil {
		t.Fatal(err)
	}
	return enc
}

// rowStrings renders recs as one "a|b|c" string per row, nulls as (null).
func rowStrings(recs []arrow.RecordBatch) []string {
	var out []string
	for _, rec := range recs {
		for i := range int(rec.NumRows()) {
			cells := make([]string, rec.NumCols())
			for c, col := range rec.Columns() {
				cells[c] = col.ValueStr(i)
			}
			out = append(out, strings.Join(cells, "|"))
		}
	}
	return out
}

// collapseAll runs a Collapser over recs (released here) and returns the
// result.
func collapseAll(t testing.TB, mem memory.Allocator, keys []string, recs ...arrow.RecordBatch) (*Result, error) {
	t.Helper()
	c, err := NewCollapser(recs[0].Schema(), Options{Keys: keys, Allocator: mem})
	if err != nil {
		for _, r := range recs {
			r.Release()
		}
		return nil, err
	}
	defer c.Close()
	for _, r := range recs {
		err := c.Add(r)
		r.Release()
		if err != nil {
			return nil, err
		}
	}
	return c.Result()
}

func equalStrings(t testing.TB, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\ngot  %q\nwant %q", what, got, want)
	}
}
