package parquetio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"

	"github.com/quiver-ingest/quiver/writers"
)

func TestUnsupportedTypes(t *testing.T) {
	cases := []struct {
		name   string
		field  arrow.Field
		column string
	}{
		{"unsigned", arrow.Field{Name: "u", Type: arrow.PrimitiveTypes.Uint32}, "u"},
		{"float16", arrow.Field{Name: "h", Type: arrow.FixedWidthTypes.Float16}, "h"},
		{"duration", arrow.Field{Name: "d", Type: arrow.FixedWidthTypes.Duration_ms}, "d"},
		{"nested child", arrow.Field{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "t", Type: arrow.FixedWidthTypes.Time32s})}, "s.t"},
		{"list element", arrow.Field{Name: "l", Type: arrow.ListOf(arrow.Null)}, "l.item"},
		{"negative scale", arrow.Field{Name: "n", Type: &arrow.Decimal128Type{Precision: 5, Scale: -1}}, "n"},
		{"empty struct", arrow.Field{Name: "e", Type: arrow.StructOf()}, "e"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			schema := arrow.NewSchema([]arrow.Field{c.field}, nil)
			assertInvalid(t, CheckSchema(schema), `"`+c.column+`"`)
			_, err := NewWriter(io.Discard, schema, Options{})
			assertInvalid(t, err, `"`+c.column+`"`)
		})
	}
}

func TestBadOptions(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	_, err := NewWriter(io.Discard, schema, Options{Compression: "lz4"})
	assertInvalid(t, err, "lz4")
	_, err = NewWriter(io.Discard, schema, Options{RowGroupRows: -1})
	assertInvalid(t, err, "row group")
}

// TestTooManyColumns: parquet-go numbers columns in 16 bits, so a schema
// of more leaves is refused up front instead of panicking in Write. The
// leaves of nested fields count.
func TestTooManyColumns(t *testing.T) {
	fields := make([]arrow.Field, maxColumns-1)
	for i := range fields {
		fields[i] = arrow.Field{Name: fmt.Sprint("c", i), Type: arrow.PrimitiveTypes.Int64}
	}
	one := arrow.Field{Name: "one", Type: arrow.PrimitiveTypes.Int64}
	pair := arrow.Field{Name: "pair", Type: arrow.StructOf(fields[0], fields[1])}
	if _, err := NewWriter(io.Discard, arrow.NewSchema(append(fields, one), nil), Options{}); err != nil {
		t.Fatalf("%d columns: %v", maxColumns, err)
	}
	schema := arrow.NewSchema(append(fields, pair), nil)
	assertInvalid(t, CheckSchema(schema), "65536 leaf columns")
	_, err := NewWriter(io.Discard, schema, Options{})
	assertInvalid(t, err, "65536 leaf columns")
}

func TestWriteErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	ints := func(valid []bool) arrow.RecordBatch {
		b := array.NewInt64Builder(mem)
		defer b.Release()
		b.AppendValues([]int64{1, 2}, valid)
		col := b.NewArray()
		defer col.Release()
		return array.NewRecordBatch(schema, []arrow.Array{col}, 2)
	}

	t.Run("other schema", func(t *testing.T) {
		w, err := NewWriter(io.Discard, schema, Options{})
		if err != nil {
			t.Fatal(err)
		}
		other := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
		b := array.NewRecordBuilder(mem, other)
		defer b.Release()
		rec := b.NewRecordBatch()
		defer rec.Release()
		assertInvalid(t, w.Write(rec), "schema")
	})
	t.Run("nulls in required column", func(t *testing.T) {
		w, err := NewWriter(io.Discard, schema, Options{})
		if err != nil {
			t.Fatal(err)
		}
		rec := ints([]bool{true, false})
		defer rec.Release()
		err = w.Write(rec)
		assertInvalid(t, err, `"a"`)
		// The file is broken: later calls repeat the error.
		if err2 := w.Write(rec); !errors.Is(err2, writers.ErrInvalid) {
			t.Fatalf("second Write: %v, want the first error", err2)
		}
		if _, err := w.Close(); !errors.Is(err, writers.ErrInvalid) {
			t.Fatalf("Close after failed Write: %v, want the write error", err)
		}
	})
	t.Run("after close", func(t *testing.T) {
		w, err := NewWriter(io.Discard, schema, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Close(); err != nil {
			t.Fatal(err)
		}
		rec := ints(nil)
		defer rec.Release()
		if err := w.Write(rec); !errors.Is(err, writers.ErrWrongState) {
			t.Fatalf("Write after Close: %v, want ErrWrongState", err)
		}
		if _, err := w.Close(); !errors.Is(err, writers.ErrWrongState) {
			t.Fatalf("second Close: %v, want ErrWrongState", err)
		}
	})
}

// TestRowGroupsAndSize checks row group boundaries and that BytesWritten
// grows with the data and is close to the final size once flushed.
func TestRowGroupsAndSize(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(mem)
	defer b.Release()
	for i := range 1000 {
		b.Append(int64(i) * 7919)
	}
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 1000)
	defer rec.Release()

	var out bytes.Buffer
	w, err := NewWriter(&out, schema, Options{RowGroupRows: 300, Compression: CompressionNone})
	if err != nil {
		t.Fatal(err)
	}
	if w.BytesWritten() != 0 {
		t.Fatalf("BytesWritten before any write = %d", w.BytesWritten())
	}
	var last int64
	for range 3 {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		if n := w.BytesWritten(); n <= last {
			t.Fatalf("BytesWritten did not grow: %d after %d", n, last)
		} else {
			last = n
		}
	}
	fs, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	// 3000 int64 values uncompressed are 24000 bytes; the estimate may
	// miss the footer but not the data.
	if last < 24000 || fs.Bytes < last {
		t.Fatalf("BytesWritten %d, final size %d: want 24000 <= estimate <= final", last, fs.Bytes)
	}
	f, err := parquet.OpenFile(bytes.NewReader(out.Bytes()), int64(out.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if fs.Rows != 3000 || f.NumRows() != 3000 || len(f.RowGroups()) != 10 {
		t.Fatalf("Rows = %d, file has %d rows in %d row groups; want 3000 in 10", fs.Rows, f.NumRows(), len(f.RowGroups()))
	}
}
