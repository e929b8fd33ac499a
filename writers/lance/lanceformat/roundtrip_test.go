package lanceformat

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// allTypesSchema covers every type Quiver writes.
func allTypesSchema() *arrow.Schema {
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

// randomRecord builds n random rows of s; nullPct of nullable values are
// null (structs never are: 2.0 cannot store null structs).
func randomRecord(mem memory.Allocator, s *arrow.Schema, rng *rand.Rand, start, n int, nullPct int) arrow.RecordBatch {
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
		itemNulls := !f.HasMetadata() || f.Metadata.FindKey(noItemNulls) < 0
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

// writeFile writes recs into an in-memory Lance 2.0 file.
func writeFile(t testing.TB, s *arrow.Schema, pageBytes int64, recs ...arrow.RecordBatch) []byte {
	t.Helper()
	return writeFileV(t, s, pageBytes, 0, recs...)
}

// writeFileV writes recs into an in-memory Lance file of format 2.minor.
func writeFileV(t testing.TB, s *arrow.Schema, pageBytes int64, minor uint16, recs ...arrow.RecordBatch) []byte {
	t.Helper()
	ls, err := FromArrow(s)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := NewFileWriter(&buf, s, ls, pageBytes, minor)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	size, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if size != uint64(buf.Len()) {
		t.Fatalf("Close reported %d bytes, wrote %d", size, buf.Len())
	}
	return buf.Bytes()
}

// readFile reads a file that reads as one record.
func readFile(t testing.TB, mem memory.Allocator, b []byte) arrow.RecordBatch {
	t.Helper()
	recs := readFileRecords(t, mem, b)
	if len(recs) != 1 {
		ReleaseRecords(recs)
		t.Fatalf("the file reads as %d records, want 1", len(recs))
	}
	return recs[0]
}

func readFileRecords(t testing.TB, mem memory.Allocator, b []byte) []arrow.RecordBatch {
	t.Helper()
	f, err := OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := f.Read(mem)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// concatRecords concatenates records column-wise into one.
func concatRecords(t testing.TB, mem memory.Allocator, recs []arrow.RecordBatch) arrow.RecordBatch {
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

func TestFileRoundTrip(t *testing.T) {
	cases := []struct {
		name      string
		batches   []int
		nullPct   int
		pageBytes int64
		slice     bool
	}{
		{"one-batch", []int{50}, 20, 0, false},
		{"no-nulls", []int{30}, 0, 0, false},
		{"all-nulls", []int{17}, 100, 0, false},
		{"many-pages", []int{300, 7, 1, 500}, 30, 2048, false},
		{"sliced-input", []int{100, 64}, 25, 4096, true},
		{"empty-batch", []int{0, 9}, 50, 0, false},
		{"many-chunks", []int{2500, 3000}, 10, 0, false},
	}
	for minor := range uint16(3) {
		for seed, tc := range cases {
			t.Run(fmt.Sprintf("2.%d/%s", minor, tc.name), func(t *testing.T) {
				roundTrip(t, minor, uint64(seed), tc.batches, tc.nullPct, tc.pageBytes, tc.slice)
			})
		}
	}
}

// noItemNulls is field metadata telling fillValue to leave the items of
// a fixed-size list non-null.
const noItemNulls = "test.no_item_nulls"

// formatSchema is allTypesSchema without the types Quiver does not write
// in format 2.minor (null vector items in 2.1 and 2.2), plus the types it
// writes in 2.1 and 2.2 only.
func formatSchema(minor uint16) *arrow.Schema {
	s := allTypesSchema()
	if minor == 0 {
		return s
	}
	var fs []arrow.Field
	for _, f := range s.Fields() {
		switch f.Type.ID() {
		case arrow.FIXED_SIZE_LIST: // vectors without null items
			f.Metadata = arrow.NewMetadata([]string{noItemNulls}, []string{"true"})
			fs = append(fs, f)
		default:
			fs = append(fs, f)
		}
	}
	nn := func(name string, t arrow.DataType) arrow.Field {
		return arrow.Field{Name: name, Type: t, Nullable: true}
	}
	fs = append(fs, nn("f16", arrow.FixedWidthTypes.Float16), nn("dec", &arrow.Decimal128Type{Precision: 18, Scale: 3}),
		nn("d64", arrow.FixedWidthTypes.Date64), nn("t32", arrow.FixedWidthTypes.Time32ms),
		nn("t64", arrow.FixedWidthTypes.Time64us), nn("dur", &arrow.DurationType{Unit: arrow.Millisecond}))
	return arrow.NewSchema(fs, nil)
}

func roundTrip(t *testing.T, minor uint16, seed uint64, batches []int, nullPct int, pageBytes int64, slice bool) {
	s := formatSchema(minor)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rng := rand.New(rand.NewPCG(seed, 7))
	var recs []arrow.RecordBatch
	start := 0
	for _, n := range batches {
		r := randomRecord(mem, s, rng, start, n+3, nullPct)
		if slice {
			// Offsets that are not byte aligned exercise bitmap copies.
			sl := r.NewSlice(3, int64(n+3))
			r.Release()
			r = sl
		} else {
			sl := r.NewSlice(0, int64(n))
			r.Release()
			r = sl
		}
		recs = append(recs, r)
		start += n
	}
	want := concatRecords(t, mem, recs)
	defer want.Release()
	b := writeFileV(t, s, pageBytes, minor, recs...)
	for _, r := range recs {
		r.Release()
	}
	got := readFile(t, mem, b)
	defer got.Release()
	if !array.RecordEqual(want, got) {
		for i := range int(want.NumCols()) {
			if !array.Equal(want.Column(i), got.Column(i)) {
				t.Errorf("column %s differs:\nwant %v\n got %v", s.Field(i).Name, want.Column(i), got.Column(i))
			}
		}
		t.FailNow()
	}
}
