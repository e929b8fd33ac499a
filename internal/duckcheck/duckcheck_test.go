package duckcheck

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/duckdb/duckdb-go/v2"
	"go.uber.org/goleak"
)

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// writeParquet writes five rows, two per row group, zstd-compressed:
//
//	id  amount  name   price  ts        tags
//	1   1.5     "b"    1.10   t0        [1]
//	2   NULL    NULL   2.20   t0+1s     []
//	3   2.5     "a"    NULL   t0+2s     NULL
//	4   -1      "c"    3.30   t0+3s     [2 3]
//	5   4       "b"    4.40   t0+4s     [4]
func writeParquet(t *testing.T) string {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "price", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "tags", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3, 4, 5}, nil)
	b.Field(1).(*array.Float64Builder).AppendValues([]float64{1.5, 0, 2.5, -1, 4}, []bool{true, false, true, true, true})
	b.Field(2).(*array.StringBuilder).AppendValues([]string{"b", "", "a", "c", "b"}, []bool{true, false, true, true, true})
	b.Field(3).(*array.Decimal128Builder).AppendValues([]decimal128.Num{
		decimal128.FromI64(110), decimal128.FromI64(220), {}, decimal128.FromI64(330), decimal128.FromI64(440),
	}, []bool{true, true, false, true, true})
	ts := b.Field(4).(*array.TimestampBuilder)
	for i := range 5 {
		ts.Append(arrow.Timestamp(t0.Add(time.Duration(i) * time.Second).UnixMicro()))
	}
	tags := b.Field(5).(*array.ListBuilder)
	vals := tags.ValueBuilder().(*array.Int32Builder)
	for _, l := range [][]int32{{1}, {}, nil, {2, 3}, {4}} {
		if l == nil {
			tags.AppendNull()
			continue
		}
		tags.Append(true)
		vals.AppendValues(l, nil)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()

	path := filepath.Join(t.TempDir(), "part-0.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(schema, f,
		parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithMaxRowGroupLength(2), parquet.WithAllocator(mem)),
		pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(mem), pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil { // closes f too
		t.Fatal(err)
	}
	return path
}

func TestFileSummary(t *testing.T) {
	path := writeParquet(t)
	db := Open(t)
	s := db.FileSummary(t, path)
	if s.Rows != 5 || s.RowGroups != 3 || !slices.Equal(s.Compression, []string{"ZSTD"}) {
		t.Fatalf("rows %d, row groups %d, compression %q; want 5, 3, [ZSTD]", s.Rows, s.RowGroups, s.Compression)
	}
	if got := len(s.Columns); got != 6 {
		t.Fatalf("%d columns, want 6", got)
	}
	for _, tc := range []struct {
		name          string
		typ           string
		nulls         int64
		min, max, sum any
	}{
		{"id", "BIGINT", 0, int64(1), int64(5), int64(15)},
		{"amount", "DOUBLE", 1, -1.0, 4.0, 7.0},
		{"name", "VARCHAR", 1, "a", "c", nil},
		{"price", "DECIMAL(10,2)", 1, "1.1", "4.4", "11.00"},
		{"ts", "TIMESTAMP WITH TIME ZONE", 0, t0, t0.Add(4 * time.Second), nil},
		{"tags", "INTEGER[]", 1, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := s.Column(t, tc.name)
			if c.Type != tc.typ || c.Nulls != tc.nulls {
				t.Errorf("type %q nulls %d; want %q %d", c.Type, c.Nulls, tc.typ, tc.nulls)
			}
			if !equal(c.Min, tc.min) || !equal(c.Max, tc.max) || !equal(c.Sum, tc.sum) {
				t.Errorf("min %#v max %#v sum %#v; want %#v %#v %#v", c.Min, c.Max, c.Sum, tc.min, tc.max, tc.sum)
			}
		})
	}
}

// equal compares a DuckDB value with a wanted one; decimals compare by
// their string form, times by instant.
func equal(got, want any) bool {
	switch g := got.(type) {
	case duckdb.Decimal:
		s, ok := want.(string)
		return ok && g.String() == s
	case time.Time:
		w, ok := want.(time.Time)
		return ok && g.Equal(w)
	}
	return got == want
}

func TestQuery(t *testing.T) {
	path := writeParquet(t)
	db := Open(t)
	rows := db.Query(t, "SELECT name, count(*) FROM "+Parquet(path)+" WHERE name IS NOT NULL GROUP BY name ORDER BY name")
	want := [][]any{{"a", int64(1)}, {"b", int64(2)}, {"c", int64(1)}}
	if len(rows) != len(want) {
		t.Fatalf("rows = %v, want %v", rows, want)
	}
	for i := range want {
		if !slices.Equal(rows[i], want[i]) {
			t.Errorf("row %d = %#v, want %#v", i, rows[i], want[i])
		}
	}
	if got := db.Query(t, "SELECT $1::INTEGER + 1", 41); got[0][0] != int32(42) {
		t.Errorf("parameterised query = %#v, want int32(42)", got[0][0])
	}
}

func TestParquetRowNumbered(t *testing.T) {
	path := writeParquet(t)
	db := Open(t)
	rows := db.Query(t, "SELECT count(*), min(file_row_number), max(file_row_number) FROM "+ParquetRowNumbered(path))
	n := rows[0][0].(int64)
	if n < 2 || rows[0][1] != int64(0) || rows[0][2] != n-1 {
		t.Errorf("count, min, max of file_row_number = %v, want n, 0, n-1", rows[0])
	}
}

func TestParquetQuotesPath(t *testing.T) {
	if got, want := Parquet("/tmp/it's.parquet"), "read_parquet('/tmp/it''s.parquet')"; got != want {
		t.Errorf("Parquet = %s, want %s", got, want)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
