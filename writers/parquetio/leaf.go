package parquetio

import (
	"encoding/binary"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/quiver-ingest/quiver/writers/parquetio/internal/pqfile"
)

// leaf is one Parquet leaf column: its type mapping, its levels and the
// encoder of its pages (column.go).
type leaf struct {
	path   []string
	column int // Parquet column index
	maxDef uint8
	maxRep uint8

	valueType arrow.DataType // the Arrow value type (dictionary resolved)
	dictInput bool           // the Arrow input is dictionary encoded
	node      parquet.Node   // the Parquet leaf node, without repetition
	kind      parquet.Kind
	width     int // FIXED_LEN_BYTE_ARRAY bytes

	vals  values // the current piece's non-null values
	stats minMax // bounds of every value written, for FileStats

	// pieceNulls is the number of nulls in a top-level column's piece;
	// -1 for nested columns, whose nulls come from their levels.
	pieceNulls int

	columnState
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
		l.node = parquet.Int(8)
	case *arrow.Int16Type:
		l.node = parquet.Int(16)
	case *arrow.Int32Type:
		l.node = parquet.Int(32)
	case *arrow.Int64Type:
		l.node = parquet.Int(64)
	case *arrow.Float32Type:
		l.node = parquet.Leaf(parquet.FloatType)
	case *arrow.Float64Type:
		l.node = parquet.Leaf(parquet.DoubleType)
	case *arrow.BooleanType:
		l.node = parquet.Leaf(parquet.BooleanType)
	case *arrow.StringType, *arrow.LargeStringType:
		l.node = parquet.String()
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.FixedSizeBinaryType:
		l.node = parquet.Leaf(parquet.ByteArrayType)
	case *arrow.Date32Type:
		l.node = parquet.Date()
	case *arrow.TimestampType:
		// Delta and Spark read TIMESTAMP(MICROS); other units are
		// converted. A zone means an instant (isAdjustedToUTC).
		l.node = parquet.TimestampAdjusted(parquet.Microsecond, t.TimeZone != "")
	case *arrow.Decimal128Type:
		if t.Scale < 0 || t.Scale > t.Precision || t.Precision < 1 || t.Precision > 38 {
			return nil, unsupported(path, dt, "decimal needs 1 <= precision <= 38 and 0 <= scale <= precision")
		}
		p, s := int(t.Precision), int(t.Scale)
		// Spark's layout: INT32 up to 9 digits, INT64 up to 18, else the
		// fewest bytes that hold the precision.
		switch {
		case p <= 9:
			l.node = parquet.Decimal(s, p, parquet.Int32Type)
		case p <= 18:
			l.node = parquet.Decimal(s, p, parquet.Int64Type)
		default:
			l.width = decimalBytes(p)
			l.node = parquet.Decimal(s, p, parquet.FixedLenByteArrayType(l.width))
		}
	default:
		return nil, unsupported(path, dt, "")
	}
	l.kind = l.node.Type().Kind()
	return l, nil
}

// pqColumn describes the leaf, at path in the Parquet schema, to pqfile.
func (l *leaf) pqColumn(path []string) *pqfile.Column {
	return &pqfile.Column{
		Path:      path,
		Type:      format.Type(l.kind),
		Compare:   compareBounds(l.kind),
		ByteArray: l.kind == parquet.ByteArray,
		HasLevels: l.maxDef > 0 || l.maxRep > 0,
	}
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
