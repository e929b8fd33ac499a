package kafkaenc

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestColumnOfAgreesWithTypeOf: for every type typeOf gives a value kind,
// columnOf sets that kind's accessor (a type added to one and not the
// other would panic in an encoder).
func TestColumnOfAgreesWithTypeOf(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	types := []arrow.DataType{
		arrow.FixedWidthTypes.Boolean,
		arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64,
		arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64,
		arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64,
		arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.StringView,
		arrow.BinaryTypes.Binary, arrow.BinaryTypes.LargeBinary, arrow.BinaryTypes.BinaryView,
		&arrow.FixedSizeBinaryType{ByteWidth: 3},
		arrow.FixedWidthTypes.Date32, arrow.FixedWidthTypes.Date64,
		arrow.FixedWidthTypes.Timestamp_s, arrow.FixedWidthTypes.Timestamp_ns,
		arrow.FixedWidthTypes.Time32ms, arrow.FixedWidthTypes.Time64ns, arrow.FixedWidthTypes.Duration_us,
		&arrow.Decimal128Type{Precision: 10, Scale: 2}, &arrow.Decimal256Type{Precision: 40, Scale: 2},
	}
	for _, typ := range types {
		arr := array.MakeArrayOfNull(mem, typ, 1)
		c := columnOf(arr)
		var set bool
		switch c.kind {
		case kindBool:
			set = c.boolAt != nil
		case kindInt, kindDate, kindTimestamp, kindTime, kindDuration:
			set = c.int64At != nil
		case kindUint64:
			set = c.uint64At != nil
		case kindFloat:
			set = c.floatAt != nil
		case kindString:
			set = c.stringAt != nil
		case kindBinary, kindFixedBinary:
			set = c.bytesAt != nil
		case kindDecimal:
			set = c.decimalText != nil && c.decimalAvro != nil
		}
		if !set {
			t.Errorf("%s: kind %d without its accessor", typ, c.kind)
		}
		if !keyable(typ) || bindKey(arr) == nil {
			t.Errorf("%s: a primitive that cannot be a key", typ)
		}
		arr.Release()
	}
	for _, typ := range []arrow.DataType{arrow.FixedWidthTypes.Float16, arrow.FixedWidthTypes.MonthInterval, arrow.Null,
		arrow.ListOf(arrow.PrimitiveTypes.Int8), arrow.StructOf()} {
		if keyable(typ) {
			t.Errorf("%s is keyable", typ)
		}
	}
}
