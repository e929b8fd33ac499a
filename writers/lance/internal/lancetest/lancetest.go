// Package lancetest holds the test helpers the Lance packages share:
// the pylance fixtures, random records of every type Quiver writes, and
// ways to compare what they read back. Tests only.
package lancetest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// FixtureDir is testdata/lance-formats: datasets pylance wrote in formats
// 2.1 and 2.2 (generate.py) and, beside each, its rows as Arrow IPC.
func FixtureDir(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "testdata", "lance-formats")
}

// NewRand is a deterministic random source seeded with seed.
func NewRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

// AllTypesSchema covers every type Quiver writes.
func AllTypesSchema() *arrow.Schema {
	nn := func(name string, t arrow.DataType) arrow.Field {
		return arrow.Field{Name: name, Type: t, Nullable: true}
	}
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		nn("i8", arrow.PrimitiveTypes.Int8), nn("i16", arrow.PrimitiveTypes.Int16), nn("i32", arrow.PrimitiveTypes.Int32),
		nn("u8", arrow.PrimitiveTypes.Uint8), nn("u16", arrow.PrimitiveTypes.Uint16), nn("u32", arrow.PrimitiveTypes.Uint32), nn("u64", arrow.PrimitiveTypes.Uint64),
		nn("f32", arrow.PrimitiveTypes.Float32), nn("f64", arrow.PrimitiveTypes.Float64),
		nn("b", arrow.FixedWidthTypes.Boolean), nn("s", arrow.BinaryTypes.String), nn("bin", arrow.BinaryTypes.Binary),
		nn("ls", arrow.BinaryTypes.LargeString),
		nn("d32", arrow.FixedWidthTypes.Date32),
		nn("ts_s", &arrow.TimestampType{Unit: arrow.Second}), nn("ts_ms", &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "Europe/Paris"}),
		nn("ts_us", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}), nn("ts_ns", &arrow.TimestampType{Unit: arrow.Nanosecond}),
		nn("vec", arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32)),
		nn("tags", arrow.ListOf(arrow.BinaryTypes.String)),
		nn("li", arrow.ListOf(arrow.PrimitiveTypes.Int32)),
		{Name: "st", Type: arrow.StructOf(nn("x", arrow.PrimitiveTypes.Int32), nn("y", arrow.BinaryTypes.String))},
	}, nil)
}

// NoItemNulls is field metadata telling RandomRecord to leave the items of
// a fixed-size list non-null.
const NoItemNulls = "test.no_item_nulls"

// RandomRecord builds n random rows of s; nullPct of nullable values are
// null (structs never are: 2.0 cannot store null structs).
func RandomRecord(mem memory.Allocator, s *arrow.Schema, rng *rand.Rand, start, n int, nullPct int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, s)
	defer b.Release()
	for i := range n {
		for c, f := range s.Fields() {
			fillValue(b.Field(c), f, rng, start+i, nullPct)
		}
	}
	return b.NewRecordBatch()
}

