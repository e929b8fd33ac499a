package parquetio

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/parquet-go/parquet-go"
)

// minMax accumulates the bounds of a leaf's non-null values, in the
// Parquet physical representation (timestamps already in microseconds).
type minMax struct {
	has      bool
	nan      bool
	lo, hi   int64   // INT32, INT64 and BOOLEAN (0/1)
	flo, fhi float64 // FLOAT, DOUBLE
	blo, bhi []byte  // BYTE_ARRAY, FIXED_LEN_BYTE_ARRAY (owned copies)
}

// addFloat adds x. A NaN is noted (see bounds), never a bound: a reader
// skipping data by min/max cannot compare against it.
func (m *minMax) addFloat(x float64) {
	switch {
	case x != x:
		m.nan = true
	case !m.has:
		m.flo, m.fhi, m.has = x, x, true
	default:
		m.flo, m.fhi = min(m.flo, x), max(m.fhi, x)
	}
}

// observeInts adds a piece's values (never null: values.go gathers the
// non-null ones).
func observeInts[T int32 | int64](m *minMax, src []T) {
	if len(src) == 0 {
		return
	}
	lo, hi := src[0], src[0]
	for _, x := range src[1:] {
		lo, hi = min(lo, x), max(hi, x)
	}
	if !m.has {
		m.lo, m.hi, m.has = int64(lo), int64(hi), true
	}
	m.lo, m.hi = min(m.lo, int64(lo)), max(m.hi, int64(hi))
}

// observeBools adds n booleans: all true or not, any true or not.
func observeBools(m *minMax, allTrue, anyTrue bool, n int) {
	if n == 0 {
		return
	}
	l, h := int64(0), int64(0)
	if allTrue {
		l = 1
	}
	if anyTrue {
		h = 1
	}
	if !m.has {
		m.lo, m.hi, m.has = l, h, true
	}
	m.lo, m.hi = min(m.lo, l), max(m.hi, h)
}

// observeFloats adds floats in one pass without a branch per value for
// NaN: a comparison with NaN is false, so NaN never becomes a bound, and
// NaNs are counted on the side.
func observeFloats[T float32 | float64](m *minMax, src []T) {
	if len(src) == 0 {
		return
	}
	lo, hi := T(math.Inf(1)), T(math.Inf(-1))
	nans := 0
	for _, x := range src {
		if x < lo {
			lo = x
		}
		if x > hi {
			hi = x
		}
		if x != x {
			nans++
		}
	}
	m.nan = m.nan || nans > 0
	if lo == 0 || hi == 0 {
		// -0 and +0 compare equal: whichever came first is the bound.
		// Order them as Go's min and max do (-0 below +0), so that a
		// file holding +0 never claims a maximum of -0.
		lo, hi = orderZeros(src, lo, hi)
	}
	if nans < len(src) { // some value is not NaN: lo and hi are bounds
		m.addFloat(float64(lo))
		m.addFloat(float64(hi))
	}
}

// orderZeros makes a zero minimum -0 when src holds a -0, and a zero
// maximum +0 when it holds a +0.
func orderZeros[T float32 | float64](src []T, lo, hi T) (T, T) {
	for _, x := range src {
		if x == 0 {
			if math.Signbit(float64(x)) {
				lo = min(lo, x)
			} else {
				hi = max(hi, x)
			}
		}
	}
	return lo, hi
}

// observeBytes adds b, copying a bound only when it changes.
func (m *minMax) observeBytes(b []byte, cmp func(a, b []byte) int) {
	switch {
	case !m.has:
		m.blo, m.bhi, m.has = append(m.blo[:0], b...), append(m.bhi[:0], b...), true
	case cmp(b, m.blo) < 0:
		m.blo = append(m.blo[:0], b...)
	case cmp(b, m.bhi) > 0:
		m.bhi = append(m.bhi[:0], b...)
	}
}

// observeByteArrays adds the byte arrays of v. A value whose first byte
// lies strictly between the first bytes of the bounds is neither bound:
// with varied strings (names, ids) that skips the two comparisons for
// almost every value.
func (m *minMax) observeByteArrays(v *values, cmp func(a, b []byte) int) {
	for i := range v.n {
		b := v.bytesAt(i)
		if len(b) > 0 && len(m.blo) > 0 && len(m.bhi) > 0 && b[0] > m.blo[0] && b[0] < m.bhi[0] {
			continue
		}
		m.observeBytes(b, cmp)
	}
}

