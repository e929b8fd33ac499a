package parquetio

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/delta"
	"github.com/parquet-go/parquet-go/encoding/rle"
	"github.com/parquet-go/parquet-go/format"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/parquetio/internal/bufpool"
	"github.com/quiver-ingest/quiver/writers/parquetio/internal/pqfile"
)

// pageBytes is the raw size (values before compression, 4 bytes a
// dictionary index) at which a page is cut, as parquet-go's page buffer
// (256 KiB) cut them before: the files keep their page count and sizes.
const pageBytes = 256 << 10

// pageEncoding is how a page's values are encoded.
type pageEncoding uint8

const (
	encPlain pageEncoding = iota
	encDictionary
	encDelta
)

// columnState encodes one leaf's values into pages of the current row
// group's chunk: levels and values of the page being filled are kept
// raw, then encoded, compressed and handed to the chunk when the page is
// full or the row group ends.
type columnState struct {
	opts  Options
	chunk *pqfile.Chunk

	decided  bool         // the encoding was chosen, at the file's first piece
	first    pageEncoding // the chosen encoding, each row group starts with it
	encoding pageEncoding // of the page being filled
	dict     dictionary
	dictUsed bool // the chunk has dictionary-encoded pages

	// The page being filled.
	reps, defs []uint8
	pieceStart int     // where the current piece's levels start
	plain      []byte  // PLAIN values (booleans: bits, one byte each)
	indexes    []int32 // dictionary indexes
	ints32     []int32 // DELTA_BINARY_PACKED values
	ints64     []int64
	levels     int
	nulls      int64
	rows       int64
	bounds     minMax

	sel                 []int32 // positions of a piece's values
	body, enc, lo, hi   []byte  // scratch of flushPage
	deltaEnc            delta.BinaryPackedEncoding
	dictEnc             rle.DictionaryEncoding
	repLevels, defLevel rle.Encoding
}

// open prepares the leaf for a file; path is its path in the Parquet
// schema.
func (l *leaf) open(path []string, codec pqfile.Codec, opts Options) {
	l.opts = opts
	l.chunk = pqfile.NewChunk(l.pqColumn(path), codec)
	l.plain, l.body, l.enc = bufpool.Pages.Get(), bufpool.Pages.Get(), bufpool.Pages.Get()
	l.repLevels.BitWidth = bits.Len8(l.maxRep)
	l.defLevel.BitWidth = bits.Len8(l.maxDef)
	l.dict.kind = l.kind
}

// decide chooses the leaf's encoding from its first piece of values.
func (l *leaf) decide() {
	l.decided = true
	switch {
	case !l.opts.NoDictionary && l.wantsDictionary():
		l.first = encDictionary
	case l.opts.DeltaIntegers && (l.kind == parquet.Int32 || l.kind == parquet.Int64):
		l.first = encDelta
	default:
		l.first = encPlain
	}
	l.encoding = l.first
}

// writeFlat adds rows [lo, hi) of arr, a top-level column, cutting pages
// as they fill. Byte arrays are cut within the range, so a page holds
// about pageBytes even when values are large.
func (l *leaf) writeFlat(arr arrow.Array, lo, hi int) error {
	l.pieceNulls = 0
	for lo < hi {
		end := l.pageRun(arr, lo, hi)
		if err := l.addRange(arr, lo, end); err != nil {
			return err
		}
		if err := l.flushIfFull(); err != nil {
			return err
		}
		lo = end
	}
	return nil
}

// pageRun returns the end of the rows from lo that fit the page's room:
// all of them, except for PLAIN byte arrays (at least one row).
func (l *leaf) pageRun(arr arrow.Array, lo, hi int) int {
	if l.encoding == encDictionary {
		return hi
	}
	room := int64(pageBytes - l.pageSize())
	switch a := arr.(type) {
	case *array.String:
		return runEnd(a.ValueOffsets(), lo, hi, room)
	case *array.Binary:
		return runEnd(a.ValueOffsets(), lo, hi, room)
	case *array.LargeString:
		return runEnd(a.ValueOffsets(), lo, hi, room)
	case *array.LargeBinary:
		return runEnd(a.ValueOffsets(), lo, hi, room)
	case *array.Dictionary:
		// Written PLAIN, a few large dictionary values repeated by
		// small indexes expand without bound: cut by their sizes too.
		if values, ok := a.Dictionary().(array.BinaryLike); ok {
			return dictionaryRunEnd(a, values, lo, hi, room)
		}
	}
	return hi
}

