package parquetio

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
)

// goValue returns element i of arr as a plain Go value in the form both
// the written and the read Arrow types share: dictionaries decoded,
// timestamps in microseconds, strings and binaries as string, decimals as
// their exact text, nested types as []any.
func goValue(arr arrow.Array, i int) any {
	if arr.IsNull(i) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Int8:
		return int64(a.Value(i))
	case *array.Int16:
		return int64(a.Value(i))
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int64:
		return a.Value(i)
	case *array.Float32:
		return float64(a.Value(i))
	case *array.Float64:
		return a.Value(i)
	case *array.Boolean:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.Binary:
		return "bin:" + string(a.Value(i))
	case *array.LargeBinary:
		return "bin:" + string(a.Value(i))
	case *array.FixedSizeBinary:
		return "bin:" + string(a.Value(i))
	case *array.Date32:
		return a.Value(i)
	case *array.Timestamp:
		return TimestampMicros(int64(a.Value(i)), a.DataType().(*arrow.TimestampType).Unit)
	case *array.Decimal128:
		return a.Value(i).ToString(a.DataType().(*arrow.Decimal128Type).Scale)
	case *array.Dictionary:
		return goValue(a.Dictionary(), a.GetValueIndex(i))
	case *array.Struct:
		out := make([]any, a.NumField())
		for k := range out {
			out[k] = goValue(a.Field(k), i)
		}
		return out
	case *array.Map:
		start, end := a.ValueOffsets(i)
		out := []any{}
		for j := int(start); j < int(end); j++ {
			out = append(out, []any{goValue(a.Keys(), j), goValue(a.Items(), j)})
		}
		return out
	case array.ListLike:
		start, end := a.ValueOffsets(i)
		out := []any{}
		for j := int(start); j < int(end); j++ {
			out = append(out, goValue(a.ListValues(), j))
		}
		return out
	}
	panic("goValue: unsupported " + arr.DataType().String())
}

// rowsOf returns every row of recs as []any.
func rowsOf(recs []arrow.RecordBatch) [][]any {
	var rows [][]any
	for _, rec := range recs {
		for i := range int(rec.NumRows()) {
			row := make([]any, rec.NumCols())
			for c := range row {
				row[c] = goValue(rec.Column(c), i)
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// assertSameRows fails at the first differing row.
func assertSameRows(t *testing.T, schema *arrow.Schema, want, got [][]any) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("read %d rows, wrote %d", len(got), len(want))
	}
	for r := range want {
		for c := range want[r] {
			if !reflect.DeepEqual(want[r][c], got[r][c]) {
				t.Fatalf("row %d column %q: wrote %#v, read %#v", r, schema.Field(c).Name, want[r][c], got[r][c])
			}
		}
	}
}

// readType is the Arrow type ReadFile returns for a written type.
func readType(dt arrow.DataType) arrow.DataType {
	switch t := dt.(type) {
	case *arrow.DictionaryType:
		return readType(t.ValueType)
	case *arrow.LargeStringType:
		return arrow.BinaryTypes.String
	case *arrow.LargeBinaryType, *arrow.FixedSizeBinaryType:
		return arrow.BinaryTypes.Binary
	case *arrow.TimestampType:
		if t.TimeZone != "" {
			return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
		}
		return &arrow.TimestampType{Unit: arrow.Microsecond}
	case *arrow.StructType:
		fields := make([]arrow.Field, t.NumFields())
		for i, f := range t.Fields() {
			fields[i] = arrow.Field{Name: f.Name, Type: readType(f.Type), Nullable: f.Nullable}
		}
		return arrow.StructOf(fields...)
	case *arrow.MapType:
		return arrow.MapOf(readType(t.KeyType()), readType(t.ItemType()))
	case arrow.ListLikeType:
		return arrow.ListOf(readType(t.Elem()))
	}
	return dt
}

// sameShape compares types ignoring list element and map entry names,
// which differ between Arrow conventions and Parquet's.
func sameShape(a, b arrow.DataType) bool {
	if a.ID() != b.ID() {
		return false
	}
	switch a := a.(type) {
	case *arrow.StructType:
		bs := b.(*arrow.StructType)
		if a.NumFields() != bs.NumFields() {
			return false
		}
		for i, f := range a.Fields() {
			g := bs.Field(i)
			if f.Name != g.Name || f.Nullable != g.Nullable || !sameShape(f.Type, g.Type) {
				return false
			}
		}
		return true
	case *arrow.MapType:
		bm := b.(*arrow.MapType)
		return sameShape(a.KeyType(), bm.KeyType()) && sameShape(a.ItemType(), bm.ItemType())
	case arrow.ListLikeType:
		return sameShape(a.Elem(), b.(arrow.ListLikeType).Elem())
	}
	return arrow.TypeEqual(a, b)
}

// readAll reads a whole file with ReadFile; the caller releases the batches.
func readAll(t *testing.T, data []byte, mem memory.Allocator, opts ReadOptions) (*arrow.Schema, []arrow.RecordBatch) {
	t.Helper()
	rd, err := ReadFile(t.Context(), bytes.NewReader(data), int64(len(data)), mem, opts)
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	defer rd.Release()
	var recs []arrow.RecordBatch
	for rd.Next() {
		rec := rd.RecordBatch()
		rec.Retain()
		recs = append(recs, rec)
	}
	if err := rd.Err(); err != nil {
		t.Fatalf("read: %v", err)
	}
	return rd.Schema(), recs
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// writeFile writes recs to one file and returns its bytes and stats.
func writeFile(t testing.TB, schema *arrow.Schema, opts Options, recs ...arrow.RecordBatch) ([]byte, FileStats) {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, schema, opts)
	if err != nil {
		t.Fatalf("NewWriter: %v", err)
	}
	for i, rec := range recs {
		if err := w.Write(rec); err != nil {
			t.Fatalf("Write batch %d: %v", i, err)
		}
	}
	fs, err := w.Close()
	if err != nil {
		t.Fatalf("Close: %v", err)
	}
	if fs.Bytes != int64(buf.Len()) {
		t.Fatalf("FileStats.Bytes = %d, file has %d", fs.Bytes, buf.Len())
	}
	return buf.Bytes(), fs
}

func fieldNames(s *arrow.Schema) string {
	return fmt.Sprint(s.Fields())
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// assertInvalid checks err is of class writers.ErrInvalid and mentions
// what.
func assertInvalid(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("error %v: want class writers.ErrInvalid", err)
	}
	if !strings.Contains(err.Error(), what) {
		t.Fatalf("error %q does not mention %q", err, what)
	}
}
