package parquetio

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/parquet-go/parquet-go"

	"github.com/quiver-ingest/quiver/writers"
)

// values are the non-null values of one piece of a leaf column in their
// Parquet physical representation, ready for the encoders and the
// statistics. Fixed-width slices alias the Arrow buffers when no
// conversion or selection is needed; byte array i is data[start[i]:end[i]].
type values struct {
	n          int
	i32        []int32
	i64        []int64
	f32        []float32
	f64        []float64
	bits       []byte // booleans, one byte (0 or 1) each
	data       []byte
	start, end []int32

	// Buffers the values own, reused from piece to piece.
	ownI32     []int32
	ownI64     []int64
	ownF32     []float32
	ownF64     []float64
	ownBits    []byte
	ownData    []byte
	ownStart   []int32
	ownEnd     []int32
	dictionary []int32 // positions in a dictionary array's values
}

// gather collects the values at positions sel of arr, a column of the
// leaf's Arrow type, or when sel is nil every position of [lo, hi) (none
// of them null). Positions are relative to the array (its offset applied).
func (v *values) gather(l *leaf, arr arrow.Array, lo, hi int, sel []int32) error {
	if d, ok := arr.(*array.Dictionary); ok {
		v.dictionary = dictionaryPositions(v.dictionary[:0], d, lo, hi, sel)
		return v.gather(l, d.Dictionary(), 0, 0, v.dictionary)
	}
	v.n = hi - lo
	if sel != nil {
		v.n = len(sel)
	}
	if v.n == 0 {
		// Nothing to read: an empty child may come without an offsets
		// buffer (ipccheck allows it), which ValueOffsets would slice.
		v.release()
		return nil
	}
	switch a := arr.(type) {
	case *array.Int32:
		v.i32 = take(&v.ownI32, a.Int32Values(), lo, hi, sel)
	case *array.Int64:
		v.i64 = take(&v.ownI64, a.Int64Values(), lo, hi, sel)
	case *array.Float32:
		v.f32 = take(&v.ownF32, a.Float32Values(), lo, hi, sel)
	case *array.Float64:
		v.f64 = take(&v.ownF64, a.Float64Values(), lo, hi, sel)
	case *array.Int8:
		v.i32 = widen(&v.ownI32, a.Int8Values(), lo, hi, sel)
	case *array.Int16:
		v.i32 = widen(&v.ownI32, a.Int16Values(), lo, hi, sel)
	case *array.Date32:
		v.i32 = widen(&v.ownI32, a.Date32Values(), lo, hi, sel)
	case *array.Timestamp:
		v.timestamps(a, lo, hi, sel)
	case *array.Boolean:
		v.booleans(a, lo, hi, sel)
	case *array.String:
		return v.byteArrays(l, a.ValueOffsets(), dataBuffer(a), lo, hi, sel)
	case *array.Binary:
		return v.byteArrays(l, a.ValueOffsets(), dataBuffer(a), lo, hi, sel)
	case *array.LargeString:
		return v.byteArrays(l, a.ValueOffsets(), dataBuffer(a), lo, hi, sel)
	case *array.LargeBinary:
		return v.byteArrays(l, a.ValueOffsets(), dataBuffer(a), lo, hi, sel)
	case *array.FixedSizeBinary:
		v.copyBytes(lo, hi, sel, func(dst []byte, i int) []byte { return append(dst, a.Value(i)...) })
	case *array.Decimal128:
		v.decimals(l, a, lo, hi, sel)
	default:
		panic("parquetio: leaf " + strings.Join(l.path, ".") + " given " + arr.DataType().String())
	}
	return nil
}

// take returns src's values at sel, or src[lo:hi] itself.
func take[T any](own *[]T, src []T, lo, hi int, sel []int32) []T {
	if sel == nil {
		return src[lo:hi]
	}
	out := slices.Grow((*own)[:0], len(sel))[:len(sel)]
	for i, j := range sel {
		out[i] = src[j]
	}
	*own = out
	return out
}

// widen converts narrow integers (and dates) to INT32.
func widen[S ~int8 | ~int16 | ~int32](own *[]int32, src []S, lo, hi int, sel []int32) []int32 {
	n := hi - lo
	if sel != nil {
		n = len(sel)
	}
	out := slices.Grow((*own)[:0], n)[:n]
	if sel == nil {
		for i, x := range src[lo:hi] {
			out[i] = int32(x)
		}
	} else {
		for i, j := range sel {
			out[i] = int32(src[j])
		}
	}
	*own = out
	return out
}

