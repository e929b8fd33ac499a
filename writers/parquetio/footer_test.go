package parquetio

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"
)

// Large binary values used to be copied whole into the footer's chunk
// statistics (5 MB of random binary made a 2 MB footer): bounds longer than
// maxFooterStatBytes are left out, short ones stay, and the file reads back.
func TestFooterLeavesOutLongBounds(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "blob", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := range 320 {
		blob := make([]byte, 16<<10)
		for j := range blob {
			blob[j] = byte(rng.UintN(256))
		}
		b.Field(0).(*array.BinaryBuilder).Append(blob)
		b.Field(1).(*array.StringBuilder).Append(string(rune('a' + i%26)))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()

	data, _ := writeFile(t, schema, Options{RowGroupRows: 64, NoDictionary: true}, rec)
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if f.Size() < 5<<20 {
		t.Fatalf("file of %d bytes: the test needs 5 MB of binary", f.Size())
	}
	meta := f.Metadata()
	if len(meta.RowGroups) != 5 {
		t.Fatalf("%d row groups, want 5", len(meta.RowGroups))
	}
	for _, rg := range meta.RowGroups {
		blob, name := rg.Columns[0].MetaData.Statistics, rg.Columns[1].MetaData.Statistics
		if blob.MinValue != nil || blob.MaxValue != nil {
			t.Fatalf("blob chunk keeps bounds of %d and %d bytes", len(blob.MinValue), len(blob.MaxValue))
		}
		if string(name.MinValue) != "a" || string(name.MaxValue) != "z" {
			t.Fatalf("name chunk bounds %q..%q, want a..z", name.MinValue, name.MaxValue)
		}
	}
	footer := int(data[len(data)-8]) | int(data[len(data)-7])<<8 | int(data[len(data)-6])<<16
	if footer > 64<<10 {
		t.Fatalf("footer of %d bytes", footer)
	}
	_, got := readAll(t, data, mem, ReadOptions{})
	defer releaseAll(got)
	assertSameRows(t, schema, rowsOf([]arrow.RecordBatch{rec}), rowsOf(got))
}
