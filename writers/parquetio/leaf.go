package parquetio

import (
	"encoding/binary"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/parquet-go/parquet-go"
)

// valueFunc returns the Parquet value of element i of an Arrow array,
// without levels. Byte-array values point into the Arrow buffers (or the
// leaf's scratch), so they are valid only while the record is borrowed.
type valueFunc func(i int) parquet.Value

// leaf is one Parquet leaf column: its type mapping, levels, the value
// buffer reused across batches and its statistics.
type leaf struct {
	path   []string
	column int // Parquet column index
	maxDef uint8
	maxRep uint8

	valueType arrow.DataType // the Arrow value type (dictionary resolved)
	dictInput bool           // the Arrow input is dictionary encoded
	node      parquet.Node   // the Parquet leaf node, without repetition
	kind      parquet.Kind
	// valuesOf makes the valueFunc of an array of valueType.
	valuesOf func(l *leaf, arr arrow.Array) valueFunc

	vals    []parquet.Value // the values of the current chunk, with levels
	scratch []byte          // bytes of FIXED_LEN_BYTE_ARRAY decimals of the current chunk
	stats   minMax
	// observed says shredRange already added the chunk to stats.
	observed bool
	// rangeNulls is the number of nulls shredRange found in a top-level
	// column's chunk; -1 when shredSlots converted it (nested).
	rangeNulls int
}

// newLeaf maps a primitive Arrow type to its Parquet leaf (type table in
// docs/delta.md, "Types").
func newLeaf(path []string, dt arrow.DataType) (*leaf, error) {
	l := &leaf{path: path, valueType: dt}
	if d, ok := dt.(*arrow.DictionaryType); ok {
		l.valueType, l.dictInput = d.ValueType, true
		if _, nested := d.ValueType.(arrow.NestedType); nested {
			return nil, unsupported(path, dt, "dictionary values must be primitive")
		}
	}
	switch t := l.valueType.(type) {
	case *arrow.Int8Type:
		l.node, l.valuesOf = parquet.Int(8), int8Values
	case *arrow.Int16Type:
		l.node, l.valuesOf = parquet.Int(16), int16Values
	case *arrow.Int32Type:
		l.node, l.valuesOf = parquet.Int(32), int32Values
	case *arrow.Int64Type:
		l.node, l.valuesOf = parquet.Int(64), int64Values
	case *arrow.Float32Type:
		l.node, l.valuesOf = parquet.Leaf(parquet.FloatType), float32Values
	case *arrow.Float64Type:
		l.node, l.valuesOf = parquet.Leaf(parquet.DoubleType), float64Values
	case *arrow.BooleanType:
		l.node, l.valuesOf = parquet.Leaf(parquet.BooleanType), boolValues
	case *arrow.StringType, *arrow.LargeStringType:
		l.node, l.valuesOf = parquet.String(), stringValues
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.FixedSizeBinaryType:
		l.node, l.valuesOf = parquet.Leaf(parquet.ByteArrayType), binaryValues
	case *arrow.Date32Type:
		l.node, l.valuesOf = parquet.Date(), date32Values
	case *arrow.TimestampType:
		// Delta and Spark read TIMESTAMP(MICROS); other units are
		// converted. A zone means an instant (isAdjustedToUTC).
		l.node, l.valuesOf = parquet.TimestampAdjusted(parquet.Microsecond, t.TimeZone != ""), timestampValues
	case *arrow.Decimal128Type:
		if t.Scale < 0 || t.Scale > t.Precision || t.Precision < 1 || t.Precision > 38 {
			return nil, unsupported(path, dt, "decimal needs 1 <= precision <= 38 and 0 <= scale <= precision")
		}
		p, s := int(t.Precision), int(t.Scale)
		// Spark's layout: INT32 up to 9 digits, INT64 up to 18, else the
		// fewest bytes that hold the precision.
		switch {
		case p <= 9:
			l.node, l.valuesOf = parquet.Decimal(s, p, parquet.Int32Type), decimalInt32Values
		case p <= 18:
			l.node, l.valuesOf = parquet.Decimal(s, p, parquet.Int64Type), decimalInt64Values
		default:
			l.node, l.valuesOf = parquet.Decimal(s, p, parquet.FixedLenByteArrayType(decimalBytes(p))), decimalFixedValues
		}
	default:
		return nil, unsupported(path, dt, "")
	}
	l.kind = l.node.Type().Kind()
	return l, nil
}

