package lancefile

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/internal/lancetest"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodings21pb"
)

// wideRecord builds n rows whose every 5th string (and binary, large
// string, list item, struct field) is wider than a mini-block chunk takes
// (compressible text, or random-looking bytes), with nulls, empty and
// null lists, and vectors of 3,072 float32 (12 KiB, every 4th null).
func wideRecord(mem memory.Allocator, n int) arrow.RecordBatch {
	nn := func(name string, t arrow.DataType) arrow.Field {
		return arrow.Field{Name: name, Type: t, Nullable: true}
	}
	s := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		nn("doc", arrow.BinaryTypes.String), nn("blob", arrow.BinaryTypes.Binary), nn("big", arrow.BinaryTypes.LargeString),
		nn("docs", arrow.ListOf(arrow.BinaryTypes.String)),
		nn("st", arrow.StructOf(nn("k", arrow.PrimitiveTypes.Int32), nn("text", arrow.BinaryTypes.String))),
		nn("emb", arrow.FixedSizeListOf(3072, arrow.PrimitiveTypes.Float32)),
	}, nil)
	b := array.NewRecordBuilder(mem, s)
	defer b.Release()
	text := func(i int) string {
		if i%5 == 0 {
			return strings.Repeat(fmt.Sprintf("row %d is long; ", i), 600+i) // ~10-14 KiB
		}
		return fmt.Sprintf("short %d", i)
	}
	noise := func(i int) []byte {
		size := 5
		if i%5 == 1 {
			size = 9000 + i
		}
		out := make([]byte, size)
		x := uint32(i*2654435761 + 1)
		for k := range out {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			out[k] = byte(x)
		}
		return out
	}
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		str, bin, big := b.Field(1).(*array.StringBuilder), b.Field(2).(*array.BinaryBuilder), b.Field(3).(*array.LargeStringBuilder)
		if i%7 == 3 {
			str.AppendNull()
			bin.AppendNull()
			big.AppendNull()
		} else {
			str.Append(text(i))
			bin.Append(noise(i))
			big.Append(text(i + 1))
		}
		lb := b.Field(4).(*array.ListBuilder)
		switch i % 6 {
		case 2:
			lb.AppendNull()
		case 4:
			lb.Append(true) // empty
		default:
			lb.Append(true)
			for j := range i%3 + 1 {
				if j == 1 {
					lb.ValueBuilder().AppendNull()
				} else {
					lb.ValueBuilder().(*array.StringBuilder).Append(text(i + j))
				}
			}
		}
		sb := b.Field(5).(*array.StructBuilder)
		if i%9 == 8 {
			sb.AppendNull()
		} else {
			sb.Append(true)
			sb.FieldBuilder(0).(*array.Int32Builder).Append(int32(i))
			sb.FieldBuilder(1).(*array.StringBuilder).Append(text(i + 2))
		}
		vb := b.Field(6).(*array.FixedSizeListBuilder)
		if i%4 == 2 {
			vb.AppendNull()
		} else {
			vb.Append(true)
			for k := range 3072 {
				vb.ValueBuilder().(*array.Float32Builder).Append(float32(i) + float32(k)/4096)
			}
		}
	}
	return b.NewRecordBatch()
}

// layoutsOf returns the page layouts of each column of a data file.
func layoutsOf(t *testing.T, b []byte) [][]string {
	t.Helper()
	f, err := OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]string, len(f.columns))
	for c, pages := range f.columns {
		for _, p := range pages {
			switch p.layout.GetLayout().(type) {
			case *encodings21pb.PageLayout_FullZipLayout:
				out[c] = append(out[c], "full-zip")
			case *encodings21pb.PageLayout_MiniBlockLayout:
				out[c] = append(out[c], "mini-block")
			default:
				out[c] = append(out[c], "other")
			}
		}
	}
	return out
}

// TestFullZipRoundTrip: values wider than a mini-block chunk (strings,
// binaries, large strings, strings in lists and structs, 12 KiB vectors)
// are written as full-zip pages, mixed with small values and nulls, in
// one and in several pages, and read back equal.
func TestFullZipRoundTrip(t *testing.T) {
	for _, minor := range []uint16{1, 2} {
		for _, pageBytes := range []int64{0, 64 << 10} {
			t.Run(fmt.Sprintf("2.%d/page-%d", minor, pageBytes), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				rec := wideRecord(mem, 60)
				defer rec.Release()
				parts := []arrow.RecordBatch{rec.NewSlice(0, 23), rec.NewSlice(23, 60)}
				defer releaseRecs(parts)
				data := writeFileV(t, rec.Schema(), pageBytes, minor, parts...)
				got := readFile(t, mem, data)
				defer got.Release()
				assertRecordsEqual(t, rec, got)
				// Leaves: id, doc, blob, big, docs.item, st.k, st.text, emb.
				layouts := layoutsOf(t, data)
				for _, c := range []int{1, 2, 3, 4, 6, 7} {
					if !contains(layouts[c], "full-zip") {
						t.Errorf("column %d: layouts %v, want full-zip", c, layouts[c])
					}
				}
				if !contains(layouts[0], "mini-block") || contains(layouts[0], "full-zip") {
					t.Errorf("id: layouts %v, want mini-block", layouts[0])
				}
			})
		}
	}
}

