package rowdigest

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// fromJSON builds one batch of schema from JSON rows.
func fromJSON(t *testing.T, schema *arrow.Schema, rows string) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, schema, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Release)
	return rec
}

var wide = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "i", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "d", Type: &arrow.Decimal128Type{Precision: 20, Scale: 2}, Nullable: true},
	{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int16), Nullable: true},
	{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.BinaryTypes.Binary, Nullable: true}, arrow.Field{Name: "b", Type: arrow.PrimitiveTypes.Uint8, Nullable: true}), Nullable: true},
	{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64), Nullable: true},
}, nil)

// randomRows builds n random rows of wide, with nulls.
func randomRows(tb testing.TB, r *rand.Rand, n int) arrow.RecordBatch {
	tb.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, wide)
	defer b.Release()
	for range n {
		for f := range wide.NumFields() {
			fb := b.Field(f)
			if r.IntN(8) == 0 {
				fb.AppendNull()
				continue
			}
			switch fb := fb.(type) {
			case *array.Int64Builder:
				fb.Append(r.Int64N(1000))
			case *array.TimestampBuilder:
				fb.Append(arrow.Timestamp(r.Int64()))
			case *array.StringBuilder:
				fb.Append(strings.Repeat("x", r.IntN(5)))
			case *array.Float64Builder:
				fb.Append(r.Float64())
			case *array.Int32Builder:
				fb.Append(r.Int32N(3))
			case *array.BooleanBuilder:
				fb.Append(r.IntN(2) == 0)
			case *array.Decimal128Builder:
				fb.Append(decimal128.FromI64(r.Int64N(1e6)))
			case *array.ListBuilder:
				fb.Append(true)
				vb := fb.ValueBuilder().(*array.Int16Builder)
				for range r.IntN(4) {
					vb.Append(int16(r.IntN(100)))
				}
			case *array.StructBuilder:
				fb.Append(true)
				fb.FieldBuilder(0).(*array.BinaryBuilder).Append([]byte{byte(r.IntN(3))})
				fb.FieldBuilder(1).(*array.Uint8Builder).Append(uint8(r.IntN(3)))
			case *array.MapBuilder:
				fb.Append(true)
				for k := range r.IntN(3) {
					fb.KeyBuilder().(*array.StringBuilder).Append(string(rune('a' + k)))
					fb.ItemBuilder().(*array.Int64Builder).Append(r.Int64N(10))
				}
			default:
				tb.Fatalf("no random values for %T", fb)
			}
		}
	}
	rec := b.NewRecordBatch()
	tb.Cleanup(rec.Release)
	return rec
}

// The digest of rows does not depend on their order nor on how they are
// split into batches (slices, whose arrays have offsets).
func TestOrderAndSplitDoNotMatter(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	rec := randomRows(t, r, 500)
	whole := Of(rec)
	if whole == 0 {
		t.Fatal("digest of 500 rows is 0")
	}
	for trial := range 20 {
		// A random permutation, taken as random slices of rec.
		perm := r.Perm(int(rec.NumRows()))
		var sum uint64
		for i := 0; i < len(perm); {
			n := 1 + r.IntN(40)
			if i+n > len(perm) {
				n = len(perm) - i
			}
			for _, row := range perm[i : i+n] {
				s := rec.NewSlice(int64(row), int64(row)+1)
				sum += Of(s)
				s.Release()
			}
			i += n
		}
		if sum != whole {
			t.Fatalf("trial %d: permuted rows digest %x, want %x", trial, sum, whole)
		}
		lo := r.Int64N(rec.NumRows())
		a, b := rec.NewSlice(0, lo), rec.NewSlice(lo, rec.NumRows())
		if got := Of(a) + Of(b); got != whole {
			t.Fatalf("trial %d: split at %d digests %x, want %x", trial, lo, got, whole)
		}
		a.Release()
		b.Release()
	}
}