func fillValue(b array.Builder, f arrow.Field, rng *rand.Rand, row, nullPct int) {
	if f.Nullable && f.Type.ID() != arrow.STRUCT && rng.IntN(100) < nullPct {
		b.AppendNull()
		return
	}
	r := rng.Int64()
	switch b := b.(type) {
	case *array.Int64Builder:
		if f.Name == "id" {
			b.Append(int64(row))
		} else {
			b.Append(r)
		}
	case *array.Int8Builder:
		b.Append(int8(r))
	case *array.Int16Builder:
		b.Append(int16(r))
	case *array.Int32Builder:
		b.Append(int32(r))
	case *array.Uint8Builder:
		b.Append(uint8(r))
	case *array.Uint16Builder:
		b.Append(uint16(r))
	case *array.Uint32Builder:
		b.Append(uint32(r))
	case *array.Uint64Builder:
		b.Append(uint64(r))
	case *array.Float32Builder:
		b.Append(float32(r%1000) / 8)
	case *array.Float64Builder:
		b.Append(float64(r%100000) / 16)
	case *array.BooleanBuilder:
		b.Append(r%2 == 0)
	case *array.StringBuilder:
		b.Append(fmt.Sprintf("s%d-%s", row, string(make([]byte, rng.IntN(5)))))
	case *array.LargeStringBuilder:
		b.Append(fmt.Sprintf("large-%d", r%1000))
	case *array.BinaryBuilder:
		b.Append([]byte{byte(r), byte(r >> 8), byte(row)}[:rng.IntN(4)])
	case *array.Date32Builder:
		b.Append(arrow.Date32(r % 40000))
	case *array.TimestampBuilder:
		b.Append(arrow.Timestamp(r % (1 << 50)))
	case *array.Float16Builder:
		b.Append(float16.New(float32(r%1000) / 8))
	case *array.Decimal128Builder:
		b.Append(decimal128.FromI64(r % 1_000_000_000))
	case *array.Date64Builder:
		b.Append(arrow.Date64(r % (1 << 40) / 86400000 * 86400000))
	case *array.Time32Builder:
		b.Append(arrow.Time32(r % 86400000))
	case *array.Time64Builder:
		b.Append(arrow.Time64(r % 86400000000))
	case *array.DurationBuilder:
		b.Append(arrow.Duration(r))
	case *array.FixedSizeListBuilder:
		b.Append(true)
		vb := b.ValueBuilder().(*array.Float32Builder)
		itemNulls := !f.HasMetadata() || f.Metadata.FindKey(NoItemNulls) < 0
		for k := range 4 {
			if itemNulls && rng.IntN(10) == 0 {
				vb.AppendNull()
			} else {
				vb.Append(float32(row) + float32(k)/4)
			}
		}
	case *array.ListBuilder:
		b.Append(true)
		elem := f.Type.(*arrow.ListType).ElemField()
		for range rng.IntN(4) {
			fillValue(b.ValueBuilder(), elem, rng, row, nullPct)
		}
	case *array.StructBuilder:
		b.Append(true)
		for k, cf := range f.Type.(*arrow.StructType).Fields() {
			fillValue(b.FieldBuilder(k), cf, rng, row, nullPct)
		}
	default:
		panic(fmt.Sprintf("no random values for %T", b))
	}
}

// ConcatRecords concatenates records column-wise into one.
func ConcatRecords(t testing.TB, mem memory.Allocator, recs []arrow.RecordBatch) arrow.RecordBatch {
	t.Helper()
	tbl := array.NewTableFromRecords(recs[0].Schema(), recs)
	defer tbl.Release()
	cols := make([]arrow.Array, tbl.NumCols())
	for i := range cols {
		c, err := array.Concatenate(tbl.Column(i).Data().Chunks(), mem)
		if err != nil {
			t.Fatal(err)
		}
		cols[i] = c
		defer c.Release()
	}
	return array.NewRecordBatch(recs[0].Schema(), cols, tbl.NumRows())
}

// Trunc is a's text, cut after 300 characters.
func Trunc(a arrow.Array) string {
	s := a.String()
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// DictValues is the values of the records' last column, a dictionary, row
// by row ("<null>" for null).
func DictValues(recs ...arrow.RecordBatch) []string {
	var out []string
	for _, r := range recs {
		d := r.Column(int(r.NumCols()) - 1).(*array.Dictionary)
		vals := d.Dictionary().(*array.String)
		for i := range d.Len() {
			if d.IsNull(i) || vals.IsNull(d.GetValueIndex(i)) {
				out = append(out, "<null>")
			} else {
				out = append(out, vals.Value(d.GetValueIndex(i)))
			}
		}
	}
	return out
}

// Mutate returns a copy of seed with one to four mutations drawn from
// rng: bytes overwritten, huge varints and u64s planted, bytes cut out,
// the kinds of input that found out-of-range slicing, offset overflows
// and use after release in the Lance decoders.
func Mutate(rng *rand.Rand, seed []byte) []byte {
	b := bytes.Clone(seed)
	for range 1 + rng.IntN(4) {
		switch i := rng.IntN(len(b) - 8); rng.IntN(5) {
		case 0:
			b[i] = byte(rng.IntN(256))
		case 1:
			b = append(b[:i], append([]byte{0xff, 0xff, 0xff, 0xff, 0x7f}, b[i:]...)...)
		case 2:
			copy(b[i:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f})
		case 4: // a u64 with its top bit set
			copy(b[i:], bytes.Repeat([]byte{0xff}, 8))
		case 3:
			b = append(b[:i], b[i+1+rng.IntN(3):]...)
		}
	}
	return b
}