// timestamps stores microseconds: microsecond input as it is, other units
// converted (TimestampMicros).
func (v *values) timestamps(a *array.Timestamp, lo, hi int, sel []int32) {
	src := a.TimestampValues()
	micros := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(src))), len(src))
	unit := a.DataType().(*arrow.TimestampType).Unit
	if unit == arrow.Microsecond {
		v.i64 = take(&v.ownI64, micros, lo, hi, sel)
		return
	}
	out := take(&v.ownI64, micros, lo, hi, sel)
	if sel == nil { // an alias of the Arrow buffer: copy before converting
		out = append(v.ownI64[:0], out...)
	}
	for i, x := range out {
		out[i] = TimestampMicros(x, unit)
	}
	v.ownI64, v.i64 = out, out
}

func (v *values) booleans(a *array.Boolean, lo, hi int, sel []int32) {
	bits, off := a.Data().Buffers()[1].Bytes(), a.Data().Offset()
	out := slices.Grow(v.ownBits[:0], v.n)[:v.n]
	if sel == nil {
		for i := range out {
			j := off + lo + i
			out[i] = bits[j>>3] >> (j & 7) & 1
		}
	} else {
		for i, p := range sel {
			j := off + int(p)
			out[i] = bits[j>>3] >> (j & 7) & 1
		}
	}
	v.ownBits, v.bits = out, out
}

// byteArrays points start and end at the values in data. 64-bit offsets
// are rebased on the piece's first byte; a piece spanning more than 2 GiB
// (a value Parquet's 4-byte lengths cannot hold, or pieces no page could)
// is refused.
func (v *values) byteArrays(l *leaf, offs any, data []byte, lo, hi int, sel []int32) error {
	if o, ok := offs.([]int32); ok && sel == nil {
		v.start, v.end, v.data = o[lo:hi], o[lo+1:hi+1], data
		return nil
	}
	start, end := slices.Grow(v.ownStart[:0], v.n)[:v.n], slices.Grow(v.ownEnd[:0], v.n)[:v.n]
	v.ownStart, v.ownEnd, v.start, v.end = start, end, start, end
	switch o := offs.(type) {
	case []int32:
		for i, j := range sel {
			start[i], end[i] = o[j], o[j+1]
		}
		v.data = data
	case []int64:
		at := func(i int) int { // the i-th position of the piece
			if sel == nil {
				return lo + i
			}
			return int(sel[i])
		}
		if v.n == 0 {
			v.data = data
			return nil
		}
		base, last := o[at(0)], o[at(0)+1]
		for i := range v.n {
			base, last = min(base, o[at(i)]), max(last, o[at(i)+1])
		}
		if last-base > math.MaxInt32 {
			return writers.Errorf(writers.ErrInvalid, "parquetio: column %q: %d bytes of values in %d rows, more than a Parquet page can hold (2 GiB): send smaller values or batches", strings.Join(l.path, "."), last-base, v.n)
		}
		for i := range v.n {
			j := at(i)
			start[i], end[i] = int32(o[j]-base), int32(o[j+1]-base)
		}
		v.data = data[base:last]
	}
	return nil
}

// copyBytes appends each value with put into the values' own buffer.
func (v *values) copyBytes(lo, hi int, sel []int32, put func(dst []byte, i int) []byte) {
	data, start, end := v.ownData[:0], slices.Grow(v.ownStart[:0], v.n)[:v.n], slices.Grow(v.ownEnd[:0], v.n)[:v.n]
	for i := range v.n {
		j := lo + i
		if sel != nil {
			j = int(sel[i])
		}
		start[i] = int32(len(data))
		data = put(data, j)
		end[i] = int32(len(data))
	}
	v.ownData, v.ownStart, v.ownEnd = data, start, end
	v.data, v.start, v.end = data, start, end
}

// decimals stores unscaled values as INT32, INT64 or big-endian
// FIXED_LEN_BYTE_ARRAY, by the leaf's precision.
func (v *values) decimals(l *leaf, a *array.Decimal128, lo, hi int, sel []int32) {
	src := a.Values()
	switch l.kind {
	case parquet.Int32:
		v.i32 = unscaled(&v.ownI32, src, v.n, lo, sel)
	case parquet.Int64:
		v.i64 = unscaled(&v.ownI64, src, v.n, lo, sel)
	default:
		v.copyBytes(lo, hi, sel, func(dst []byte, i int) []byte { return appendBigEndian(dst, src[i], l.width) })
	}
}