// merge adds o's bounds to m.
func (m *minMax) merge(o *minMax, kind parquet.Kind) {
	m.nan = m.nan || o.nan
	if !o.has {
		return
	}
	switch kind {
	case parquet.Float, parquet.Double:
		m.addFloat(o.flo)
		m.addFloat(o.fhi)
	case parquet.ByteArray, parquet.FixedLenByteArray:
		order := compareBounds(kind)
		m.observeBytes(o.blo, order)
		m.observeBytes(o.bhi, order)
	default:
		if !m.has {
			m.lo, m.hi, m.has = o.lo, o.hi, true
		}
		m.lo, m.hi = min(m.lo, o.lo), max(m.hi, o.hi)
	}
}

// reset forgets the bounds, keeping the byte buffers.
func (m *minMax) reset() {
	*m = minMax{blo: m.blo[:0], bhi: m.bhi[:0]}
}

// plainBounds returns the bounds PLAIN encoded, as the page index and the
// footer store them (byte arrays without their length). NaN is never a
// bound (addFloat); a zero minimum is written -0 and a zero maximum +0,
// as the Parquet format asks, so readers comparing either zero are right.
func (m *minMax) plainBounds(kind parquet.Kind, lo, hi []byte) ([]byte, []byte, bool) {
	if !m.has {
		return lo, hi, false
	}
	lo, hi = lo[:0], hi[:0]
	switch kind {
	case parquet.Boolean:
		return append(lo, byte(m.lo)), append(hi, byte(m.hi)), true
	case parquet.Int32:
		return binary.LittleEndian.AppendUint32(lo, uint32(m.lo)), binary.LittleEndian.AppendUint32(hi, uint32(m.hi)), true
	case parquet.Int64:
		return binary.LittleEndian.AppendUint64(lo, uint64(m.lo)), binary.LittleEndian.AppendUint64(hi, uint64(m.hi)), true
	case parquet.Float:
		l, h := float32(m.flo), float32(m.fhi)
		if l == 0 {
			l = float32(math.Copysign(0, -1))
		}
		if h == 0 {
			h = 0
		}
		return binary.LittleEndian.AppendUint32(lo, math.Float32bits(l)), binary.LittleEndian.AppendUint32(hi, math.Float32bits(h)), true
	case parquet.Double:
		l, h := m.flo, m.fhi
		if l == 0 {
			l = math.Copysign(0, -1)
		}
		if h == 0 {
			h = 0
		}
		return binary.LittleEndian.AppendUint64(lo, math.Float64bits(l)), binary.LittleEndian.AppendUint64(hi, math.Float64bits(h)), true
	}
	return append(lo, m.blo...), append(hi, m.bhi...), true
}

// compareBounds orders PLAIN-encoded bounds of kind as Parquet's type
// defined order does: signed integers and floats by value, byte arrays
// bytewise unsigned, FIXED_LEN_BYTE_ARRAY (decimals) as signed big-endian.
func compareBounds(kind parquet.Kind) func(a, b []byte) int {
	switch kind {
	case parquet.Boolean:
		return bytes.Compare
	case parquet.Int32:
		return func(a, b []byte) int {
			return cmp.Compare(int32(binary.LittleEndian.Uint32(a)), int32(binary.LittleEndian.Uint32(b)))
		}
	case parquet.Int64:
		return func(a, b []byte) int {
			return cmp.Compare(int64(binary.LittleEndian.Uint64(a)), int64(binary.LittleEndian.Uint64(b)))
		}
	case parquet.Float:
		return func(a, b []byte) int {
			return cmp.Compare(math.Float32frombits(binary.LittleEndian.Uint32(a)), math.Float32frombits(binary.LittleEndian.Uint32(b)))
		}
	case parquet.Double:
		return func(a, b []byte) int {
			return cmp.Compare(math.Float64frombits(binary.LittleEndian.Uint64(a)), math.Float64frombits(binary.LittleEndian.Uint64(b)))
		}
	case parquet.FixedLenByteArray:
		return compareSignedBigEndian
	}
	return bytes.Compare
}