// dictionaryRunEnd is runEnd for a dictionary array of byte arrays.
func dictionaryRunEnd(a *array.Dictionary, values array.BinaryLike, lo, hi int, room int64) int {
	size := int64(0)
	for i := lo; i < hi; i++ {
		if a.IsValid(i) {
			size += int64(values.ValueLen(a.GetValueIndex(i))) + 4
		}
		if size > room && i > lo {
			return i
		}
	}
	return hi
}

// runEnd returns the end of the longest run of values from lo, at least
// one, whose PLAIN encoding (4-byte length and bytes) fits in room.
func runEnd[T int32 | int64](offs []T, lo, hi int, room int64) int {
	base := int64(offs[lo])
	n := sort.Search(hi-lo, func(k int) bool {
		return int64(offs[lo+k+1])-base+4*int64(k+1) > room
	})
	return lo + max(n, 1)
}

// addRange adds rows [lo, hi) of a top-level column.
func (l *leaf) addRange(arr arrow.Array, lo, hi int) error {
	var sel []int32
	n := hi - lo
	if arr.NullN() > 0 {
		sel = validPositions(l.sel[:0], arr, lo, hi)
		l.sel = sel
		if sel == nil {
			sel = noPositions // all null: an empty selection, not the range
		}
	}
	if l.maxDef > 0 {
		start := len(l.defs)
		l.defs = slices.Grow(l.defs, n)[:start+n]
		defs := l.defs[start:]
		if sel == nil {
			for i := range defs {
				defs[i] = l.maxDef
			}
		} else {
			clear(defs)
			for _, p := range sel {
				defs[int(p)-lo] = l.maxDef
			}
		}
	}
	nulls := 0
	if sel != nil {
		nulls = n - len(sel)
	}
	l.pieceNulls += nulls
	l.levels += n
	l.nulls += int64(nulls)
	l.rows += int64(n)
	if err := l.vals.gather(l, arr, lo, hi, sel); err != nil {
		return err
	}
	return l.addValues()
}

// noPositions selects no value (a nil selection means a whole range).
var noPositions = []int32{}

// validPositions appends the positions of [lo, hi) that are not null,
// walking the validity bitmap 64 bits at a time.
func validPositions(dst []int32, arr arrow.Array, lo, hi int) []int32 {
	bitmap, off := arr.NullBitmapBytes(), arr.Data().Offset()
	for i := lo; i < hi; {
		j := off + i
		if j&7 == 0 && i+64 <= hi {
			for w := binary.LittleEndian.Uint64(bitmap[j>>3:]); w != 0; w &= w - 1 {
				dst = append(dst, int32(i+bits.TrailingZeros64(w)))
			}
			i += 64
			continue
		}
		if bitmap[j>>3]>>(j&7)&1 != 0 {
			dst = append(dst, int32(i))
		}
		i++
	}
	return dst
}

// addSlots adds the positions of a nested leaf (shred.go): their levels,
// and the values of those present in arr.
func (l *leaf) addSlots(arr arrow.Array, slots []slot) error {
	l.pieceNulls = -1
	l.pieceStart = len(l.defs)
	if l.maxRep > 0 {
		l.pieceStart = len(l.reps)
	}
	sel := l.sel[:0]
	for _, s := range slots {
		if l.maxRep > 0 {
			l.reps = append(l.reps, s.rep)
			if s.rep == 0 {
				l.rows++
			}
		}
		if l.maxDef > 0 {
			l.defs = append(l.defs, s.def)
		}
		if s.idx >= 0 {
			sel = append(sel, int32(s.idx))
		}
	}
	if l.maxRep == 0 {
		l.rows += int64(len(slots))
	}
	l.sel = sel
	if sel == nil {
		sel = noPositions
	}
	l.levels += len(slots)
	l.nulls += int64(len(slots) - len(sel))
	if err := l.vals.gather(l, arr, 0, 0, sel); err != nil {
		return err
	}
	return l.addValues()
}

// pieceLevels returns the levels of the piece addSlots added last.
func (l *leaf) pieceLevels() (reps, defs []uint8) {
	if l.maxRep > 0 {
		reps = l.reps[l.pieceStart:]
	}
	if l.maxDef > 0 {
		defs = l.defs[l.pieceStart:]
	}
	return reps, defs
}

