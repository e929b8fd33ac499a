// Package pqfile assembles Parquet files from pages the caller encoded:
// page headers with CRCs, compressed column chunks, the page indexes
// (ColumnIndex and OffsetIndex) and the footer. It knows nothing of Arrow
// and does no value encoding: writers/parquetio turns Arrow buffers into
// page bodies, this package frames them. The Thrift structures are
// parquet-go's format package, serialized with its compact protocol.
package pqfile

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/quiver-ingest/quiver/writers/parquetio/internal/bufpool"
)

// Codec compresses page bodies; parquet-go's compress.Codec is one.
// Encode may reuse dst's memory and must be safe for concurrent use.
type Codec interface {
	Encode(dst, src []byte) ([]byte, error)
	CompressionCodec() format.CompressionCodec
}

// RawFramer is a Codec that can also frame data it does not compress
// (zstd's raw blocks): a chunk whose pages stop shrinking stores the next
// ones so, skipping the codec's work (see Chunk.compress).
type RawFramer interface {
	EncodeRaw(dst, src []byte) []byte
}

// Incompressible pages: a page the codec shrinks by less than
// 1/rawThreshold is not worth its CPU, and the chunk's next rawPages
// pages are framed raw before the codec is tried again. Random floats,
// hashes and small dictionary indexes do not compress; the codec (zstd's
// entropy coding of literals) still costs its full price on them.
const (
	rawThreshold = 32 // less than ~3% saved
	rawPages     = 15
)

// Column describes one leaf column of the file.
type Column struct {
	Path []string
	Type format.Type
	// Compare orders two PLAIN-encoded bounds (byte arrays without their
	// length prefix) as the column's sort order does.
	Compare func(a, b []byte) int
	// ByteArray says bounds are variable-length and get truncated in the
	// column index.
	ByteArray bool
	// HasLevels says the pages carry definition levels (an optional
	// column or one below an optional or repeated parent).
	HasLevels bool
}

// DataPage is one version 1 data page before compression.
type DataPage struct {
	// Body is the uncompressed page: repetition and definition levels
	// (each behind its 4-byte length, when the column has them), then the
	// values.
	Body      []byte
	Encoding  format.Encoding
	NumValues int32 // levels: values, nulls and empty lists
	NumNulls  int64 // levels below the leaf's maximum definition level
	NumRows   int64
	// Min and Max are PLAIN-encoded bounds of the page's non-null values
	// (byte arrays without the length prefix; NaN left out); Bounded is
	// false when there are none (only nulls or NaN).
	Min, Max []byte
	Bounded  bool
}

// indexTruncate is the length bounds of byte-array columns are cut to in
// the column index, as parquet-go and parquet-java do.
const indexTruncate = 16

// maxFooterStatBytes bounds a column chunk's min or max value in the
// footer, as parquet-mr does (it leaves out statistics whose values exceed
// 4 KiB): whole values of a column of large binary values would make a
// footer of megabytes that every reader loads. A chunk whose min or max is
// longer keeps its null count and loses both bounds; cutting them instead
// would leave readers that trust footer bounds as exact (aggregate
// push-down) with wrong answers.
const maxFooterStatBytes = 4096

// Chunk collects the pages of one column of the row group being written.
// Pages are compressed as they are added and kept in memory until the row
// group is written (File.WriteRowGroup), because the dictionary page,
// known only at the end, must come first. A Chunk is reused from row group
// to row group.
type Chunk struct {
	col   *Column
	codec Codec

	dict      []byte // PLAIN-encoded dictionary values, compressed at the end
	dictCount int32
	hasDict   bool

	pages   []byte // headers and compressed bodies of the data pages
	scratch []byte // a compressed body
	raw     int    // data pages still to frame raw (RawFramer)

	meta      format.ColumnMetaData
	locations []format.PageLocation
	index     format.ColumnIndex
	noIndex   bool // a page has values but no bounds (only NaN)
	rows      int64
	min, max  []byte
	bounded   bool
}

// NewChunk returns an empty chunk of col, compressed with codec.
func NewChunk(col *Column, codec Codec) *Chunk {
	return &Chunk{col: col, codec: codec}
}

