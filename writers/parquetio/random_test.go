package parquetio

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// allTypesSchema has a field of every supported type, nullable and not,
// flat and nested.
func allTypesSchema() *arrow.Schema {
	tsTypes := []arrow.DataType{
		&arrow.TimestampType{Unit: arrow.Second},
		&arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"},
		&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"},
		&arrow.TimestampType{Unit: arrow.Microsecond},
		&arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "America/New_York"},
	}
	fields := []arrow.Field{
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "i16", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "i64_required", Type: arrow.PrimitiveTypes.Int64},
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "flag_required", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "str", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "str_required", Type: arrow.BinaryTypes.String},
		{Name: "large_str", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "large_bin", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
		{Name: "fixed_bin", Type: &arrow.FixedSizeBinaryType{ByteWidth: 3}, Nullable: true},
		{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "dec9", Type: &arrow.Decimal128Type{Precision: 9, Scale: 2}, Nullable: true},
		{Name: "dec18", Type: &arrow.Decimal128Type{Precision: 18, Scale: 4}, Nullable: true},
		{Name: "dec38", Type: &arrow.Decimal128Type{Precision: 38, Scale: 10}, Nullable: true},
		{Name: "dec20", Type: &arrow.Decimal128Type{Precision: 20, Scale: 0}, Nullable: true},
		{Name: "dict_str", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, Nullable: true},
		{Name: "dict_i64", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.PrimitiveTypes.Int64}, Nullable: true},
		{Name: "point", Type: arrow.StructOf(
			arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "label", Type: arrow.BinaryTypes.String},
			arrow.Field{Name: "inner", Type: arrow.StructOf(
				arrow.Field{Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
			), Nullable: true},
		), Nullable: true},
		{Name: "ints", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
		{Name: "ints_required", Type: arrow.ListOfNonNullable(arrow.PrimitiveTypes.Int32)},
		{Name: "strs", Type: arrow.LargeListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "nested_lists", Type: arrow.ListOf(arrow.ListOf(arrow.PrimitiveTypes.Int16)), Nullable: true},
		{Name: "list_of_structs", Type: arrow.ListOf(arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
		)), Nullable: true},
		{Name: "tags", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "map_of_lists", Type: arrow.MapOf(arrow.PrimitiveTypes.Int32, arrow.ListOf(arrow.BinaryTypes.String)), Nullable: true},
	}
	for i, t := range tsTypes {
		fields = append(fields, arrow.Field{Name: fmt.Sprintf("ts%d", i), Type: t, Nullable: true})
	}
	return arrow.NewSchema(fields, nil)
}

// randomBatch builds n rows of schema. nullRate is the chance of a null
// in every nullable position.
func randomBatch(t testing.TB, mem memory.Allocator, rng *rand.Rand, schema *arrow.Schema, n int, nullRate float64) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i, f := range schema.Fields() {
		for range n {
			appendRandom(t, b.Field(i), f.Type, f.Nullable, rng, nullRate)
		}
	}
	return b.NewRecordBatch()
}