// compareSignedBigEndian orders equal-width two's complement big-endian
// integers (FIXED_LEN_BYTE_ARRAY decimals).
func compareSignedBigEndian(a, b []byte) int {
	if len(a) == 0 || len(b) == 0 || a[0]^b[0] < 0x80 {
		return bytes.Compare(a, b)
	}
	// Signs differ: the negative one (high bit set) is smaller.
	if a[0]&0x80 != 0 {
		return -1
	}
	return 1
}

// bounds converts the accumulated bounds to the Go values documented on
// ColumnStats for Arrow value type t.
func (m *minMax) bounds(t arrow.DataType) (lo, hi any, ok bool) {
	if !m.has || m.nan {
		return nil, nil, false
	}
	switch t := t.(type) {
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type:
		return m.lo, m.hi, true
	case *arrow.Float32Type, *arrow.Float64Type:
		return m.flo, m.fhi, true
	case *arrow.BooleanType:
		return m.lo != 0, m.hi != 0, true
	case *arrow.StringType, *arrow.LargeStringType:
		return string(m.blo), string(m.bhi), true
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.FixedSizeBinaryType:
		return m.blo, m.bhi, true
	case *arrow.Date32Type:
		return time.Unix(m.lo*86400, 0).UTC(), time.Unix(m.hi*86400, 0).UTC(), true
	case *arrow.TimestampType:
		return time.UnixMicro(m.lo).UTC(), time.UnixMicro(m.hi).UTC(), true
	case *arrow.Decimal128Type:
		if t.Precision <= 18 {
			return decimalNumber(decimal128.FromI64(m.lo), t.Scale), decimalNumber(decimal128.FromI64(m.hi), t.Scale), true
		}
		return decimalNumber(numFromBigEndian(m.blo), t.Scale), decimalNumber(numFromBigEndian(m.bhi), t.Scale), true
	}
	return nil, nil, false
}

func decimalNumber(n decimal128.Num, scale int32) json.Number {
	return json.Number(n.ToString(scale))
}

// numFromBigEndian sign-extends a big-endian two's complement integer of
// up to 16 bytes.
func numFromBigEndian(b []byte) decimal128.Num {
	var full [16]byte
	if len(b) > 0 && b[0]&0x80 != 0 {
		for i := range full {
			full[i] = 0xff
		}
	}
	copy(full[16-len(b):], b)
	return decimal128.New(int64(binary.BigEndian.Uint64(full[:8])), binary.BigEndian.Uint64(full[8:]))
}

// statNode is one ColumnStats entry: a column not inside a list or map.
type statNode struct {
	node  *node
	first *leaf // the first leaf below node, whose levels tell its nulls
	nulls int64
}

// statNodes lists the entries of roots in depth-first order.
func statNodes(roots []*node) []*statNode {
	var out []*statNode
	var walk func(n *node)
	walk = func(n *node) {
		out = append(out, &statNode{node: n, first: firstLeaf(n)})
		if n.kind == structNode {
			for _, c := range n.children {
				walk(c)
			}
		}
	}
	for _, r := range roots {
		walk(r)
	}
	return out
}

func firstLeaf(n *node) *leaf {
	for n.leaf == nil {
		n = n.children[0]
	}
	return n.leaf
}

// observe counts the rows of the current piece in which the node is null:
// at the row's first value (repetition level 0) the definition level
// stops below the node's.
func (s *statNode) observe() {
	if s.node.defPresent == 0 {
		return // required all the way down from the top
	}
	if l := s.node.leaf; l != nil && l.pieceNulls >= 0 {
		s.nulls += int64(l.pieceNulls) // a top-level column: counted by its leaf
		return
	}
	reps, defs := s.first.pieceLevels()
	for i, d := range defs {
		if (len(reps) == 0 || reps[i] == 0) && d < s.node.defPresent {
			s.nulls++
		}
	}
}

// columnStats returns the entry for the file's FileStats.
func (s *statNode) columnStats() ColumnStats {
	cs := ColumnStats{Path: s.node.path, NullCount: s.nulls}
	if l := s.node.leaf; l != nil {
		cs.Min, cs.Max, cs.HasMinMax = l.stats.bounds(l.valueType)
	}
	return cs
}