// TestSparseListChunks: list columns with thousands of empty or null
// lists around each value (more levels than one mini-block chunk holds
// for the values the chunker would put in it) are written in smaller
// chunks, or full-zipped when even two values' levels overflow a chunk,
// and read back equal.
func TestSparseListChunks(t *testing.T) {
	cases := []struct {
		name   string
		gap    int // empty or null lists before each non-empty one
		values int
		want   string
	}{
		{"split", 300, 400, "mini-block"},
		{"full-zip", 70_000, 3, "full-zip"},
	}
	for _, minor := range []uint16{1, 2} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("2.%d/%s", minor, tc.name), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				s := arrow.NewSchema([]arrow.Field{
					{Name: "ints", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
					{Name: "strs", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
				}, nil)
				b := array.NewRecordBuilder(mem, s)
				defer b.Release()
				li, ls := b.Field(0).(*array.ListBuilder), b.Field(1).(*array.ListBuilder)
				for v := range tc.values {
					for g := range tc.gap {
						if g%3 == 0 {
							li.AppendNull()
							ls.AppendNull()
						} else {
							li.Append(true)
							ls.Append(true)
						}
					}
					li.Append(true)
					ls.Append(true)
					li.ValueBuilder().(*array.Int64Builder).Append(int64(v) << 40)
					ls.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprintf("value %d", v))
				}
				rec := b.NewRecordBatch()
				defer rec.Release()
				data := writeFileV(t, s, 0, minor, rec)
				got := readFile(t, mem, data)
				defer got.Release()
				assertRecordsEqual(t, rec, got)
				for c, l := range layoutsOf(t, data) {
					if !contains(l, tc.want) {
						t.Errorf("column %d: layouts %v, want %s", c, l, tc.want)
					}
				}
			})
		}
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func releaseRecs(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

func assertRecordsEqual(t *testing.T, want, got arrow.RecordBatch) {
	t.Helper()
	if want.NumRows() != got.NumRows() {
		t.Fatalf("%d rows, want %d", got.NumRows(), want.NumRows())
	}
	for i, f := range want.Schema().Fields() {
		if !array.Equal(want.Column(i), got.Column(i)) {
			t.Errorf("column %s differs:\n got %v\nwant %v", f.Name, lancetest.Trunc(got.Column(i)), lancetest.Trunc(want.Column(i)))
		}
	}
}

// TestDictionaryAndMapRoundTrip: dictionary columns (pandas categoricals,
// with null indices and a null dictionary value) are stored as their
// values under the dictionary type and read back as equal dictionaries;
// maps (with null maps, empty maps and null values) are stored in 2.2.
func TestDictionaryAndMapRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dictType := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	mapType := arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64)
	s := arrow.NewSchema([]arrow.Field{
		{Name: "cat", Type: dictType, Nullable: true},
		{Name: "m", Type: mapType, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, s)
	defer b.Release()
	db, mb := b.Field(0).(*array.BinaryDictionaryBuilder), b.Field(1).(*array.MapBuilder)
	for i := range 3000 {
		if i%7 == 3 {
			db.AppendNull()
		} else if err := db.AppendString([]string{"red", "green", "blue"}[i%3]); err != nil {
			t.Fatal(err)
		}
		switch i % 5 {
		case 0:
			mb.AppendNull()
		case 1:
			mb.Append(true) // empty
		default:
			mb.Append(true)
			for j := range i % 3 {
				mb.KeyBuilder().(*array.StringBuilder).Append(fmt.Sprintf("k%d", j))
				if j == 1 {
					mb.ItemBuilder().AppendNull()
				} else {
					mb.ItemBuilder().(*array.Int64Builder).Append(int64(i * j))
				}
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	got := readFile(t, mem, writeFileV(t, s, 0, 2, rec))
	defer got.Release()
	if !arrow.TypeEqual(got.Column(0).DataType(), dictType) || !arrow.TypeEqual(got.Column(1).DataType(), mapType) {
		t.Fatalf("types %s, %s", got.Column(0).DataType(), got.Column(1).DataType())
	}
	assertRecordsEqual(t, rec, got)
	for _, minor := range []uint16{0, 1} {
		if err := CheckFormatTypes(s, minor); err == nil || !strings.Contains(err.Error(), `"m"`) && !strings.Contains(err.Error(), `"cat"`) {
			t.Errorf("2.%d: %v, want the map (or dictionary) refused naming it", minor, err)
		}
	}
	if err := CheckFormatTypes(s, 2); err != nil {
		t.Errorf("2.2: %v", err)
	}
}

// TestStringDictionaryPages: a page of few distinct strings (categories,
// in a column and in a list, with nulls) is written as dictionary indices
// as pylance writes it; one of distinct names is not; both read back.
func TestStringDictionaryPages(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := arrow.NewSchema([]arrow.Field{
		{Name: "category", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.LargeString), Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(mem, s)
	defer b.Release()
	cats := []string{"books", "games", "music", "", "garden"}
	for i := range 3000 {
		if i%9 == 0 {
			b.Field(0).AppendNull()
		} else {
			b.Field(0).(*array.StringBuilder).Append(cats[i%5])
		}
		lb := b.Field(1).(*array.ListBuilder)
		lb.Append(i%4 != 0)
		for j := range i % 3 {
			lb.ValueBuilder().(*array.LargeStringBuilder).Append(cats[(i+j)%5])
		}
		b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("name-%d-%x", i, i*7919))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	for _, minor := range []uint16{1, 2} {
		data := writeFileV(t, s, 0, minor, rec)
		got := readFile(t, mem, data)
		assertRecordsEqual(t, rec, got)
		got.Release()
		f, err := OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		for c, want := range []bool{true, true, false} {
			for _, p := range f.columns[c] {
				if has := p.layout.GetMiniBlockLayout().GetDictionary() != nil; has != want {
					t.Errorf("2.%d column %d: dictionary %v, want %v", minor, c, has, want)
				}
			}
		}
	}
}

// TestPackedAndBlobRefused: fields whose metadata asks Lance for a packed
// struct or a blob column, which Quiver does not write, are refused
// naming the column (Quiver's unpacked pages would be misread).
func TestPackedAndBlobRefused(t *testing.T) {
	for name, f := range map[string]arrow.Field{
		"packed": {Name: "p", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32}),
			Metadata: arrow.NewMetadata([]string{"lance-encoding:packed"}, []string{"True"})},
		"legacy packed": {Name: "p", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32}),
			Metadata: arrow.NewMetadata([]string{"packed"}, []string{"true"})},
		"blob": {Name: "p", Type: arrow.BinaryTypes.LargeBinary, Metadata: arrow.NewMetadata([]string{"lance-encoding:blob"}, []string{"yes"})},
	} {
		ls, err := FromArrow(arrow.NewSchema([]arrow.Field{f}, nil))
		if err != nil {
			t.Fatal(err)
		}
		if err := ls.CheckLayouts(); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), `"p"`) {
			t.Errorf("%s: %v, want ErrInvalid naming the column", name, err)
		}
	}
	ls, _ := FromArrow(arrow.NewSchema([]arrow.Field{{Name: "f", Type: arrow.PrimitiveTypes.Float64,
		Metadata: arrow.NewMetadata([]string{"lance-encoding:bss"}, []string{"on"})}}, nil))
	if err := ls.CheckLayouts(); err != nil {
		t.Errorf("an encoding hint: %v", err)
	}
}