// Other rows digest differently: one changed value, a null for a zero
// value or an empty string, values swapped between columns or within a
// list, a row more.
func TestOtherRowsDigestDifferently(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "b", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	}, nil)
	base := `[{"a":1,"b":2,"s":"x","l":[1,2]},{"a":3,"b":4,"s":"","l":[]}]`
	want := Of(fromJSON(t, schema, base))
	for _, other := range []string{
		`[{"a":1,"b":2,"s":"x","l":[1,2]},{"a":3,"b":5,"s":"","l":[]}]`,
		`[{"a":1,"b":2,"s":"x","l":[1,2]},{"a":3,"b":4,"s":null,"l":[]}]`,
		`[{"a":1,"b":2,"s":"x","l":[1,2]},{"a":3,"b":4,"s":"","l":null}]`,
		`[{"a":1,"b":2,"s":"x","l":[1,2]},{"a":3,"b":null,"s":"","l":[]}]`,
		`[{"a":2,"b":1,"s":"x","l":[1,2]},{"a":3,"b":4,"s":"","l":[]}]`,
		`[{"a":1,"b":2,"s":"x","l":[2,1]},{"a":3,"b":4,"s":"","l":[]}]`,
		`[{"a":1,"b":2,"s":"x","l":[1]},{"a":3,"b":4,"s":"","l":[2]}]`,
		`[{"a":1,"b":4,"s":"x","l":[1,2]},{"a":3,"b":2,"s":"","l":[]}]`,
		`[{"a":1,"b":2,"s":"x","l":[1,2]},{"a":3,"b":4,"s":"","l":[]},{"a":3,"b":4,"s":"","l":[]}]`,
	} {
		if Of(fromJSON(t, schema, other)) == want {
			t.Errorf("%s digests like %s", other, base)
		}
	}
	if Of(fromJSON(t, schema, `[{"a":3,"b":4,"s":"","l":[]},{"a":1,"b":2,"s":"x","l":[1,2]}]`)) != want {
		t.Error("the same rows in another order digest differently")
	}
}

// A dictionary-encoded column digests like its values.
func TestDictionaryDigestsLikeItsValues(t *testing.T) {
	plain := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	dictType := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	encoded := arrow.NewSchema([]arrow.Field{{Name: "s", Type: dictType, Nullable: true}}, nil)
	rows := `[{"s":"a"},{"s":null},{"s":"b"},{"s":"a"}]`
	if Of(fromJSON(t, plain, rows)) != Of(fromJSON(t, encoded, rows)) {
		t.Fatal("a dictionary-encoded column digests unlike its values")
	}
}

func BenchmarkOf(b *testing.B) {
	schema := arrow.NewSchema(wide.Fields()[:6], nil)
	rec := randomRows(b, rand.New(rand.NewPCG(3, 4)), 1<<16)
	cols := rec.Columns()[:6]
	narrow := array.NewRecordBatch(schema, cols, rec.NumRows())
	defer narrow.Release()
	b.SetBytes(int64(narrow.NumRows()))
	for b.Loop() {
		Of(narrow)
	}
}

// The same rows encoded as clients commonly differ digest the same: the
// columns in another order, a nullable column left out instead of sent
// as nulls (or as a null-typed column), timestamps in another unit,
// integers of another width, large strings.
func TestEncodingsOfTheSameRowsDigestTheSame(t *testing.T) {
	base := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "s", Type: arrow.BinaryTypes.String},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	want := Of(fromJSON(t, base, `[{"id":1,"ts":"2026-12-06T10:00:00.000001Z","s":"a","n":null},{"id":2,"ts":"2026-12-06T10:00:01Z","s":"b","n":null}]`))
	for name, schema := range map[string]*arrow.Schema{
		"reordered":               arrow.NewSchema([]arrow.Field{base.Field(2), base.Field(0), base.Field(3), base.Field(1)}, nil),
		"without the null column": arrow.NewSchema(base.Fields()[:3], nil),
		"null-typed column":       arrow.NewSchema(append(base.Fields()[:3:3], arrow.Field{Name: "n", Type: arrow.Null, Nullable: true}), nil),
		"nanoseconds and int32": arrow.NewSchema([]arrow.Field{
			{Name: "id", Type: arrow.PrimitiveTypes.Int32},
			{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}},
			{Name: "s", Type: arrow.BinaryTypes.LargeString},
		}, nil),
	} {
		got := Of(fromJSON(t, schema, `[{"id":1,"ts":"2026-12-06T10:00:00.000001Z","s":"a"},{"id":2,"ts":"2026-12-06T10:00:01Z","s":"b"}]`))
		if got != want {
			t.Errorf("%s: digest %x, want %x", name, got, want)
		}
	}
	renamed := arrow.NewSchema([]arrow.Field{{Name: "key", Type: arrow.PrimitiveTypes.Int64}, base.Field(1), base.Field(2)}, nil)
	if Of(fromJSON(t, renamed, `[{"key":1,"ts":"2026-12-06T10:00:00.000001Z","s":"a"},{"key":2,"ts":"2026-12-06T10:00:01Z","s":"b"}]`)) == want {
		t.Error("a renamed column digests the same")
	}
}