// addValues encodes the piece's values (l.vals) into the page. A nested
// leaf's page of byte arrays that would outgrow maxPageBytes (what the
// package's own reader accepts) is refused before it is built: its pieces
// are not cut (pageRun cuts flat ones), and a batch of small lists of
// dictionary indexes can stand for gigabytes of values.
func (l *leaf) addValues() error {
	if !l.decided {
		l.decide()
	}
	v := &l.vals
	if l.pieceNulls < 0 && l.encoding == encPlain && l.kind == parquet.ByteArray {
		if n := v.plainBytes(); len(l.plain)+n > maxPageBytes {
			return l.pageTooLarge(len(l.plain) + n)
		}
	}
	v.observe(l.kind, &l.bounds)
	switch l.encoding {
	case encDictionary:
		l.indexes = l.dict.add(v, l.indexes)
		l.dictUsed = true
	case encDelta:
		l.ints32 = append(l.ints32, v.i32...)
		l.ints64 = append(l.ints64, v.i64...)
	default:
		// A flat piece is cut to the page's room, so only one value
		// larger than a page gets here.
		if l.plain = appendPlain(l.plain, l.kind, v); len(l.plain) > maxPageBytes {
			return l.pageTooLarge(len(l.plain))
		}
	}
	return nil
}

// pageTooLarge is the error for a page of n bytes, past maxPageBytes.
func (l *leaf) pageTooLarge(n int) error {
	return writers.Errorf(writers.ErrInvalid, "parquetio: column %q: a page of %d bytes, more than the %d a Parquet page may hold here: send smaller values, or fewer list elements per batch", strings.Join(l.path, "."), n, maxPageBytes)
}

// plainBytes is the size of the byte arrays PLAIN encoded.
func (v *values) plainBytes() int {
	n := 4 * v.n
	for i := range v.n {
		n += int(v.end[i] - v.start[i])
	}
	return n
}

// appendPlain appends v PLAIN encoded; booleans one byte each (packed when
// the page is flushed).
func appendPlain(dst []byte, kind parquet.Kind, v *values) []byte {
	switch kind {
	case parquet.Boolean:
		return append(dst, v.bits...)
	case parquet.Int32:
		return append(dst, asBytes(v.i32)...)
	case parquet.Int64:
		return append(dst, asBytes(v.i64)...)
	case parquet.Float:
		return append(dst, asBytes(v.f32)...)
	case parquet.Double:
		return append(dst, asBytes(v.f64)...)
	case parquet.ByteArray:
		for i := range v.n {
			b := v.bytesAt(i)
			dst = binary.LittleEndian.AppendUint32(dst, uint32(len(b)))
			dst = append(dst, b...)
		}
		return dst
	}
	for i := range v.n { // FIXED_LEN_BYTE_ARRAY
		dst = append(dst, v.bytesAt(i)...)
	}
	return dst
}

