package parquetio

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/parquetio/internal/bufpool"
)

// TestFloatZeroBounds: -0 and +0 compare equal, yet FileStats (Delta's
// data skipping) must order them as Go's min and max do: a file holding
// +0 never claims a maximum of -0, whichever zero comes first.
func TestFloatZeroBounds(t *testing.T) {
	negZero := math.Copysign(0, -1)
	for _, tc := range []struct {
		values                 []float64
		minNegZero, maxNegZero bool
	}{
		{[]float64{negZero, 0}, true, false},
		{[]float64{0, negZero}, true, false},
		{[]float64{0, 0}, false, false},
		{[]float64{negZero, negZero}, true, true},
		{[]float64{negZero, 3, math.NaN()}, true, false},
	} {
		schema := arrow.NewSchema([]arrow.Field{{Name: "f", Type: arrow.PrimitiveTypes.Float64}, {Name: "g", Type: arrow.PrimitiveTypes.Float32}}, nil)
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		b.Field(0).(*array.Float64Builder).AppendValues(tc.values, nil)
		for _, v := range tc.values {
			b.Field(1).(*array.Float32Builder).Append(float32(v))
		}
		rec := b.NewRecordBatch()
		b.Release()
		_, fs := writeFile(t, schema, Options{}, rec)
		rec.Release()
		for _, c := range fs.Columns {
			if math.IsNaN(tc.values[len(tc.values)-1]) {
				if c.HasMinMax {
					t.Errorf("%v column %s: bounds %v..%v, want none (NaN)", tc.values, c.Path, c.Min, c.Max)
				}
				continue
			}
			lo, hi := c.Min.(float64), c.Max.(float64)
			if math.Signbit(lo) != tc.minNegZero || math.Signbit(hi) != tc.maxNegZero {
				t.Errorf("%v column %s: bounds %v..%v (sign bits %v, %v), want %v, %v", tc.values, c.Path, lo, hi, math.Signbit(lo), math.Signbit(hi), tc.minNegZero, tc.maxNegZero)
			}
		}
	}
}

// TestEmptyChildWithoutOffsets: a list column whose lists are all empty
// may come with a zero-length child that has no offsets buffer (ipccheck
// allows it; arrow-go's own writer sends one entry); writing must not
// slice the missing buffer.
func TestEmptyChildWithoutOffsets(t *testing.T) {
	for _, dt := range []arrow.DataType{arrow.BinaryTypes.Binary, arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString} {
		child := array.MakeFromData(array.NewData(dt, 0, []*memory.Buffer{nil, nil, nil}, nil, 0, 0))
		offsets := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes([]int32{0, 0, 0}))
		listType := arrow.ListOf(dt)
		list := array.MakeFromData(array.NewData(listType, 2, []*memory.Buffer{nil, offsets}, []arrow.ArrayData{child.Data()}, 0, 0))
		schema := arrow.NewSchema([]arrow.Field{{Name: "xs", Type: listType, Nullable: true}}, nil)
		rec := array.NewRecordBatch(schema, []arrow.Array{list}, 2)
		data, fs := writeFile(t, schema, Options{}, rec)
		if fs.Rows != 2 || len(data) == 0 {
			t.Errorf("%s: %d rows written", dt, fs.Rows)
		}
		rec.Release()
		list.Release()
		child.Release()
	}
}

// TestDictionaryInputPageSize: dictionary input written PLAIN (no
// dictionary, or one that outgrew its limit) expands a few large values
// repeated by small indexes; pages are still cut at about 256 KiB, and a
// nested piece that would make a page beyond what a page may hold is
// refused instead of built.
func TestDictionaryInputPageSize(t *testing.T) {
	mem := memory.NewGoAllocator()
	values := array.NewStringBuilder(mem)
	for i := range 300 {
		values.Append(string(bytes.Repeat([]byte{byte('a' + i%26)}, 4000)) + strconv.Itoa(i))
	}
	dict := values.NewArray()
	defer dict.Release()
	ib := array.NewInt16Builder(mem)
	for i := range 24576 {
		ib.Append(int16(i % 300))
	}
	indices := ib.NewArray()
	defer indices.Release()
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}
	col := array.NewDictionaryArray(dt, indices, dict)
	defer col.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "d", Type: dt}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(col.Len()))
	defer rec.Release()
	data, _ := writeFile(t, schema, Options{NoDictionary: true, Compression: CompressionNone}, rec)
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, index := range f.OffsetIndexes() {
		for _, page := range index.PageLocations {
			if page.CompressedPageSize > pageBytes+8192 {
				t.Fatalf("a page of %d bytes, want about %d at most", page.CompressedPageSize, pageBytes)
			}
		}
	}

	// The same values in lists: one piece of 300 rows of 3,000 values each
	// stands for 3.6 GB.
	lb := array.NewListBuilder(mem, dt)
	defer lb.Release()
	vb := lb.ValueBuilder().(*array.BinaryDictionaryBuilder)
	if err := vb.InsertStringDictValues(dict.(*array.String)); err != nil {
		t.Fatal(err)
	}
	idx := make([]int, 3000)
	for j := range idx {
		idx[j] = j % 300
	}
	for range 300 {
		lb.Append(true)
		vb.AppendIndices(idx, nil)
	}
	lists := lb.NewArray()
	defer lists.Release()
	nested := arrow.NewSchema([]arrow.Field{{Name: "ds", Type: lists.DataType(), Nullable: true}}, nil)
	nrec := array.NewRecordBatch(nested, []arrow.Array{lists}, int64(lists.Len()))
	defer nrec.Release()
	w, err := NewWriter(io.Discard, nested, Options{NoDictionary: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(nrec); !errors.Is(err, writers.ErrInvalid) {
		t.Errorf("a 3.6 GB page: %v, want ErrInvalid", err)
	}
	w.Close()
}

// TestPageBuffersNotChunkSized: a finished file's multi-megabyte chunk
// buffers are recycled for chunks only, never as a new file's page
// buffers (memory the budget would not see).
func TestPageBuffersNotChunkSized(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	for i := range 1 << 20 {
		b.Append(int64(i) * 2654435761)
	}
	col := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(col.Len()))
	col.Release()
	defer rec.Release()
	writeFile(t, schema, Options{RowGroupRows: 1 << 20, Compression: CompressionNone}, rec)
	w, err := NewWriter(io.Discard, schema, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, l := range w.leaves {
		if c := max(cap(l.plain), cap(l.body), cap(l.enc)); c > 1<<20 {
			t.Errorf("a new file's page buffer holds %d bytes", c)
		}
	}
	if b := bufpool.Chunks.Get(); cap(b) < 4<<20 {
		t.Logf("the chunk buffer was not recycled (capacity %d): sync.Pool may drop it", cap(b))
	}
}