// values returns the valueFunc of arr, which has the leaf's Arrow type
// (dictionary or not). It starts a new chunk of decimal scratch bytes.
func (l *leaf) values(arr arrow.Array) valueFunc {
	l.scratch = l.scratch[:0]
	d, ok := arr.(*array.Dictionary)
	if !ok {
		return l.valuesOf(l, arr)
	}
	inner, index := l.valuesOf(l, d.Dictionary()), indexFunc(d.Indices())
	return func(i int) parquet.Value { return inner(index(i)) }
}

// indexFunc returns the dictionary index of element i for the common index
// types without going through Dictionary.GetValueIndex's per-call switch.
func indexFunc(indices arrow.Array) func(int) int {
	switch a := indices.(type) {
	case *array.Int32:
		v := a.Int32Values()
		return func(i int) int { return int(v[i]) }
	case *array.Int8:
		v := a.Int8Values()
		return func(i int) int { return int(v[i]) }
	case *array.Int16:
		v := a.Int16Values()
		return func(i int) int { return int(v[i]) }
	case *array.Int64:
		v := a.Int64Values()
		return func(i int) int { return int(v[i]) }
	}
	return func(i int) int { return array.NewDictionaryData(indices.Data()).GetValueIndex(i) }
}

func int8Values(_ *leaf, arr arrow.Array) valueFunc {
	v := arr.(*array.Int8).Int8Values()
	return func(i int) parquet.Value { return parquet.Int32Value(int32(v[i])) }
}

func int16Values(_ *leaf, arr arrow.Array) valueFunc {
	v := arr.(*array.Int16).Int16Values()
	return func(i int) parquet.Value { return parquet.Int32Value(int32(v[i])) }
}

func int32Values(_ *leaf, arr arrow.Array) valueFunc {
	v := arr.(*array.Int32).Int32Values()
	return func(i int) parquet.Value { return parquet.Int32Value(v[i]) }
}

func int64Values(_ *leaf, arr arrow.Array) valueFunc {
	v := arr.(*array.Int64).Int64Values()
	return func(i int) parquet.Value { return parquet.Int64Value(v[i]) }
}

func float32Values(_ *leaf, arr arrow.Array) valueFunc {
	v := arr.(*array.Float32).Float32Values()
	return func(i int) parquet.Value { return parquet.FloatValue(v[i]) }
}

func float64Values(_ *leaf, arr arrow.Array) valueFunc {
	v := arr.(*array.Float64).Float64Values()
	return func(i int) parquet.Value { return parquet.DoubleValue(v[i]) }
}

func boolValues(_ *leaf, arr arrow.Array) valueFunc {
	a := arr.(*array.Boolean)
	return func(i int) parquet.Value { return parquet.BooleanValue(a.Value(i)) }
}

func date32Values(_ *leaf, arr arrow.Array) valueFunc {
	v := arr.(*array.Date32).Date32Values()
	return func(i int) parquet.Value { return parquet.Int32Value(int32(v[i])) }
}

func timestampValues(_ *leaf, arr arrow.Array) valueFunc {
	a := arr.(*array.Timestamp)
	v := a.TimestampValues()
	switch a.DataType().(*arrow.TimestampType).Unit {
	case arrow.Second:
		return func(i int) parquet.Value { return parquet.Int64Value(int64(v[i]) * 1_000_000) }
	case arrow.Millisecond:
		return func(i int) parquet.Value { return parquet.Int64Value(int64(v[i]) * 1_000) }
	case arrow.Nanosecond:
		return func(i int) parquet.Value { return parquet.Int64Value(floorDiv(int64(v[i]), 1_000)) }
	}
	return func(i int) parquet.Value { return parquet.Int64Value(int64(v[i])) }
}

