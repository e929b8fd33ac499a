package merge

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
)

// keyTypes lists one type per supported key type.
var keyTypes = []arrow.DataType{
	arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64,
	arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64,
	arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.StringView,
	arrow.BinaryTypes.Binary, arrow.BinaryTypes.LargeBinary, arrow.BinaryTypes.BinaryView,
	&arrow.FixedSizeBinaryType{ByteWidth: 3},
	arrow.FixedWidthTypes.Date32, arrow.FixedWidthTypes.Date64,
	arrow.FixedWidthTypes.Time32s, arrow.FixedWidthTypes.Time64us,
	arrow.FixedWidthTypes.Timestamp_s, arrow.FixedWidthTypes.Timestamp_ms, arrow.FixedWidthTypes.Timestamp_us, arrow.FixedWidthTypes.Timestamp_ns,
	arrow.FixedWidthTypes.Duration_ms,
	&arrow.Decimal128Type{Precision: 20, Scale: 2},
	arrow.FixedWidthTypes.Boolean,
}

// appendKeyValue appends to b a value of b's type derived from v (v and -v
// and distinct v give distinct values for every type but bool, which only
// sees v's parity).
func appendKeyValue(t testing.TB, b array.Builder, v int64) {
	t.Helper()
	switch b := b.(type) {
	case *array.Int8Builder:
		b.Append(int8(v))
	case *array.Int16Builder:
		b.Append(int16(v))
	case *array.Int32Builder:
		b.Append(int32(v))
	case *array.Int64Builder:
		b.Append(v)
	case *array.Uint8Builder:
		b.Append(uint8(v))
	case *array.Uint16Builder:
		b.Append(uint16(v))
	case *array.Uint32Builder:
		b.Append(uint32(v))
	case *array.Uint64Builder:
		b.Append(uint64(v))
	case *array.StringBuilder:
		b.Append(fmt.Sprint("s", v))
	case *array.LargeStringBuilder:
		b.Append(fmt.Sprint("s", v))
	case *array.StringViewBuilder:
		b.Append(fmt.Sprint("a long string view value ", v))
	case *array.FixedSizeBinaryBuilder:
		b.Append([]byte{byte(v), byte(v >> 8), byte(v >> 16)})
	case *array.BinaryViewBuilder:
		b.Append(fmt.Appendf(nil, "b%d", v))
	case *array.BinaryBuilder: // binary and large_binary
		b.Append(fmt.Appendf(nil, "b%d", v))
	case *array.Date32Builder:
		b.Append(arrow.Date32(v))
	case *array.Date64Builder:
		b.Append(arrow.Date64(v))
	case *array.Time32Builder:
		b.Append(arrow.Time32(v))
	case *array.Time64Builder:
		b.Append(arrow.Time64(v))
	case *array.TimestampBuilder:
		b.Append(arrow.Timestamp(v))
	case *array.DurationBuilder:
		b.Append(arrow.Duration(v))
	case *array.Decimal128Builder:
		b.Append(decimal128.FromI64(v))
	case *array.BooleanBuilder:
		b.Append(v%2 != 0)
	default:
		t.Fatalf("no value for builder %T", b)
	}
}

// keyRecord builds a record with one column c<i> per type, row r holding
// appendKeyValue(vals[r]).
func keyRecord(t testing.TB, mem memory.Allocator, types []arrow.DataType, vals []int64) arrow.RecordBatch {
	t.Helper()
	fields := make([]arrow.Field, len(types))
	cols := make([]arrow.Array, len(types))
	for i, dt := range types {
		fields[i] = arrow.Field{Name: fmt.Sprint("c", i), Type: dt}
		b := array.NewBuilder(mem, dt)
		for _, v := range vals {
			appendKeyValue(t, b, v)
		}
		cols[i] = b.NewArray()
		b.Release()
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(len(vals)))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

func fieldNames(s *arrow.Schema) []string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	return names
}

func TestKeyEncoderEveryType(t *testing.T) {
	for _, dt := range keyTypes {
		t.Run(dt.String(), func(t *testing.T) {
			mem := checkedMem(t)
			rec := keyRecord(t, mem, []arrow.DataType{dt}, []int64{2, 3, 2, -3})
			defer rec.Release()
			enc, err := NewKeyEncoder(rec.Schema(), []string{"c0"})
			if err != nil {
				t.Fatal(err)
			}
			if err := enc.Encode(rec); err != nil {
				t.Fatal(err)
			}
			if enc.Len() != 4 {
				t.Fatalf("Len = %d, want 4", enc.Len())
			}
			if !bytes.Equal(enc.Key(0), enc.Key(2)) {
				t.Errorf("equal values encode differently: %x %x", enc.Key(0), enc.Key(2))
			}
			if bytes.Equal(enc.Key(0), enc.Key(1)) {
				t.Errorf("distinct values encode alike: %x", enc.Key(0))
			}
			if dt.ID() != arrow.BOOL && bytes.Equal(enc.Key(1), enc.Key(3)) {
				t.Errorf("v and -v encode alike: %x", enc.Key(1))
			}
		})
	}
}