// AddPage compresses p and appends it. p.Body may be reused once AddPage
// returns.
func (c *Chunk) AddPage(p DataPage) error {
	if len(p.Body) > math.MaxInt32 {
		return fmt.Errorf("pqfile: column %v: a page of %d bytes is more than a Parquet page holds", c.col.Path, len(p.Body))
	}
	body, err := c.compressPage(p.Body)
	if err != nil {
		return err
	}
	header := format.PageHeader{
		Type:                 format.DataPage,
		UncompressedPageSize: int32(len(p.Body)),
		CompressedPageSize:   int32(len(body)),
		CRC:                  int32(crc32.ChecksumIEEE(body)),
	}
	header.DataPageHeader.Set(format.DataPageHeader{
		NumValues:               p.NumValues,
		Encoding:                p.Encoding,
		DefinitionLevelEncoding: format.RLE,
		RepetitionLevelEncoding: format.RLE,
		// Bounds live in the column index; the null count costs nothing.
		Statistics: format.Statistics{NullCount: p.NumNulls},
	})
	if c.pages == nil {
		c.pages = bufpool.Chunks.Get()
	}
	start := int64(len(c.pages))
	if c.pages, err = appendHeader(c.pages, &header); err != nil {
		return err
	}
	headerLen := int64(len(c.pages)) - start
	c.pages = append(c.pages, body...)

	c.locations = append(c.locations, format.PageLocation{
		Offset:             start, // made absolute by WriteRowGroup
		CompressedPageSize: int32(int64(len(c.pages)) - start),
		FirstRowIndex:      c.rows,
	})
	c.rows += p.NumRows
	c.meta.NumValues += int64(p.NumValues)
	c.meta.TotalUncompressedSize += headerLen + int64(len(p.Body))
	c.meta.TotalCompressedSize += headerLen + int64(len(body))
	c.meta.Statistics.NullCount += p.NumNulls
	c.addEncodingStats(format.DataPage, p.Encoding)

	null := p.NumNulls == int64(p.NumValues)
	c.index.NullPages = append(c.index.NullPages, null)
	c.index.NullCounts = append(c.index.NullCounts, p.NumNulls)
	lo, hi := []byte{}, []byte{}
	switch {
	case p.Bounded:
		lo, hi = c.indexBound(p.Min, false), c.indexBound(p.Max, true)
		c.addBounds(p.Min, p.Max)
	case !null:
		c.noIndex = true
	}
	c.index.MinValues = append(c.index.MinValues, lo)
	c.index.MaxValues = append(c.index.MaxValues, hi)
	return nil
}

// SetDictionary gives the chunk its dictionary: count values, PLAIN
// encoded in values (borrowed until WriteRowGroup).
func (c *Chunk) SetDictionary(values []byte, count int) {
	c.dict, c.dictCount, c.hasDict = values, int32(count), true
}

// Release recycles the chunk's buffers (bufpool) once its file is
// finished or abandoned; the chunk must not be used again.
func (c *Chunk) Release() {
	bufpool.Chunks.Put(c.pages)
	bufpool.Chunks.Put(c.scratch)
	c.pages, c.scratch = nil, nil
}

// Buffered is the memory the chunk holds: the compressed pages.
func (c *Chunk) Buffered() int64 { return int64(len(c.pages)) }

// compressPage compresses a data page, or frames it raw when the
// column's recent pages did not compress (RawFramer).
func (c *Chunk) compressPage(src []byte) ([]byte, error) {
	rf, ok := c.codec.(RawFramer)
	if ok && c.raw > 0 {
		c.raw--
		c.scratch = rf.EncodeRaw(c.scratch[:0], src)
		return c.scratch, nil
	}
	out, err := c.compress(src)
	if ok && err == nil && (len(src)-len(out))*rawThreshold < len(src) {
		c.raw = rawPages
	}
	return out, err
}

func (c *Chunk) compress(src []byte) ([]byte, error) {
	if c.codec.CompressionCodec() == format.Uncompressed {
		return src, nil
	}
	out, err := c.codec.Encode(c.scratch[:0], src)
	if err != nil {
		return nil, fmt.Errorf("pqfile: compress a page of column %v: %w", c.col.Path, err)
	}
	c.scratch = out
	return out, nil
}

func appendHeader(dst []byte, h *format.PageHeader) ([]byte, error) {
	b, err := thrift.Marshal(new(thrift.CompactProtocol), h)
	if err != nil {
		return dst, fmt.Errorf("pqfile: encode a page header: %w", err)
	}
	return append(dst, b...), nil
}

func (c *Chunk) addEncodingStats(t format.PageType, e format.Encoding) {
	for i := range c.meta.EncodingStats {
		if s := &c.meta.EncodingStats[i]; s.PageType == t && s.Encoding == e {
			s.Count++
			return
		}
	}
	c.meta.EncodingStats = append(c.meta.EncodingStats, format.PageEncodingStats{PageType: t, Encoding: e, Count: 1})
}

// addBounds widens the chunk's footer bounds.
func (c *Chunk) addBounds(lo, hi []byte) {
	if !c.bounded {
		c.min, c.max, c.bounded = append(c.min[:0], lo...), append(c.max[:0], hi...), true
		return
	}
	if c.col.Compare(lo, c.min) < 0 {
		c.min = append(c.min[:0], lo...)
	}
	if c.col.Compare(hi, c.max) > 0 {
		c.max = append(c.max[:0], hi...)
	}
}

// indexBound returns the column index's copy of a page bound: byte arrays
// longer than indexTruncate are cut, a maximum then rounded up (the last
// byte below 0xFF incremented) so it still bounds the page; one that
// cannot be rounded up (all 0xFF) stays whole.
func (c *Chunk) indexBound(b []byte, upper bool) []byte {
	if !c.col.ByteArray || len(b) <= indexTruncate {
		return slices.Clone(b)
	}
	if !upper {
		return slices.Clone(b[:indexTruncate])
	}
	out := slices.Clone(b[:indexTruncate])
	for i := len(out) - 1; i >= 0; i-- {
		if out[i] != 0xFF {
			out[i]++
			return out[:i+1]
		}
	}
	return slices.Clone(b)
}

