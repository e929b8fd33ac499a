package kafkaenc

import (
	"encoding/binary"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// kind is what an Arrow type is to Kafka's encoders. typeOf and columnOf
// are the one place that maps Arrow types to kinds: the JSON and Avro
// encoders, the Avro schema derivation and the key encoder each switch
// over kinds only, so a new Arrow type of an existing kind is added here
// alone.
type kind uint8

const (
	kindUnsupported kind = iota
	kindNull
	kindBool
	kindInt    // integers that fit an int64: Int8..Int64, Uint8..Uint32
	kindUint64 // may exceed an int64
	kindFloat
	kindString
	kindBinary
	kindFixedBinary
	kindDate      // days since the epoch
	kindTimestamp // an int64 of unit since the epoch, UTC
	kindTime      // time of day, an int64 of unit
	kindDuration  // an int64 of unit
	kindDecimal
	kindStruct
	kindList // every list-like type but maps
	kindMap
	kindDictionary
)

// typeInfo is an Arrow type as its kind and the parameters encoders need.
type typeInfo struct {
	kind kind
	// bits: integers 8..64 (unsigned: one more than their width, so that
	// Uint32 counts as 33 and needs an Avro long), floats 32 or 64, times
	// of day 32 or 64.
	bits  int
	unit  arrow.TimeUnit // timestamp, time, duration
	width int            // fixed binary bytes
	// precision and scale of decimals.
	precision, scale int32
}

// typeOf classifies t.
func typeOf(t arrow.DataType) typeInfo {
	switch t := t.(type) {
	case *arrow.NullType:
		return typeInfo{kind: kindNull}
	case *arrow.BooleanType:
		return typeInfo{kind: kindBool}
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type:
		return typeInfo{kind: kindInt, bits: t.(arrow.FixedWidthDataType).BitWidth()}
	case *arrow.Uint8Type, *arrow.Uint16Type, *arrow.Uint32Type:
		return typeInfo{kind: kindInt, bits: t.(arrow.FixedWidthDataType).BitWidth() + 1}
	case *arrow.Uint64Type:
		return typeInfo{kind: kindUint64, bits: 64}
	case *arrow.Float32Type:
		return typeInfo{kind: kindFloat, bits: 32}
	case *arrow.Float64Type:
		return typeInfo{kind: kindFloat, bits: 64}
	case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType:
		return typeInfo{kind: kindString}
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.BinaryViewType:
		return typeInfo{kind: kindBinary}
	case *arrow.FixedSizeBinaryType:
		return typeInfo{kind: kindFixedBinary, width: t.ByteWidth}
	case *arrow.Date32Type, *arrow.Date64Type:
		return typeInfo{kind: kindDate}
	case *arrow.TimestampType:
		return typeInfo{kind: kindTimestamp, unit: t.Unit}
	case *arrow.Time32Type:
		return typeInfo{kind: kindTime, bits: 32, unit: t.Unit}
	case *arrow.Time64Type:
		return typeInfo{kind: kindTime, bits: 64, unit: t.Unit}
	case *arrow.DurationType:
		return typeInfo{kind: kindDuration, unit: t.Unit}
	case *arrow.Decimal128Type:
		return typeInfo{kind: kindDecimal, precision: t.Precision, scale: t.Scale}
	case *arrow.Decimal256Type:
		return typeInfo{kind: kindDecimal, precision: t.Precision, scale: t.Scale}
	case *arrow.StructType:
		return typeInfo{kind: kindStruct}
	case *arrow.MapType: // before ListLikeType: a map is list-like too
		return typeInfo{kind: kindMap}
	case arrow.ListLikeType:
		return typeInfo{kind: kindList}
	case *arrow.DictionaryType:
		return typeInfo{kind: kindDictionary}
	}
	return typeInfo{kind: kindUnsupported}
}

// column is an array seen through its kind: the accessor of its kind's
// values is set (int64At for ints, dates, timestamps, times and
// durations).
type column struct {
	typeInfo
	arr      arrow.Array
	boolAt   func(i int) bool
	int64At  func(i int) int64
	uint64At func(i int) uint64
	floatAt  func(i int) float64
	stringAt func(i int) string
	bytesAt  func(i int) []byte
	// decimals: appends plain text ("-12.340"), or Avro's decimal (the
	// length-prefixed minimal big-endian two's complement bytes).
	decimalText func(dst []byte, i int) []byte
	decimalAvro func(dst []byte, i int) []byte
}

// columnOf returns arr's column; nested kinds (struct, list, map,
// dictionary) carry the array alone, for the encoder to descend.
func columnOf(arr arrow.Array) column {
	c := column{typeInfo: typeOf(arr.DataType()), arr: arr}
	switch a := arr.(type) {
	case *array.Boolean:
		c.boolAt = a.Value
	case *array.Int8:
		c.int64At = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Int16:
		c.int64At = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Int32:
		c.int64At = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Int64:
		c.int64At = a.Value
	case *array.Uint8:
		c.int64At = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Uint16:
		c.int64At = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Uint32:
		c.int64At = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Uint64:
		c.uint64At = a.Value
	case *array.Float32:
		c.floatAt = func(i int) float64 { return float64(a.Value(i)) }
	case *array.Float64:
		c.floatAt = a.Value
	case *array.String:
		c.stringAt = a.Value
	case *array.LargeString:
		c.stringAt = a.Value
	case *array.StringView:
		c.stringAt = a.Value
	case *array.Binary:
		c.bytesAt = a.Value
	case *array.LargeBinary:
		c.bytesAt = a.Value
	case *array.BinaryView:
		c.bytesAt = a.Value
	case *array.FixedSizeBinary:
		c.bytesAt = a.Value
	case *array.Date32:
		c.int64At = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Date64:
		c.int64At = func(i int) int64 { return floorDiv(int64(a.Value(i)), 86_400_000) }
	case *array.Timestamp:
		c.int64At = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Time32:
		c.int64At = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Time64:
		c.int64At = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Duration:
		c.int64At = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Decimal128:
		c.decimalText = func(dst []byte, i int) []byte { return appendDecimal128(dst, a.Value(i), c.scale) }
		c.decimalAvro = func(dst []byte, i int) []byte {
			v := a.Value(i)
			var be [16]byte
			binary.BigEndian.PutUint64(be[:8], uint64(v.HighBits()))
			binary.BigEndian.PutUint64(be[8:], v.LowBits())
			return appendAvroBytes(dst, minimalTwos(be[:]))
		}
	case *array.Decimal256:
		c.decimalText = func(dst []byte, i int) []byte { return append(dst, a.Value(i).ToString(c.scale)...) }
		c.decimalAvro = func(dst []byte, i int) []byte {
			v := a.Value(i).Array() // little-endian words
			var be [32]byte
			for w := range 4 {
				binary.BigEndian.PutUint64(be[w*8:], v[3-w])
			}
			return appendAvroBytes(dst, minimalTwos(be[:]))
		}
	}
	return c
}

// minimalTwos trims the redundant sign bytes of a big-endian two's
// complement number, as Avro's decimal expects (Java's
// BigInteger.toByteArray).
func minimalTwos(be []byte) []byte {
	i := 0
	for i < len(be)-1 {
		if (be[i] == 0 && be[i+1]&0x80 == 0) || (be[i] == 0xFF && be[i+1]&0x80 != 0) {
			i++
			continue
		}
		break
	}
	return be[i:]
}
