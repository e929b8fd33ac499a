package kafkaenc

import (
	"fmt"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Keys encodes a key column into record keys: strings and binaries as
// their bytes, every other primitive in its canonical text form (integers
// in decimal, floats in the shortest form that round-trips, bools as
// true/false, dates as 2006-01-02, timestamps as RFC 3339 UTC, times of day
// as 15:04:05.999999999, durations as integers of their unit, decimals as
// plain decimal text). A null value is a null key.
//
// Keys is not safe for concurrent use.
type Keys struct {
	column string
}

// NewKeys returns the key encoder of column in schema, or an error when
// the column is missing or not of a primitive type.
func NewKeys(schema *arrow.Schema, column string) (*Keys, error) {
	idx := schema.FieldIndices(column)
	if len(idx) != 1 {
		return nil, fmt.Errorf("kafkaenc: key column %q is not in the record (columns: %v)", column, fieldNames(schema))
	}
	if !keyable(schema.Field(idx[0]).Type) {
		return nil, fmt.Errorf("kafkaenc: key column %q has type %s: a key must be a string, binary, integer, float, bool, date, time, timestamp, duration or decimal", column, schema.Field(idx[0]).Type)
	}
	return &Keys{column: column}, nil
}

// Encode appends the key of every row of rec to out. rec is borrowed.
func (k *Keys) Encode(rec arrow.RecordBatch, out *Batch) error {
	idx := rec.Schema().FieldIndices(k.column)
	if len(idx) != 1 {
		return fmt.Errorf("kafkaenc: key column %q is not in the record", k.column)
	}
	col := rec.Column(idx[0])
	fn := bindKey(col)
	if fn == nil {
		return fmt.Errorf("kafkaenc: key column %q has type %s, which cannot be a key", k.column, col.DataType())
	}
	for r := range col.Len() {
		if col.IsNull(r) {
			out.end(true)
			continue
		}
		out.buf = fn(out.buf, r)
		out.end(false)
	}
	return nil
}

// bindKey returns the key appender of arr, nil for a type that cannot be a
// key.
func bindKey(arr arrow.Array) appendFn {
	switch a := arr.(type) {
	case *array.String:
		return func(dst []byte, i int) []byte { return append(dst, a.Value(i)...) }
	case *array.LargeString:
		return func(dst []byte, i int) []byte { return append(dst, a.Value(i)...) }
	case *array.StringView:
		return func(dst []byte, i int) []byte { return append(dst, a.Value(i)...) }
	case *array.Binary:
		return func(dst []byte, i int) []byte { return append(dst, a.Value(i)...) }
	case *array.LargeBinary:
		return func(dst []byte, i int) []byte { return append(dst, a.Value(i)...) }
	case *array.BinaryView:
		return func(dst []byte, i int) []byte { return append(dst, a.Value(i)...) }
	case *array.FixedSizeBinary:
		return func(dst []byte, i int) []byte { return append(dst, a.Value(i)...) }
	case *array.Float32:
		return func(dst []byte, i int) []byte { return strconv.AppendFloat(dst, float64(a.Value(i)), 'g', -1, 32) }
	case *array.Float64:
		return func(dst []byte, i int) []byte { return strconv.AppendFloat(dst, a.Value(i), 'g', -1, 64) }
	case *array.Boolean, *array.Int8, *array.Int16, *array.Int32, *array.Int64,
		*array.Uint8, *array.Uint16, *array.Uint32, *array.Uint64, *array.Duration:
		// JSON renders these unquoted, which is their canonical text too.
		return bindJSONValue(arr, Options{})
	case *array.Decimal128:
		scale := a.DataType().(*arrow.Decimal128Type).Scale
		return func(dst []byte, i int) []byte { return appendDecimal128(dst, a.Value(i), scale) }
	case *array.Decimal256:
		scale := a.DataType().(*arrow.Decimal256Type).Scale
		return func(dst []byte, i int) []byte { return append(dst, a.Value(i).ToString(scale)...) }
	case *array.Date32:
		return func(dst []byte, i int) []byte {
			return time.Unix(int64(a.Value(i))*86400, 0).UTC().AppendFormat(dst, time.DateOnly)
		}
	case *array.Date64:
		return func(dst []byte, i int) []byte {
			return time.Unix(floorDiv(int64(a.Value(i)), 1000), 0).UTC().AppendFormat(dst, time.DateOnly)
		}
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return func(dst []byte, i int) []byte {
			return unixTime(int64(a.Value(i)), unit).AppendFormat(dst, time.RFC3339Nano)
		}
	case *array.Time32:
		unit := a.DataType().(*arrow.Time32Type).Unit
		return func(dst []byte, i int) []byte {
			return time.Unix(0, int64(a.Value(i))*int64(unit.Multiplier())).UTC().AppendFormat(dst, "15:04:05.999999999")
		}
	case *array.Time64:
		unit := a.DataType().(*arrow.Time64Type).Unit
		return func(dst []byte, i int) []byte {
			return time.Unix(0, int64(a.Value(i))*int64(unit.Multiplier())).UTC().AppendFormat(dst, "15:04:05.999999999")
		}
	}
	return nil
}

// keyable reports whether bindKey handles arrays of t.
func keyable(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW, arrow.BINARY, arrow.LARGE_BINARY,
		arrow.BINARY_VIEW, arrow.FIXED_SIZE_BINARY, arrow.FLOAT32, arrow.FLOAT64, arrow.BOOL,
		arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32,
		arrow.UINT64, arrow.DURATION, arrow.DECIMAL128, arrow.DECIMAL256, arrow.DATE32, arrow.DATE64,
		arrow.TIMESTAMP, arrow.TIME32, arrow.TIME64:
		return true
	}
	return false
}

func fieldNames(s *arrow.Schema) []string {
	out := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		out[i] = f.Name
	}
	return out
}
