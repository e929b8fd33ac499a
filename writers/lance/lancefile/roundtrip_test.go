package lancefile

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers/lance/internal/lancetest"
)

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

// formatSchema is lancetest.AllTypesSchema without the types Quiver does not write
// in format 2.minor (null vector items in 2.1 and 2.2), plus the types it
// writes in 2.1 and 2.2 only.
func formatSchema(minor uint16) *arrow.Schema {
	s := lancetest.AllTypesSchema()
	if minor == 0 {
		return s
	}
	var fs []arrow.Field
	for _, f := range s.Fields() {
		switch f.Type.ID() {
		case arrow.FIXED_SIZE_LIST: // vectors without null items
			f.Metadata = arrow.NewMetadata([]string{lancetest.NoItemNulls}, []string{"true"})
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
		r := lancetest.RandomRecord(mem, s, rng, start, n+3, nullPct)
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
	want := lancetest.ConcatRecords(t, mem, recs)
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
