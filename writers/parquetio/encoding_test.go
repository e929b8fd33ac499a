package parquetio

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// Spark's vectorized reader refuses DELTA_LENGTH_BYTE_ARRAY up to 3.3 and
// garbles it after (SPARK-52240), and parquet-go writes it for every
// BYTE_ARRAY column without an encoding: every string and binary chunk,
// top-level or nested, must be PLAIN, or dictionary encoded with PLAIN
// fallback, as Spark and arrow-rs write them.
func TestByteArrayEncodings(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "unique", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "large", Type: arrow.BinaryTypes.LargeString},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "few", Type: arrow.BinaryTypes.String},
		{Name: "dict", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}},
		{Name: "list", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "s", Type: arrow.BinaryTypes.Binary, Nullable: true}), Nullable: true},
		{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.String), Nullable: true},
	}, nil)
	const rows = 20000
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := range rows {
		s := fmt.Sprintf("value-%06d-%s", i, strings.Repeat("x", 60))
		if i < 5000 { // nulls before values: the case SPARK-52240 garbles
			b.Field(0).AppendNull()
			b.Field(2).AppendNull()
		} else {
			b.Field(0).(*array.StringBuilder).Append(s)
			b.Field(2).(*array.BinaryBuilder).Append([]byte(s))
		}
		b.Field(1).(*array.LargeStringBuilder).Append(s)
		b.Field(3).(*array.StringBuilder).Append(fmt.Sprint("c", i%3))
		if err := b.Field(4).(*array.BinaryDictionaryBuilder).AppendString(fmt.Sprint("d", i%5)); err != nil {
			t.Fatal(err)
		}
		lb := b.Field(5).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.StringBuilder).Append(s)
		sb := b.Field(6).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.BinaryBuilder).Append([]byte(s))
		mb := b.Field(7).(*array.MapBuilder)
		mb.Append(true)
		mb.KeyBuilder().(*array.StringBuilder).Append("k")
		mb.ItemBuilder().(*array.StringBuilder).Append(s)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()

	for _, opts := range []Options{{}, {NoDictionary: true}, {RowGroupRows: 4096, Compression: CompressionZstd}} {
		t.Run(fmt.Sprintf("%+v", opts), func(t *testing.T) {
			data, _ := writeFile(t, schema, opts, rec)
			enc := chunkEncodings(t, data)
			if len(enc) != 9 {
				t.Fatalf("%d leaf columns, want 9: %v", len(enc), enc)
			}
			for col, encs := range enc {
				for _, e := range encs {
					switch e {
					case format.Plain, format.RLE, format.RLEDictionary: // RLE: levels
					default:
						t.Errorf("column %s has encoding %s, want PLAIN or RLE_DICTIONARY", col, e)
					}
				}
			}
			if !opts.NoDictionary {
				for _, col := range []string{"few", "dict"} {
					if !slices.Contains(enc[col], format.RLEDictionary) {
						t.Errorf("column %s: encodings %v, want RLE_DICTIONARY", col, enc[col])
					}
				}
			}
			_, got := readAll(t, data, mem, ReadOptions{})
			defer releaseAll(got)
			assertSameRows(t, schema, rowsOf([]arrow.RecordBatch{rec}), rowsOf(got))
		})
	}
}

// chunkEncodings returns the encodings the footer lists for each leaf
// column (dotted path), over every row group.
func chunkEncodings(t *testing.T, data []byte) map[string][]format.Encoding {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	enc := map[string][]format.Encoding{}
	for _, rg := range f.Metadata().RowGroups {
		for _, c := range rg.Columns {
			col := strings.Join(c.MetaData.PathInSchema, ".")
			enc[col] = append(enc[col], c.MetaData.Encoding...)
		}
	}
	return enc
}

// DeltaIntegers writes every INT32 and INT64 leaf that is not dictionary
// encoded as DELTA_BINARY_PACKED (nulls and nested ones included), and the
// values read back; without it they are PLAIN.
func TestDeltaIntegers(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "n", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us, Nullable: true},
		{Name: "day", Type: arrow.FixedWidthTypes.Date32},
		{Name: "list", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	const rows = 20000
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := range rows {
		b.Field(0).(*array.Int64Builder).Append(int64(i) * 7919 % 1000003)
		if i%5 == 0 {
			b.Field(1).AppendNull()
			b.Field(2).AppendNull()
		} else {
			b.Field(1).(*array.Int32Builder).Append(int32(-i))
			b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + int64(i)*1000))
		}
		b.Field(3).(*array.Date32Builder).Append(arrow.Date32(19000 + i%3000))
		lb := b.Field(4).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.Int64Builder).AppendValues([]int64{int64(i), -int64(i)}, nil)
		b.Field(5).(*array.Float64Builder).Append(float64(i) / 3)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	for _, delta := range []bool{false, true} {
		t.Run(fmt.Sprint("delta=", delta), func(t *testing.T) {
			data, _ := writeFile(t, schema, Options{DeltaIntegers: delta, NoDictionary: true, RowGroupRows: 8192}, rec)
			enc := chunkEncodings(t, data)
			want := format.Plain
			if delta {
				want = format.DeltaBinaryPacked
			}
			for _, col := range []string{"id", "n", "ts", "day", "list.list.element"} {
				if !slices.Contains(enc[col], want) || slices.Contains(enc[col], format.Plain) != !delta {
					t.Errorf("column %s: encodings %v, want %s", col, enc[col], want)
				}
			}
			if slices.Contains(enc["f"], format.DeltaBinaryPacked) {
				t.Errorf("double column f: encodings %v, want PLAIN", enc["f"])
			}
			_, got := readAll(t, data, mem, ReadOptions{})
			defer releaseAll(got)
			assertSameRows(t, schema, rowsOf([]arrow.RecordBatch{rec}), rowsOf(got))
		})
	}
}