// boundaryOrder says whether the non-null pages' bounds ascend or descend.
func (c *Chunk) boundaryOrder() format.BoundaryOrder {
	asc, desc := true, true
	prev := -1
	for i, null := range c.index.NullPages {
		if null {
			continue
		}
		if prev >= 0 {
			lo := c.col.Compare(c.index.MinValues[prev], c.index.MinValues[i])
			hi := c.col.Compare(c.index.MaxValues[prev], c.index.MaxValues[i])
			asc = asc && lo <= 0 && hi <= 0
			desc = desc && lo >= 0 && hi >= 0
		}
		prev = i
	}
	switch {
	case asc:
		return format.Ascending
	case desc:
		return format.Descending
	}
	return format.Unordered
}

// reset empties the chunk for the next row group, keeping its buffers.
func (c *Chunk) reset() {
	c.dict, c.dictCount, c.hasDict = nil, 0, false
	c.pages = c.pages[:0]
	c.meta = format.ColumnMetaData{}
	c.locations = nil
	c.index = format.ColumnIndex{}
	c.noIndex = false
	c.rows = 0
	c.min, c.max, c.bounded = c.min[:0], c.max[:0], false
}

// write writes the chunk at offset off of the file (dictionary page, then
// data pages) and returns its footer entry and page indexes (index is
// nil when the chunk has none).
func (c *Chunk) write(w *countingWriter) (format.ColumnChunk, *format.ColumnIndex, format.OffsetIndex, error) {
	meta := c.meta
	meta.Type = c.col.Type
	meta.PathInSchema = c.col.Path
	meta.Codec = c.codec.CompressionCodec()
	start := w.n
	if c.hasDict {
		body, err := c.compress(c.dict)
		if err != nil {
			return format.ColumnChunk{}, nil, format.OffsetIndex{}, err
		}
		h := format.PageHeader{
			Type:                 format.DictionaryPage,
			UncompressedPageSize: int32(len(c.dict)),
			CompressedPageSize:   int32(len(body)),
			CRC:                  int32(crc32.ChecksumIEEE(body)),
		}
		h.DictionaryPageHeader.Set(format.DictionaryPageHeader{NumValues: c.dictCount, Encoding: format.Plain})
		head, err := appendHeader(nil, &h)
		if err != nil {
			return format.ColumnChunk{}, nil, format.OffsetIndex{}, err
		}
		meta.DictionaryPageOffset = w.n
		if err := w.write(head, body); err != nil {
			return format.ColumnChunk{}, nil, format.OffsetIndex{}, err
		}
		meta.TotalUncompressedSize += int64(len(head) + len(c.dict))
		meta.TotalCompressedSize += int64(len(head) + len(body))
		// The dictionary page comes first, in the file and in the stats.
		meta.EncodingStats = append([]format.PageEncodingStats{{PageType: format.DictionaryPage, Encoding: format.Plain, Count: 1}}, meta.EncodingStats...)
	}
	meta.DataPageOffset = w.n
	if err := w.write(c.pages); err != nil {
		return format.ColumnChunk{}, nil, format.OffsetIndex{}, err
	}
	meta.Encoding = encodingsOf(meta.EncodingStats, c.col.HasLevels)
	if c.bounded && max(len(c.min), len(c.max)) <= maxFooterStatBytes {
		// Never nil: an empty string is a bound, a nil one none at all.
		meta.Statistics.MinValue, meta.Statistics.MaxValue = append([]byte{}, c.min...), append([]byte{}, c.max...)
	}
	offsets := format.OffsetIndex{PageLocations: slices.Clone(c.locations)}
	for i := range offsets.PageLocations {
		offsets.PageLocations[i].Offset += meta.DataPageOffset
	}
	var index *format.ColumnIndex
	if !c.noIndex {
		ci := c.index
		ci.BoundaryOrder = c.boundaryOrder()
		index = &ci
	}
	return format.ColumnChunk{FileOffset: start, MetaData: meta}, index, offsets, nil
}

// encodingsOf lists the chunk's encodings in the order parquet-go writes
// them: PLAIN, RLE (the levels), then the others by value.
func encodingsOf(stats []format.PageEncodingStats, levels bool) []format.Encoding {
	var out []format.Encoding
	for _, s := range stats {
		if !slices.Contains(out, s.Encoding) {
			out = append(out, s.Encoding)
		}
	}
	if levels && !slices.Contains(out, format.RLE) {
		out = append(out, format.RLE)
	}
	slices.Sort(out)
	return out
}

// countingWriter counts the bytes written to the file.
type countingWriter struct {
	w interface{ Write([]byte) (int, error) }
	n int64
}

func (c *countingWriter) write(parts ...[]byte) error {
	for _, p := range parts {
		n, err := c.w.Write(p)
		c.n += int64(n)
		if err != nil {
			return err
		}
	}
	return nil
}

// le32 appends n as 4 little-endian bytes.
func le32(b []byte, n int) []byte { return binary.LittleEndian.AppendUint32(b, uint32(n)) }
