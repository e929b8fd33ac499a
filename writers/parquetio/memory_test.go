package parquetio

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"

	"github.com/quiver-ingest/quiver/bench/workload"
)

// TestZstdCompressesStringsWithoutMatches: random strings over a small
// alphabet have no matches for zstd to find, only a skewed byte
// distribution; the codec must still entropy-code them (the fastest level
// alone stores them raw), and its frames decode with parquet-go's codec.
func TestZstdCompressesStringsWithoutMatches(t *testing.T) {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	rng := rand.New(rand.NewPCG(1, 2))
	page := make([]byte, 256<<10)
	for i := range page {
		page[i] = alphabet[rng.IntN(len(alphabet))]
	}
	out, err := fastZstd.Encode(nil, page)
	if err != nil {
		t.Fatal(err)
	}
	// 62 symbols: log2(62)/8 ≈ 0.744 of the input at best.
	if ratio := float64(len(out)) / float64(len(page)); ratio > 0.8 {
		t.Errorf("compressed to %.3f of the input, want <= 0.8 (literals not entropy-coded)", ratio)
	}
	back, err := parquet.Zstd.Decode(nil, out)
	if err != nil || !bytes.Equal(back, page) {
		t.Fatalf("decode: %v, equal %v", err, bytes.Equal(back, page))
	}
}

// TestValueBuffersBounded: the scratch a writer keeps between calls
// (memory outside the server's budget) stays at pieceRows entries and
// page buffers at maxPageBuffer bytes
// whatever the size of the batches written or of their lists.
func TestValueBuffersBounded(t *testing.T) {
	recs, err := workload.Generate(memory.DefaultAllocator, workload.DefaultSeed, 100_000, 50_000)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseAll(recs)
	checkScratchBounded(t, recs)

	// One row whose list has 100,000 elements, in a nullable struct.
	item := arrow.StructOf(arrow.Field{Name: "xs", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true})
	schema := arrow.NewSchema([]arrow.Field{{Name: "s", Type: item, Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for range 3 {
		st := b.Field(0).(*array.StructBuilder)
		st.Append(true)
		lb := st.FieldBuilder(0).(*array.ListBuilder)
		lb.Append(true)
		for i := range 100_000 {
			lb.ValueBuilder().(*array.Int64Builder).Append(int64(i))
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	checkScratchBounded(t, []arrow.RecordBatch{rec, rec})
}

func checkScratchBounded(t *testing.T, recs []arrow.RecordBatch) {
	t.Helper()
	w, err := NewWriter(io.Discard, recs[0].Schema(), Options{Compression: CompressionZstd})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	var walk func(n *node)
	walk = func(n *node) {
		if cap(n.slots) > pieceRows || cap(n.elems) > pieceRows {
			t.Errorf("node %v keeps %d slots and %d elements, want <= %d", n.path, cap(n.slots), cap(n.elems), pieceRows)
		}
		if l := n.leaf; l != nil {
			v := &l.vals
			if c := max(cap(l.sel), cap(v.ownI32), cap(v.ownI64), cap(v.ownF64), cap(v.ownStart), cap(v.dictionary)); c > pieceRows {
				t.Errorf("leaf %v keeps %d values, want <= %d", l.path, c, pieceRows)
			}
			if c := max(cap(l.plain), cap(l.body), cap(l.enc)); c > maxPageBuffer {
				t.Errorf("leaf %v keeps a page buffer of %d bytes, want <= %d", l.path, c, maxPageBuffer)
			}
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	for _, r := range w.roots {
		walk(r)
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestZstdRawFrames: raw frames of every size around the 128 KiB block
// limit decode to their input with parquet-go's zstd; the differential
// test against pyarrow reads them with libzstd (random floats do not
// compress, so their chunks store raw frames).
func TestZstdRawFrames(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 100, 128<<10 - 1, 128 << 10, 128<<10 + 1, 256 << 10, 300_001} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(rng.UintN(256))
		}
		frame := fastZstd.EncodeRaw([]byte("prefix"), src)
		if string(frame[:6]) != "prefix" {
			t.Fatalf("%d bytes: the frame does not append to dst", n)
		}
		back, err := parquet.Zstd.Decode(nil, frame[6:])
		if err != nil || !bytes.Equal(back, src) {
			t.Fatalf("%d bytes: decode: %v, equal %v", n, err, bytes.Equal(back, src))
		}
	}
}