// appendRandom appends one random value (or null) of type dt to b.
func appendRandom(t testing.TB, b array.Builder, dt arrow.DataType, nullable bool, rng *rand.Rand, nullRate float64) {
	if nullable && rng.Float64() < nullRate {
		b.AppendNull()
		return
	}
	switch b := b.(type) {
	case *array.Int8Builder:
		b.Append(int8(rng.IntN(256) - 128))
	case *array.Int16Builder:
		b.Append(int16(rng.IntN(65536) - 32768))
	case *array.Int32Builder:
		b.Append(rng.Int32() - rng.Int32())
	case *array.Int64Builder:
		// Wide, but sums of a few thousand fit in int64 (DuckDB sums).
		b.Append(rng.Int64N(2e15) - 1e15)
	case *array.Float32Builder:
		b.Append(float32(randomFloat(rng, 1e3)))
	case *array.Float64Builder:
		b.Append(randomFloat(rng, 1e6))
	case *array.BooleanBuilder:
		b.Append(rng.IntN(2) == 1)
	case *array.StringBuilder:
		b.Append(randomString(rng))
	case *array.LargeStringBuilder:
		b.Append(randomString(rng))
	case *array.BinaryBuilder: // binary and large_binary
		b.Append([]byte(randomString(rng)))
	case *array.FixedSizeBinaryBuilder:
		b.Append([]byte{byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256))})
	case *array.Date32Builder:
		b.Append(arrow.Date32(rng.IntN(40000) - 10000))
	case *array.TimestampBuilder:
		// Around 1900..2100 in every unit, so s and ns do not overflow.
		sec := rng.Int64N(6_000_000_000) - 2_000_000_000
		unit := dt.(*arrow.TimestampType).Unit
		b.Append(arrow.Timestamp(sec*unitScale(unit) + rng.Int64N(unitScale(unit))))
	case *array.Decimal128Builder:
		p := dt.(*arrow.Decimal128Type).Precision
		// At most 34 digits, so DuckDB's sums of 38-digit decimals fit.
		digits := rng.IntN(min(int(p), 34)) + 1
		n := decimal128.FromI64(0)
		for range digits {
			n = n.Mul(decimal128.FromI64(10)).Add(decimal128.FromI64(int64(rng.IntN(10))))
		}
		if rng.IntN(2) == 0 {
			n = n.Negate()
		}
		b.Append(n)
	case *array.BinaryDictionaryBuilder:
		if err := b.AppendString(fmt.Sprintf("v%d", rng.IntN(5))); err != nil {
			t.Fatal(err)
		}
	case *array.Int64DictionaryBuilder:
		if err := b.Append(int64(rng.IntN(7)) * 1000); err != nil {
			t.Fatal(err)
		}
	case *array.StructBuilder:
		b.Append(true)
		for i, f := range dt.(*arrow.StructType).Fields() {
			appendRandom(t, b.FieldBuilder(i), f.Type, f.Nullable, rng, nullRate)
		}
	case *array.MapBuilder:
		mt := dt.(*arrow.MapType)
		b.Append(true)
		for range rng.IntN(4) {
			appendRandom(t, b.KeyBuilder(), mt.KeyType(), false, rng, nullRate)
			appendRandom(t, b.ItemBuilder(), mt.ItemType(), mt.ItemField().Nullable, rng, nullRate)
		}
	case array.ListLikeBuilder:
		elem := dt.(arrow.ListLikeType).ElemField()
		b.Append(true)
		for range rng.IntN(4) {
			appendRandom(t, b.ValueBuilder(), elem.Type, elem.Nullable, rng, nullRate)
		}
	default:
		t.Fatalf("appendRandom: no generator for %s", dt)
	}
}

// floatSpecials is the chance that a random float is NaN, -0, +0, +Inf or
// -Inf. It is 0 except while a test that compares floats by their bits
// runs (the others compare with ==, and sum with DuckDB).
var floatSpecials float64

// randomFloat returns a normally distributed float of the given scale, or
// a special value (floatSpecials).
func randomFloat(rng *rand.Rand, scale float64) float64 {
	if floatSpecials > 0 && rng.Float64() < floatSpecials {
		return []float64{math.NaN(), math.Copysign(0, -1), 0, math.Inf(1), math.Inf(-1)}[rng.IntN(5)]
	}
	return rng.NormFloat64() * scale
}

// unitScale is the number of ticks per second of unit.
func unitScale(unit arrow.TimeUnit) int64 {
	return int64(time.Second / unit.Multiplier())
}

func randomString(rng *rand.Rand) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzÄé€0123456789"
	r := []rune(alphabet)
	s := make([]rune, rng.IntN(12))
	for i := range s {
		s[i] = r[rng.IntN(len(r))]
	}
	return string(s)
}

// sliceColumns returns rows [off, off+n) of rec with every column sliced
// separately, at the record level, so arrays carry non-zero offsets.
func sliceColumns(rec arrow.RecordBatch, off, n int64) arrow.RecordBatch {
	cols := make([]arrow.Array, rec.NumCols())
	for i := range cols {
		cols[i] = array.NewSlice(rec.Column(i), off, off+n)
	}
	out := array.NewRecordBatch(rec.Schema(), cols, n)
	for _, c := range cols {
		c.Release()
	}
	return out
}