// TimestampMicros converts v, a timestamp in unit, to the microseconds the
// files store: seconds and milliseconds scaled, nanoseconds floored (see
// floorDiv). Callers comparing values with stored ones convert with it.
func TimestampMicros(v int64, unit arrow.TimeUnit) int64 {
	switch unit {
	case arrow.Second:
		return v * 1_000_000
	case arrow.Millisecond:
		return v * 1_000
	case arrow.Nanosecond:
		return floorDiv(v, 1_000)
	}
	return v
}

// floorDiv rounds toward negative infinity, so that a nanosecond instant
// before 1970 maps to the microsecond that contains it.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

func stringValues(_ *leaf, arr arrow.Array) valueFunc {
	switch a := arr.(type) {
	case *array.String:
		// ValueBytes starts at the first element's offset; the offsets
		// are absolute into the data buffer.
		offs, data := a.ValueOffsets(), dataBuffer(a)
		return func(i int) parquet.Value { return parquet.ByteArrayValue(data[offs[i]:offs[i+1]]) }
	case *array.LargeString:
		offs, data := a.ValueOffsets(), dataBuffer(a)
		return func(i int) parquet.Value { return parquet.ByteArrayValue(data[offs[i]:offs[i+1]]) }
	}
	panic("parquetio: string leaf given " + arr.DataType().String())
}

// dataBuffer returns the whole value buffer of a variable-length array.
func dataBuffer(a arrow.Array) []byte {
	if b := a.Data().Buffers()[2]; b != nil {
		return b.Bytes()
	}
	return nil
}

func binaryValues(_ *leaf, arr arrow.Array) valueFunc {
	a := arr.(interface{ Value(int) []byte })
	return func(i int) parquet.Value { return parquet.ByteArrayValue(a.Value(i)) }
}

func decimalInt32Values(_ *leaf, arr arrow.Array) valueFunc {
	v := arr.(*array.Decimal128).Values()
	return func(i int) parquet.Value { return parquet.Int32Value(int32(v[i].LowBits())) }
}

func decimalInt64Values(_ *leaf, arr arrow.Array) valueFunc {
	v := arr.(*array.Decimal128).Values()
	return func(i int) parquet.Value { return parquet.Int64Value(int64(v[i].LowBits())) }
}

// decimalFixedValues writes each value big-endian into the leaf's scratch.
// The scratch may grow while values are made; earlier values keep pointing
// at the old array, which stays alive and unchanged.
func decimalFixedValues(l *leaf, arr arrow.Array) valueFunc {
	v := arr.(*array.Decimal128).Values()
	width := decimalBytes(int(arr.DataType().(*arrow.Decimal128Type).Precision))
	return func(i int) parquet.Value {
		start := len(l.scratch)
		l.scratch = appendBigEndian(l.scratch, v[i], width)
		return parquet.FixedLenByteArrayValue(l.scratch[start:])
	}
}

// appendBigEndian appends the width low bytes of n's two's complement,
// most significant first (the value fits: width holds its precision).
func appendBigEndian(b []byte, n decimal128.Num, width int) []byte {
	var full [16]byte
	binary.BigEndian.PutUint64(full[:8], uint64(n.HighBits()))
	binary.BigEndian.PutUint64(full[8:], n.LowBits())
	return append(b, full[16-width:]...)
}

// decimalBytes is the fewest bytes whose two's complement holds every
// unscaled value of precision digits, computed as Spark's
// minBytesForPrecision does.
func decimalBytes(precision int) int {
	return int(math.Ceil((float64(precision)*math.Log2(10) + 1) / 8))
}
