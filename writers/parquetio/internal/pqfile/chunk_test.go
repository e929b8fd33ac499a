package pqfile

import (
	"bytes"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// TestIndexBounds: byte-array bounds longer than 16 bytes are cut in the
// column index, a maximum rounded up past its prefix so it still bounds
// the page, and one that cannot be rounded up (all 0xFF) kept whole.
func TestIndexBounds(t *testing.T) {
	c := NewChunk(&Column{ByteArray: true, Compare: bytes.Compare}, &parquet.Uncompressed)
	long := []byte("abcdefghijklmnopqrstuvwxyz")
	if got := c.indexBound(long, false); string(got) != "abcdefghijklmnop" {
		t.Errorf("min %q, want the 16-byte prefix", got)
	}
	if got := c.indexBound(long, true); string(got) != "abcdefghijklmnoq" {
		t.Errorf("max %q, want the prefix with its last byte incremented", got)
	}
	carry := append(bytes.Repeat([]byte{'a'}, 14), 0xFF, 0xFF, 'z')
	if got := c.indexBound(carry, true); !bytes.Equal(got, append(bytes.Repeat([]byte{'a'}, 13), 'b')) {
		t.Errorf("max %q, want the carry to drop the trailing 0xFF bytes", got)
	}
	ff := bytes.Repeat([]byte{0xFF}, 20)
	if got := c.indexBound(ff, true); !bytes.Equal(got, ff) {
		t.Errorf("max of all 0xFF cut to %d bytes, want it whole", len(got))
	}
	if got := c.indexBound([]byte("short"), true); string(got) != "short" {
		t.Errorf("short max changed to %q", got)
	}
	for _, b := range [][]byte{long, carry, ff} {
		if hi := c.indexBound(b, true); bytes.Compare(hi, b) < 0 {
			t.Errorf("index max %q below the value %q", hi, b)
		}
		if lo := c.indexBound(b, false); bytes.Compare(lo, b) > 0 {
			t.Errorf("index min %q above the value %q", lo, b)
		}
	}
}

// TestBoundaryOrder: ascending and descending pages are recognised, null
// pages skipped, anything else unordered; a page of values without bounds
// (only NaN) leaves the chunk without a column index.
func TestBoundaryOrder(t *testing.T) {
	page := func(lo, hi string, nulls int64) DataPage {
		return DataPage{Body: []byte{1}, NumValues: 2, NumNulls: nulls, NumRows: 2, Min: []byte(lo), Max: []byte(hi), Bounded: nulls < 2}
	}
	for _, tc := range []struct {
		pages []DataPage
		want  format.BoundaryOrder
	}{
		{[]DataPage{page("a", "b", 0), page("", "", 2), page("b", "c", 0)}, format.Ascending},
		{[]DataPage{page("c", "d", 0), page("a", "b", 1)}, format.Descending},
		{[]DataPage{page("a", "d", 0), page("b", "c", 0)}, format.Unordered},
		{[]DataPage{page("a", "a", 0)}, format.Ascending},
	} {
		c := NewChunk(&Column{Path: []string{"x"}, Type: format.ByteArray, ByteArray: true, Compare: bytes.Compare}, &parquet.Uncompressed)
		for _, p := range tc.pages {
			if err := c.AddPage(p); err != nil {
				t.Fatal(err)
			}
		}
		var out bytes.Buffer
		_, index, offsets, err := c.write(&countingWriter{w: &out})
		if err != nil {
			t.Fatal(err)
		}
		if index == nil || index.BoundaryOrder != tc.want {
			t.Errorf("pages %v: index %+v, want order %v", tc.pages, index, tc.want)
		}
		if len(offsets.PageLocations) != len(tc.pages) {
			t.Errorf("%d page locations, want %d", len(offsets.PageLocations), len(tc.pages))
		}
	}
	c := NewChunk(&Column{Path: []string{"f"}, Type: format.Double, Compare: bytes.Compare}, &parquet.Uncompressed)
	if err := c.AddPage(DataPage{Body: []byte{1}, NumValues: 1, NumRows: 1}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, index, _, err := c.write(&countingWriter{w: &out}); err != nil || index != nil {
		t.Errorf("a page of values without bounds: index %+v, err %v; want no column index", index, err)
	}
}

// TestEncodingsAndStats: the chunk lists its encodings (the levels' RLE
// included) and counts pages by encoding, the dictionary page first; the
// footer bounds are the widest of the pages' and left out past 4 KiB.
func TestEncodingsAndStats(t *testing.T) {
	c := NewChunk(&Column{Path: []string{"s"}, Type: format.ByteArray, ByteArray: true, Compare: bytes.Compare, HasLevels: true}, &parquet.Snappy)
	c.SetDictionary([]byte{1, 0, 0, 0, 'a'}, 1)
	for _, p := range []DataPage{
		{Body: []byte("xyz"), Encoding: format.RLEDictionary, NumValues: 3, NumNulls: 1, NumRows: 3, Min: []byte("b"), Max: []byte("m"), Bounded: true},
		{Body: []byte("xyz"), Encoding: format.Plain, NumValues: 3, NumRows: 3, Min: []byte("a"), Max: []byte("k"), Bounded: true},
	} {
		if err := c.AddPage(p); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	cc, _, _, err := c.write(&countingWriter{w: &out, n: 4}) // after "PAR1"
	if err != nil {
		t.Fatal(err)
	}
	m := cc.MetaData
	if want := []format.Encoding{format.Plain, format.RLE, format.RLEDictionary}; !slices.Equal(m.Encoding, want) {
		t.Errorf("encodings %v, want %v", m.Encoding, want)
	}
	if len(m.EncodingStats) != 3 || m.EncodingStats[0].PageType != format.DictionaryPage {
		t.Errorf("encoding stats %+v, want the dictionary page first, then one per data page encoding", m.EncodingStats)
	}
	if string(m.Statistics.MinValue) != "a" || string(m.Statistics.MaxValue) != "m" || m.Statistics.NullCount != 1 || m.NumValues != 6 {
		t.Errorf("statistics %+v, values %d; want a..m, 1 null, 6 values", m.Statistics, m.NumValues)
	}
	if m.DictionaryPageOffset != 4 || cc.FileOffset != 4 || m.DataPageOffset <= m.DictionaryPageOffset || int64(out.Len()) != m.TotalCompressedSize {
		t.Errorf("offsets dict %d data %d, %d bytes written for a chunk of %d", m.DictionaryPageOffset, m.DataPageOffset, out.Len(), m.TotalCompressedSize)
	}

	c = NewChunk(&Column{Path: []string{"e"}, Type: format.ByteArray, ByteArray: true, Compare: bytes.Compare}, &parquet.Uncompressed)
	if err := c.AddPage(DataPage{Body: []byte{0}, NumValues: 1, NumRows: 1, Min: nil, Max: []byte{}, Bounded: true}); err != nil {
		t.Fatal(err)
	}
	if cc, _, _, err = c.write(&countingWriter{w: &out}); err != nil || cc.MetaData.Statistics.MinValue == nil || cc.MetaData.Statistics.MaxValue == nil {
		t.Errorf("empty-string bounds: statistics %q..%q, err %v; want both present and empty", cc.MetaData.Statistics.MinValue, cc.MetaData.Statistics.MaxValue, err)
	}

	c = NewChunk(&Column{Path: []string{"b"}, Type: format.ByteArray, ByteArray: true, Compare: bytes.Compare}, &parquet.Uncompressed)
	big := bytes.Repeat([]byte{'q'}, maxFooterStatBytes+1)
	if err := c.AddPage(DataPage{Body: []byte{0}, NumValues: 1, NumRows: 1, Min: []byte("a"), Max: big, Bounded: true}); err != nil {
		t.Fatal(err)
	}
	if cc, _, _, err = c.write(&countingWriter{w: &out}); err != nil || cc.MetaData.Statistics.MinValue != nil || cc.MetaData.Statistics.MaxValue != nil {
		t.Errorf("a %d-byte bound: statistics %q..%q, err %v; want both left out", len(big), cc.MetaData.Statistics.MinValue, cc.MetaData.Statistics.MaxValue, err)
	}
}

// countingCodec compresses nothing (its output is its input), counts its
// calls and frames raw pages with a one-byte marker.
type countingCodec struct{ encodes, raws int }

func (c *countingCodec) Encode(dst, src []byte) ([]byte, error) {
	c.encodes++
	return append(dst[:0], src...), nil
}
func (c *countingCodec) EncodeRaw(dst, src []byte) []byte {
	c.raws++
	return append(append(dst, 'R'), src...)
}
func (*countingCodec) CompressionCodec() format.CompressionCodec { return format.Zstd }

// TestIncompressiblePagesFramedRaw: once a page does not shrink, the
// chunk's next rawPages pages skip the codec; then it tries again. The
// dictionary page is always compressed.
func TestIncompressiblePagesFramedRaw(t *testing.T) {
	codec := &countingCodec{}
	c := NewChunk(&Column{Path: []string{"f"}, Type: format.Double, Compare: bytes.Compare}, codec)
	c.SetDictionary([]byte("dictionary"), 1)
	for range 1 + rawPages + 1 {
		if err := c.AddPage(DataPage{Body: []byte("random floats"), NumValues: 1, NumRows: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if codec.encodes != 2 || codec.raws != rawPages {
		t.Errorf("%d pages compressed and %d framed raw, want 2 and %d", codec.encodes, codec.raws, rawPages)
	}
	var out bytes.Buffer
	if _, _, _, err := c.write(&countingWriter{w: &out, n: 4}); err != nil || codec.encodes != 3 {
		t.Errorf("dictionary page: err %v, %d compressions, want 3", err, codec.encodes)
	}
}
