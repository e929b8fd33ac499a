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
)

var dictPageType = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}

// dictRecord is a record of one dictionary column "c" over dict, its
// indices given (-1 for null).
func dictRecord(mem memory.Allocator, dt *arrow.DictionaryType, dict arrow.Array, idx []int) arrow.RecordBatch {
	ib := array.NewBuilder(mem, dt.IndexType)
	defer ib.Release()
	for _, i := range idx {
		switch b := ib.(type) {
		case *array.Int8Builder:
			if i < 0 {
				b.AppendNull()
			} else {
				b.Append(int8(i))
			}
		case *array.Int32Builder:
			if i < 0 {
				b.AppendNull()
			} else {
				b.Append(int32(i))
			}
		}
	}
	ia := ib.NewArray()
	defer ia.Release()
	d := array.NewDictionaryArray(dt, ia, dict)
	defer d.Release()
	s := arrow.NewSchema([]arrow.Field{{Name: "c", Type: dt, Nullable: true}}, nil)
	return array.NewRecordBatch(s, []arrow.Array{d}, int64(len(idx)))
}

// strs is a string array of vs ("" stands for null).
func strs(mem memory.Allocator, vs ...string) arrow.Array {
	b := array.NewStringBuilder(mem)
	defer b.Release()
	for _, v := range vs {
		b.AppendValues([]string{v}, []bool{v != ""})
	}
	return b.NewArray()
}

// TestDictionaryChunksDifferentDictionaries: chunks of one page with
// dictionaries of their own (overlapping, with nulls, one sliced) are
// stored under their union with remapped indices; when the union outgrows
// the int8 index type each chunk keeps a page of its own, and the file
// reads as several records. Values read back as written.
func TestDictionaryChunksDifferentDictionaries(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	d1, d2 := strs(mem, "a", "", "c"), strs(mem, "zz", "a", "yy")
	defer d1.Release()
	defer d2.Release()
	r1 := dictRecord(mem, dictPageType, d1, []int{0, 1, -1, 2})
	r2 := dictRecord(mem, dictPageType, d2, []int{1, 0, 2, 2, -1, 0})
	defer r1.Release()
	defer r2.Release()
	r3 := r2.NewSlice(1, 5)
	defer r3.Release()
	// 3 x 100 distinct values: no int8 index addresses their union.
	var wide []arrow.RecordBatch
	for k := range 3 {
		vs := make([]string, 100)
		idx := make([]int, 100)
		for i := range vs {
			vs[i], idx[i] = fmt.Sprintf("w%d-%d", k, i), 99-i
		}
		d := strs(mem, vs...)
		wide = append(wide, dictRecord(mem, dictPageType, d, idx))
		d.Release()
	}
	for _, minor := range []uint16{1, 2} {
		b := writeFileV(t, r1.Schema(), 0, minor, r1, r2, r3)
		if n := dictPages(t, b); n != 1 {
			t.Errorf("2.%d: %d pages, want 1", minor, n)
		}
		got := readFile(t, mem, b)
		if g, w := fmt.Sprint(lancetest.DictValues(got)), fmt.Sprint(lancetest.DictValues(r1, r2, r3)); g != w {
			t.Errorf("2.%d: read back %v\nwant %v", minor, g, w)
		}
		got.Release()
		// No int8 index addresses the union: a page per chunk, read back
		// as a record per run of pages whose dictionaries fit together.
		all := append([]arrow.RecordBatch{r1}, wide...)
		b = writeFileV(t, r1.Schema(), 0, minor, all...)
		if n := dictPages(t, b); n != 4 {
			t.Errorf("2.%d too wide: %d pages, want one per chunk", minor, n)
		}
		recs := readFileRecords(t, mem, b)
		if g, w := fmt.Sprint(lancetest.DictValues(recs...)), fmt.Sprint(lancetest.DictValues(all...)); g != w {
			t.Errorf("2.%d too wide: read back %v\nwant %v", minor, g, w)
		}
		if len(recs) != 3 { // r1 and the first wide chunk share one
			t.Errorf("2.%d too wide: %d records, want 3", minor, len(recs))
		}
		ReleaseRecords(recs)
	}
	for _, r := range wide {
		r.Release()
	}
}

// dictPages is the number of pages of a file's first column.
func dictPages(t *testing.T, b []byte) int {
	fr, err := OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return len(fr.columns[0])
}

// TestDictionaryStoredOncePerPage: a Flight stream's batches share one
// dictionary, and a record's large dictionary is no reason to cut it:
// either way the file holds about one copy of the dictionary (each chunk,
// or each page-sized slice, held a copy of its own).
func TestDictionaryStoredOncePerPage(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	vs := make([]string, 10_000)
	for i := range vs {
		vs[i] = fmt.Sprintf("category %08d with a long-ish label", i)
	}
	dict := strs(mem, vs...)
	defer dict.Release()
	dictBytes := dict.Data().Buffers()[2].Len() + dict.Data().Buffers()[1].Len()
	idx := func(n, from int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = (from + i) * 397 % len(vs)
		}
		return out
	}
	var stream []arrow.RecordBatch
	for k := range 200 {
		stream = append(stream, dictRecord(mem, dt, dict, idx(100, 100*k)))
	}
	large := dictRecord(mem, dt, dict, idx(1000, 0))
	for name, recs := range map[string][]arrow.RecordBatch{"stream": stream, "large dictionary": {large}} {
		b := writeFileV(t, recs[0].Schema(), 200<<10, 2, recs...)
		if len(b) > dictBytes*3/2 {
			t.Errorf("%s: %d bytes for a dictionary of %d (%.1f copies)", name, len(b), dictBytes, float64(len(b))/float64(dictBytes))
		}
		got := readFile(t, mem, b)
		if g, w := fmt.Sprint(lancetest.DictValues(got)), fmt.Sprint(lancetest.DictValues(recs...)); g != w {
			t.Errorf("%s: values differ", name)
		}
		got.Release()
	}
	for _, r := range append(stream, large) {
		r.Release()
	}
}