// unscaled returns the low bits of n decimals (at most 18 digits: they fit)
// as INT32 or INT64 values.
func unscaled[T int32 | int64](own *[]T, src []decimal128.Num, n, lo int, sel []int32) []T {
	out := slices.Grow((*own)[:0], n)[:n]
	for i := range out {
		out[i] = T(src[pos(lo, i, sel)].LowBits())
	}
	*own = out
	return out
}

// pos is the array position of a piece's i-th value.
func pos(lo, i int, sel []int32) int {
	if sel == nil {
		return lo + i
	}
	return int(sel[i])
}

// dictionaryPositions maps positions of a dictionary array (sel, or the
// range [lo, hi)) to positions in its dictionary.
func dictionaryPositions(dst []int32, d *array.Dictionary, lo, hi int, sel []int32) []int32 {
	switch ix := d.Indices().(type) {
	case *array.Int8:
		return indexesAt(dst, ix.Int8Values(), lo, hi, sel)
	case *array.Int16:
		return indexesAt(dst, ix.Int16Values(), lo, hi, sel)
	case *array.Int32:
		return indexesAt(dst, ix.Int32Values(), lo, hi, sel)
	case *array.Int64:
		return indexesAt(dst, ix.Int64Values(), lo, hi, sel)
	case *array.Uint8:
		return indexesAt(dst, ix.Uint8Values(), lo, hi, sel)
	case *array.Uint16:
		return indexesAt(dst, ix.Uint16Values(), lo, hi, sel)
	case *array.Uint32:
		return indexesAt(dst, ix.Uint32Values(), lo, hi, sel)
	case *array.Uint64:
		return indexesAt(dst, ix.Uint64Values(), lo, hi, sel)
	}
	panic("parquetio: dictionary indices of type " + d.Indices().DataType().String())
}

func indexesAt[T ~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64](dst []int32, ix []T, lo, hi int, sel []int32) []int32 {
	if sel == nil {
		for _, x := range ix[lo:hi] {
			dst = append(dst, int32(x))
		}
		return dst
	}
	for _, j := range sel {
		dst = append(dst, int32(ix[j]))
	}
	return dst
}

// dataBuffer returns the whole value buffer of a variable-length array.
func dataBuffer(a arrow.Array) []byte {
	if b := a.Data().Buffers()[2]; b != nil {
		return b.Bytes()
	}
	return nil
}

// bytesAt is the i-th byte-array value.
func (v *values) bytesAt(i int) []byte { return v.data[v.start[i]:v.end[i]] }

// observe adds the values to m.
func (v *values) observe(kind parquet.Kind, m *minMax) {
	if v.n == 0 {
		return
	}
	switch kind {
	case parquet.Int32:
		observeInts(m, v.i32)
	case parquet.Int64:
		observeInts(m, v.i64)
	case parquet.Float:
		observeFloats(m, v.f32)
	case parquet.Double:
		observeFloats(m, v.f64)
	case parquet.Boolean:
		all, any := byte(1), byte(0)
		for _, x := range v.bits {
			all, any = all&x, any|x
		}
		observeBools(m, all != 0, any != 0, v.n)
	case parquet.ByteArray:
		m.observeByteArrays(v, bytes.Compare)
	case parquet.FixedLenByteArray:
		m.observeByteArrays(v, compareSignedBigEndian)
	}
}

// release drops the views into the record's buffers, so that the leaf
// does not keep a released batch alive.
func (v *values) release() {
	v.i32, v.i64, v.f32, v.f64, v.bits = nil, nil, nil, nil, nil
	v.data, v.start, v.end = nil, nil, nil
	v.n = 0
}

// keep drops the buffers that outgrew limit values (a piece of long
// lists), so that one large batch does not pin memory for the rest of
// the file.
func (v *values) keep(limit int) {
	if cap(v.ownI32) > limit {
		v.ownI32 = nil
	}
	if cap(v.ownI64) > limit {
		v.ownI64 = nil
	}
	if cap(v.ownF32) > limit {
		v.ownF32 = nil
	}
	if cap(v.ownF64) > limit {
		v.ownF64 = nil
	}
	if cap(v.ownBits) > limit {
		v.ownBits = nil
	}
	if cap(v.ownStart) > limit {
		v.ownStart, v.ownEnd = nil, nil
	}
	if cap(v.ownData) > 16*limit {
		v.ownData = nil
	}
	if cap(v.dictionary) > limit {
		v.dictionary = nil
	}
}