func TestKeyEncoderGoldenBytes(t *testing.T) {
	mem := checkedMem(t)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "i", Type: arrow.PrimitiveTypes.Int32},
		{Name: "s", Type: arrow.BinaryTypes.String},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "d", Type: &arrow.Decimal128Type{Precision: 10, Scale: 1}},
	}, nil)
	rec := fromJSON(t, mem, schema, `[{"i":-1,"s":"ab","b":true,"d":"-0.1"},{"i":1,"s":"","b":false,"d":"0.2"}]`)
	defer rec.Release()
	enc, err := NewKeyEncoder(schema, []string{"s", "i", "b", "d"})
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.Encode(rec); err != nil {
		t.Fatal(err)
	}
	for row, want := range []string{
		"026162" + "7fffffffffffffff" + "01" + "7fffffffffffffff" + "ffffffffffffffff",
		"00" + "8000000000000001" + "00" + "8000000000000000" + "0000000000000002",
	} {
		if got := hex.EncodeToString(enc.Key(row)); got != want {
			t.Errorf("row %d: key %s, want %s", row, got, want)
		}
	}
}

func TestKeyEncoderWidthsEncodeAlike(t *testing.T) {
	mem := checkedMem(t)
	for _, group := range [][]arrow.DataType{
		{arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64},
		{arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint64},
		{arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString},
	} {
		rec := keyRecord(t, mem, group, []int64{5, 100})
		encs := make([]*KeyEncoder, len(group))
		for i := range group {
			var err error
			if encs[i], err = NewKeyEncoder(rec.Schema(), []string{fmt.Sprint("c", i)}); err != nil {
				t.Fatal(err)
			}
			if err := encs[i].Encode(rec); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(encs[i].Key(1), encs[0].Key(1)) {
				t.Errorf("%s and %s encode 100 differently", group[i], group[0])
			}
		}
		rec.Release()
	}
}

func TestKeyEncoderSameEncoding(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int32},
		{Name: "b", Type: arrow.BinaryTypes.String},
		{Name: "c", Type: arrow.PrimitiveTypes.Int64},
		{Name: "d", Type: arrow.BinaryTypes.LargeString},
		{Name: "e", Type: arrow.PrimitiveTypes.Uint32},
	}, nil)
	mk := func(keys ...string) *KeyEncoder {
		e, err := NewKeyEncoder(schema, keys)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for _, tc := range []struct {
		name string
		a, b *KeyEncoder
		ok   bool
	}{
		{"same", mk("a", "b"), mk("a", "b"), true},
		{"key names differ", mk("a", "b"), mk("c", "d"), false},
		{"signed vs unsigned", mk("a"), mk("e"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.a.SameEncoding(tc.b)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, writers.ErrInvalid)) {
				t.Errorf("SameEncoding = %v, want ok=%v", err, tc.ok)
			}
		})
	}
	other := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}, {Name: "b", Type: arrow.BinaryTypes.LargeString}}, nil)
	o, err := NewKeyEncoder(other, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if err := mk("a", "b").SameEncoding(o); err != nil {
		t.Errorf("int32/utf8 vs int64/large_utf8: %v, want compatible", err)
	}
}

func TestKeyEncoderConfigErrors(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)},
		{Name: "_op", Type: arrow.BinaryTypes.String},
		{Name: "dup", Type: arrow.PrimitiveTypes.Int64},
		{Name: "dup", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	for _, tc := range []struct {
		name string
		keys []string
	}{
		{"no keys", nil},
		{"missing column", []string{"nope"}},
		{"float key", []string{"f"}},
		{"list key", []string{"l"}},
		{"metadata key", []string{"_op"}},
		{"listed twice", []string{"id", "id"}},
		{"ambiguous name", []string{"dup"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewKeyEncoder(schema, tc.keys); !errors.Is(err, writers.ErrInvalid) {
				t.Errorf("got %v, want ErrInvalid", err)
			}
		})
	}
}

