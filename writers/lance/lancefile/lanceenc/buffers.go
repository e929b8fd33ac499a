package lanceenc

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// BitWriter appends bits LSB-first, Arrow style.
type BitWriter struct {
	b []byte
	n int
}

// Bytes returns the bits appended so far.
func (w *BitWriter) Bytes() []byte { return w.b }

// AppendBits appends n bits of src starting at bit off; with a nil src
// every bit is set (a column without a validity bitmap).
func (w *BitWriter) AppendBits(src []byte, off, n int) {
	if need := (w.n + n + 7) / 8; need > len(w.b) {
		w.b = append(w.b, make([]byte, need-len(w.b))...)
	}
	if src != nil && w.n%8 == 0 && off%8 == 0 {
		copy(w.b[w.n/8:], src[off/8:(off+n+7)/8])
		w.n += n
		// Clear the bits past the end that the byte copy brought along.
		if r := w.n % 8; r != 0 {
			w.b[w.n/8] &= byte(1<<r) - 1
		}
		return
	}
	for i := range n {
		if src == nil || bitutil.BitIsSet(src, off+i) {
			bitutil.SetBit(w.b, w.n)
		}
		w.n++
	}
}

// ValidityOf appends a's validity (all set when it has no bitmap).
func (w *BitWriter) ValidityOf(a arrow.Array) {
	if a.NullN() == 0 {
		w.AppendBits(nil, 0, a.Len())
		return
	}
	w.AppendBits(a.NullBitmapBytes(), a.Data().Offset(), a.Len())
}

// Nulls counts nulls and rows over chunks.
func Nulls(chunks []arrow.Array) (nulls, rows int) {
	for _, c := range chunks {
		nulls += c.NullN()
		rows += c.Len()
	}
	return nulls, rows
}

// FixedValues returns the value bytes of fixed-width chunks (bools
// bit-packed), honouring array offsets, in a new buffer.
func FixedValues(dt arrow.DataType, chunks []arrow.Array) ([]byte, uint64) {
	return fixedValues(dt, chunks, exactBuf)
}

// fixedValues is FixedValues gathering into alloc(size) (getScratch for
// values recycled with their page): never the chunks' own memory.
func fixedValues(dt arrow.DataType, chunks []arrow.Array, alloc func(int) []byte) ([]byte, uint64) {
	if dt.ID() == arrow.BOOL {
		var w BitWriter
		for _, c := range chunks {
			w.AppendBits(bufBytes(c.Data(), 1), c.Data().Offset(), c.Len())
		}
		return w.b, 1
	}
	width := dt.(arrow.FixedWidthDataType).BitWidth() / 8
	n := 0
	for _, c := range chunks {
		n += c.Len()
	}
	out := alloc(n * width)
	for _, c := range chunks {
		d := c.Data()
		off := d.Offset() * width
		out = append(out, bufBytes(d, 1)[off:off+d.Len()*width]...)
	}
	return out, uint64(width * 8)
}

// BinaryChunk returns a binary-like array's offsets (one more than rows)
// and its value bytes.
func BinaryChunk(a arrow.Array) (offsets func(i int) int64, data []byte) {
	switch a := a.(type) {
	case *array.String:
		o := a.ValueOffsets()
		return func(i int) int64 { return int64(o[i]) }, bufBytes(a.Data(), 2)
	case *array.Binary:
		o := a.ValueOffsets()
		return func(i int) int64 { return int64(o[i]) }, bufBytes(a.Data(), 2)
	case *array.LargeString:
		o := a.ValueOffsets()
		return func(i int) int64 { return o[i] }, bufBytes(a.Data(), 2)
	case *array.LargeBinary:
		o := a.ValueOffsets()
		return func(i int) int64 { return o[i] }, bufBytes(a.Data(), 2)
	}
	panic("lance: binaryChunk of " + a.DataType().String())
}

// FSLItems returns the item arrays of fixed-size-list chunks, sliced to
// the chunks' rows. The caller releases them.
func FSLItems(chunks []arrow.Array) []arrow.Array {
	items := make([]arrow.Array, len(chunks))
	for i, c := range chunks {
		l := c.(*array.FixedSizeList)
		dim := int64(l.DataType().(*arrow.FixedSizeListType).Len())
		off := int64(l.Data().Offset())
		items[i] = array.NewSlice(l.ListValues(), off*dim, (off+int64(l.Len()))*dim)
	}
	return items
}

// ReleaseAll releases every array of as.
func ReleaseAll(as []arrow.Array) {
	for _, a := range as {
		a.Release()
	}
}

// bufBytes returns buffer i of d, nil when absent (empty arrays).
func bufBytes(d arrow.ArrayData, i int) []byte {
	if b := d.Buffers()[i]; b != nil {
		return b.Bytes()
	}
	return nil
}

// Addressable is the number of dictionary entries indices of type idx
// address.
func Addressable(idx arrow.DataType) int {
	bits := idx.(arrow.FixedWidthDataType).BitWidth()
	if bits >= 32 {
		return math.MaxInt32
	}
	if arrow.IsUnsignedInteger(idx.ID()) {
		return 1 << bits
	}
	return 1 << (bits - 1)
}

// MaxPageRows bounds the rows of one page, so that a page without buffers
// (all nulls) cannot make the reader allocate without limit. LanceDB cuts
// pages at about 8 MiB, far below it.
const MaxPageRows = 1 << 26

// MaxEncodingDepth bounds the nesting of a decoded encoding tree, so that
// hostile input cannot recurse without end.
const MaxEncodingDepth = 64