// TestDictionaryChunksManyBatches: a stream of many batches, each with a
// dictionary of its own, whose union outgrows the int8 index type many
// times over, in pages of several chunks (a large page size) and of one:
// every value reads back, every record's dictionary fits its indices, and
// a dataset of them reads back through ReadFragment with deletions.
func TestDictionaryChunksManyBatches(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var recs []arrow.RecordBatch
	for k := range 40 {
		vs := make([]string, 30+k%50)
		for i := range vs {
			vs[i] = fmt.Sprintf("b%d-v%d", k, i)
		}
		idx := make([]int, 97)
		for i := range idx {
			idx[i] = (i*7 + k) % len(vs)
			if i%13 == 0 {
				idx[i] = -1
			}
		}
		d := strs(mem, vs...)
		recs = append(recs, dictRecord(mem, dictPageType, d, idx))
		d.Release()
	}
	defer ReleaseRecords(recs)
	for _, minor := range []uint16{1, 2} {
		for _, pageBytes := range []int64{0, 1} {
			b := writeFileV(t, recs[0].Schema(), pageBytes, minor, recs...)
			got := readFileRecords(t, mem, b)
			if g, w := fmt.Sprint(lancetest.DictValues(got...)), fmt.Sprint(lancetest.DictValues(recs...)); g != w {
				t.Errorf("2.%d, page bytes %d: values differ", minor, pageBytes)
			}
			for _, r := range got {
				if n := r.Column(0).(*array.Dictionary).Dictionary().Len(); n > 128 {
					t.Errorf("2.%d: a record's dictionary has %d entries", minor, n)
				}
			}
			if len(got) < 2 {
				t.Errorf("2.%d, page bytes %d: %d records", minor, pageBytes, len(got))
			}
			ReleaseRecords(got)
		}
	}
}

// TestDictionaryTooWideForIndices: a record whose dictionary alone holds
// more entries than its indices address is refused naming the column.
func TestDictionaryTooWideForIndices(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	vs := make([]string, 129)
	for i := range vs {
		vs[i] = fmt.Sprint("v", i)
	}
	d := strs(mem, vs...)
	defer d.Release()
	rec := dictRecord(mem, dictPageType, d, []int{0, 127})
	defer rec.Release()
	w := newDictFileWriter(t, rec.Schema())
	err := w.Write(rec)
	if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), `"c"`) || !strings.Contains(err.Error(), "129") {
		t.Fatalf("got %v, want ErrInvalid naming column c and its 129 entries", err)
	}
	// 128 entries are what int8 indices address.
	d128 := array.NewSlice(d, 0, 128)
	defer d128.Release()
	ok := dictRecord(mem, dictPageType, d128, []int{0, 127})
	defer ok.Release()
	if err := w.Write(ok); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFileDictKeysCopied: the distinct values a file writer tracks per
// dictionary column are its own copies, not views of the record's
// dictionary buffer (which the caller reuses or frees after Write), and
// their bytes count in Pending after the page is flushed.
func TestFileDictKeysCopied(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	vs := make([]string, 100)
	for i := range vs {
		vs[i] = fmt.Sprintf("%04d%s", i, strings.Repeat("x", 1020))
	}
	d := strs(mem, vs...)
	defer d.Release()
	rec := dictRecord(mem, dictPageType, d, []int{0, 99, -1, 5})
	defer rec.Release()
	w := newDictFileWriter(t, rec.Schema())
	defer w.Abort()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if p := w.Pending(); p < 100*1024 {
		t.Errorf("Pending = %d after the flush, want the 100 KiB of tracked values", p)
	}
	// The record's dictionary buffer overwritten (as a reused or freed
	// buffer would be): the writer still knows the values it saw.
	data := d.Data().Buffers()[2].Bytes()
	for i := range data {
		data[i] = 'z'
	}
	again := strs(mem, vs...)
	defer again.Release()
	w.dicts[0].last = nil // compare by value
	if n := w.dicts[0].fresh(again); n != 0 {
		t.Errorf("%d of the values written look new: the tracker's keys alias the record's buffer", n)
	}
}

// newDictFileWriter is a 2.2 file writer of schema s into memory.
func newDictFileWriter(t *testing.T, s *arrow.Schema) *FileWriter {
	t.Helper()
	ls, err := FromArrow(s)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewFileWriter(&bytes.Buffer{}, s, ls, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	return w
}