// TestLoneColumnReadsByPage: a file read for one primitive column (a
// merge's key scan) yields a record per page, not one array its pages were
// copied into; with two columns the pages are joined as before. Either
// way the rows are the ones written.
func TestLoneColumnReadsByPage(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "x", Type: arrow.PrimitiveTypes.Int32}}, nil)
	b := array.NewRecordBuilder(mem, s)
	defer b.Release()
	for i := range 300_000 {
		if i%97 == 0 {
			b.Field(0).AppendNull()
		} else {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
		}
		b.Field(1).(*array.Int32Builder).Append(int32(i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	data := writeFileV(t, s, 64<<10, 1, rec)
	for _, tc := range []struct {
		fields []int32
		many   bool
	}{{[]int32{0}, true}, {[]int32{0, 1}, false}} {
		f, err := OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		sub := &Schema{}
		for _, id := range tc.fields {
			sub.Fields = append(sub.Fields, f.Schema.Fields[id])
		}
		recs, err := f.ReadFields(mem, sub, nil)
		if err != nil {
			t.Fatal(err)
		}
		if (len(recs) > 1) != tc.many {
			t.Errorf("fields %v: %d records, want many: %v", tc.fields, len(recs), tc.many)
		}
		row := 0
		for _, r := range recs {
			ids := r.Column(0).(*array.Int64)
			for i := range ids.Len() {
				if want := rec.Column(0).(*array.Int64); ids.IsNull(i) != want.IsNull(row) || !ids.IsNull(i) && ids.Value(i) != want.Value(row) {
					t.Fatalf("fields %v: row %d reads %v", tc.fields, row, ids.ValueStr(i))
				}
				row++
			}
		}
		if row != 300_000 {
			t.Errorf("fields %v: %d rows read", tc.fields, row)
		}
		ReleaseRecords(recs)
	}
}