// asBytes views fixed-width numbers as their little-endian bytes (the
// machine's order: Go's supported little-endian targets, as Arrow's).
func asBytes[T int32 | int64 | float32 | float64](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// pageSize estimates the raw size of the page being filled.
func (l *leaf) pageSize() int {
	return len(l.plain) + 4*len(l.indexes) + 4*len(l.ints32) + 8*len(l.ints64) + len(l.defs)/4 + len(l.reps)/4
}

// flushIfFull ends the page when it holds pageBytes, or when the
// dictionary outgrew its limit (the rest of the row group is PLAIN).
func (l *leaf) flushIfFull() error {
	overflow := l.encoding == encDictionary && len(l.dict.plain) > dictionaryMaxBytes
	if l.pageSize() < pageBytes && !overflow {
		return nil
	}
	if err := l.flushPage(); err != nil {
		return err
	}
	if overflow {
		l.encoding = encPlain
	}
	return nil
}

// flushPage encodes the page being filled and adds it to the chunk.
func (l *leaf) flushPage() error {
	if l.levels == 0 {
		return nil
	}
	body := l.body[:0]
	var err error
	if l.maxRep > 0 {
		if body, err = l.appendLevels(body, &l.repLevels, l.reps); err != nil {
			return err
		}
	}
	if l.maxDef > 0 {
		if body, err = l.appendLevels(body, &l.defLevel, l.defs); err != nil {
			return err
		}
	}
	encoding := format.Plain
	switch l.encoding {
	case encDictionary:
		encoding = format.RLEDictionary
		if l.enc, err = l.dictEnc.EncodeInt32(l.enc, l.indexes); err != nil {
			return err
		}
		body = append(body, l.enc...)
	case encDelta:
		encoding = format.DeltaBinaryPacked
		if l.kind == parquet.Int32 {
			l.enc, err = l.deltaEnc.EncodeInt32(l.enc, l.ints32)
		} else {
			l.enc, err = l.deltaEnc.EncodeInt64(l.enc, l.ints64)
		}
		if err != nil {
			return err
		}
		body = append(body, l.enc...)
	default:
		if l.kind == parquet.Boolean {
			body = packBits(body, l.plain)
		} else {
			body = append(body, l.plain...)
		}
	}
	l.body = body
	page := pqfile.DataPage{
		Body:      body,
		Encoding:  encoding,
		NumValues: int32(l.levels),
		NumNulls:  l.nulls,
		NumRows:   l.rows,
	}
	l.lo, l.hi, page.Bounded = l.bounds.plainBounds(l.kind, l.lo, l.hi)
	page.Min, page.Max = l.lo, l.hi
	if err := l.chunk.AddPage(page); err != nil {
		return err
	}
	l.stats.merge(&l.bounds, l.kind)
	l.resetPage()
	return nil
}

func (l *leaf) appendLevels(body []byte, e *rle.Encoding, levels []uint8) ([]byte, error) {
	enc, err := e.EncodeLevels(l.enc, levels)
	if err != nil {
		return body, err
	}
	l.enc = enc
	body = binary.LittleEndian.AppendUint32(body, uint32(len(enc)))
	return append(body, enc...), nil
}

// packBits packs booleans (one byte each) into bits, least significant
// first: PLAIN booleans.
func packBits(dst, bools []byte) []byte {
	for i := 0; i < len(bools); i += 8 {
		var b byte
		for j, x := range bools[i:min(i+8, len(bools))] {
			b |= x << j
		}
		dst = append(dst, b)
	}
	return dst
}

// maxPageBuffer bounds the page buffers a leaf keeps for its next page:
// a page of long lists (cut only between pieces) or of one huge value
// does not pin its memory for the rest of the file.
const maxPageBuffer = 2 * pageBytes

func (l *leaf) resetPage() {
	l.reps, l.defs = keepBuffer(l.reps), keepBuffer(l.defs)
	l.plain, l.body, l.enc = keepBuffer(l.plain), keepBuffer(l.body), keepBuffer(l.enc)
	l.indexes, l.ints32, l.ints64 = keepBuffer(l.indexes), keepBuffer(l.ints32), keepBuffer(l.ints64)
	l.levels, l.nulls, l.rows = 0, 0, 0
	l.pieceStart = 0
	l.bounds.reset()
}

// keepBuffer empties b, dropping it when it outgrew maxPageBuffer bytes.
func keepBuffer[T any](b []T) []T {
	var zero T
	if cap(b)*int(unsafe.Sizeof(zero)) > maxPageBuffer {
		return nil
	}
	return b[:0]
}

// finishChunk flushes the last page and hands the dictionary to the chunk
// before the row group is written.
func (l *leaf) finishChunk() error {
	if err := l.flushPage(); err != nil {
		return err
	}
	if l.dictUsed {
		l.chunk.SetDictionary(l.dict.plain, int(l.dict.n))
	}
	return nil
}

// startChunk resets the leaf for the next row group, once the previous
// one is written.
func (l *leaf) startChunk() {
	l.dict.reset()
	l.dictUsed = false
	l.encoding = l.first
}

// release recycles the leaf's buffers once its file is finished or
// abandoned.
func (l *leaf) release() {
	for _, b := range [][]byte{l.plain, l.body, l.enc} {
		bufpool.Pages.Put(b)
	}
	l.plain, l.body, l.enc = nil, nil, nil
	l.chunk.Release()
}

// buffered is the memory the leaf holds: compressed pages of the row
// group, the raw page being filled and the dictionary.
func (l *leaf) buffered() int64 {
	if l.chunk == nil {
		return 0
	}
	return l.chunk.Buffered() + int64(l.pageSize()) + int64(len(l.dict.plain))
}
