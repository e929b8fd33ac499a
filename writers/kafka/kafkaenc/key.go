package kafkaenc

import (
	"fmt"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
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
	if !keyable(arr.DataType()) {
		return nil
	}
	c := columnOf(arr)
	switch c.kind {
	case kindString:
		return func(dst []byte, i int) []byte { return append(dst, c.stringAt(i)...) }
	case kindBinary, kindFixedBinary:
		return func(dst []byte, i int) []byte { return append(dst, c.bytesAt(i)...) }
	case kindFloat:
		return func(dst []byte, i int) []byte { return strconv.AppendFloat(dst, c.floatAt(i), 'g', -1, c.bits) }
	case kindDecimal:
		return c.decimalText
	case kindDate:
		return func(dst []byte, i int) []byte {
			return time.Unix(c.int64At(i)*86400, 0).UTC().AppendFormat(dst, time.DateOnly)
		}
	case kindTimestamp:
		return func(dst []byte, i int) []byte {
			return appendRFC3339(dst, c.int64At(i), c.unit)
		}
	case kindTime:
		return func(dst []byte, i int) []byte {
			return time.Unix(0, c.int64At(i)*int64(c.unit.Multiplier())).UTC().AppendFormat(dst, "15:04:05.999999999")
		}
	}
	// Bools, integers and durations: JSON renders them unquoted, which is
	// their canonical text too.
	return bindJSONValue(arr, Options{})
}

// keyable reports whether bindKey handles arrays of t: every primitive.
func keyable(t arrow.DataType) bool {
	switch typeOf(t).kind {
	case kindUnsupported, kindNull, kindStruct, kindList, kindMap, kindDictionary:
		return false
	}
	return true
}

func fieldNames(s *arrow.Schema) []string {
	out := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		out[i] = f.Name
	}
	return out
}