func TestKeyEncoderNullKey(t *testing.T) {
	mem := checkedMem(t)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	rec := fromJSON(t, mem, schema, `[{"a":1,"b":"x"},{"a":2,"b":"y"},{"a":3,"b":null}]`)
	defer rec.Release()
	enc, err := NewKeyEncoder(schema, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	err = enc.Encode(rec)
	var re *RowError
	if !errors.As(err, &re) || !errors.Is(err, writers.ErrInvalid) || re.Row != 2 || re.Column != "b" {
		t.Fatalf("got %v, want a row error for row 2, column b", err)
	}
}

func TestKeyEncoderSlicedInput(t *testing.T) {
	for _, dt := range keyTypes {
		t.Run(dt.String(), func(t *testing.T) {
			mem := checkedMem(t)
			full := keyRecord(t, mem, []arrow.DataType{dt, arrow.BinaryTypes.String}, []int64{9, 8, 7, 6, 5})
			defer full.Release()
			sliced := full.NewSlice(2, 5)
			defer sliced.Release()
			direct := keyRecord(t, mem, []arrow.DataType{dt, arrow.BinaryTypes.String}, []int64{7, 6, 5})
			defer direct.Release()
			encA, _ := NewKeyEncoder(full.Schema(), []string{"c0", "c1"})
			encB, _ := NewKeyEncoder(full.Schema(), []string{"c0", "c1"})
			if err := encA.Encode(sliced); err != nil {
				t.Fatal(err)
			}
			if err := encB.Encode(direct); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if !bytes.Equal(encA.Key(i), encB.Key(i)) {
					t.Errorf("row %d: sliced %x, direct %x", i, encA.Key(i), encB.Key(i))
				}
			}
		})
	}
}

func TestKeyEncoderEncodeColumnsChecks(t *testing.T) {
	mem := checkedMem(t)
	rec := keyRecord(t, mem, []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String}, []int64{1, 2})
	defer rec.Release()
	enc, err := NewKeyEncoder(rec.Schema(), []string{"c0"})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		cols []arrow.Array
		n    int
	}{
		"wrong count":  {rec.Columns(), 2},
		"wrong length": {rec.Columns()[:1], 3},
		"wrong type":   {rec.Columns()[1:], 2},
	} {
		if err := enc.EncodeColumns(tc.cols, tc.n); !errors.Is(err, writers.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
}

// FuzzKeyEncoder checks that distinct (int64, string, binary, bool) tuples
// encode to distinct keys, equal tuples to equal keys, and nothing panics.
func FuzzKeyEncoder(f *testing.F) {
	f.Add(int64(1), "a", []byte("b"), true, int64(1), "a", []byte("b"), true)
	f.Add(int64(0), "", []byte{}, false, int64(0), "", []byte(nil), false)
	f.Add(int64(-1), "ab", []byte("c"), false, int64(-1), "a", []byte("bc"), false)
	f.Add(int64(1<<62), "\x01", []byte{1}, true, int64(-1<<62), "\x01\x01", []byte{}, true)
	f.Fuzz(func(t *testing.T, i1 int64, s1 string, b1 []byte, o1 bool, i2 int64, s2 string, b2 []byte, o2 bool) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		schema := arrow.NewSchema([]arrow.Field{
			{Name: "i", Type: arrow.PrimitiveTypes.Int64},
			{Name: "s", Type: arrow.BinaryTypes.String},
			{Name: "b", Type: arrow.BinaryTypes.LargeBinary},
			{Name: "o", Type: arrow.FixedWidthTypes.Boolean},
		}, nil)
		bld := array.NewRecordBuilder(mem, schema)
		defer bld.Release()
		for _, r := range []struct {
			i int64
			s string
			b []byte
			o bool
		}{{i1, s1, b1, o1}, {i2, s2, b2, o2}} {
			bld.Field(0).(*array.Int64Builder).Append(r.i)
			bld.Field(1).(*array.StringBuilder).Append(r.s)
			bld.Field(2).(*array.BinaryBuilder).Append(r.b)
			bld.Field(3).(*array.BooleanBuilder).Append(r.o)
		}
		rec := bld.NewRecordBatch()
		defer rec.Release()
		enc, err := NewKeyEncoder(schema, []string{"i", "s", "b", "o"})
		if err != nil {
			t.Fatal(err)
		}
		if err := enc.Encode(rec); err != nil {
			t.Fatal(err)
		}
		same := i1 == i2 && s1 == s2 && bytes.Equal(b1, b2) && o1 == o2
		if got := bytes.Equal(enc.Key(0), enc.Key(1)); got != same {
			t.Errorf("tuples equal=%v but keys equal=%v: %x vs %x", same, got, enc.Key(0), enc.Key(1))
		}
	})
}
