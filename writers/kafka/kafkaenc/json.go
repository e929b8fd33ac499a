package kafkaenc

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// JSON encodes rows as JSON objects, one per row, keys in column order.
//
// Mapping (docs/kafka.md): integers and finite floats as numbers, NaN and
// ±Inf as null (JSON has no such numbers), bools, strings escaped as
// encoding/json does (invalid UTF-8 becomes U+FFFD), binary as standard
// base64 text, timestamps as RFC 3339 UTC text with as many fraction
// digits as needed or as integer epoch milliseconds (Options), dates as
// "2006-01-02", times of day as "15:04:05.999999999" (or milliseconds of
// the day), durations as integers of their unit, decimals as strings,
// structs as objects, lists as arrays, maps with string keys as objects
// and other maps as arrays of {"key","value"} objects, dictionaries as
// their values.
//
// A JSON is bound to one schema and is not safe for concurrent use.
type JSON struct {
	schema *arrow.Schema
	opts   Options
	names  [][]byte // `"name":` per column, the first without the comma
	fns    []appendFn
}

// appendFn appends the value of row i of the array it was bound to.
type appendFn func(dst []byte, i int) []byte

// NewJSON returns an encoder for records of schema, or an error naming the
// first column of a type JSON cannot carry.
func NewJSON(schema *arrow.Schema, opts Options) (*JSON, error) {
	j := &JSON{schema: schema, opts: opts}
	for i, f := range schema.Fields() {
		if err := jsonCheck(f.Name, f.Type); err != nil {
			return nil, err
		}
		name := []byte{}
		if i > 0 {
			name = append(name, ',')
		}
		name = appendJSONString(name, f.Name)
		j.names = append(j.names, append(name, ':'))
	}
	return j, nil
}

// Schema is the schema the encoder was made for.
func (j *JSON) Schema() *arrow.Schema { return j.schema }

// Encode appends one JSON object per row of rec to out (Reset it first to
// reuse it). rec must have the encoder's schema; it is borrowed.
func (j *JSON) Encode(rec arrow.RecordBatch, out *Batch) error {
	if !rec.Schema().Equal(j.schema) {
		return fmt.Errorf("kafkaenc: json: record schema differs from the encoder's")
	}
	j.fns = j.fns[:0]
	for _, col := range rec.Columns() {
		j.fns = append(j.fns, bindJSON(col, j.opts))
	}
	for r := range int(rec.NumRows()) {
		out.buf = append(out.buf, '{')
		for c, fn := range j.fns {
			out.buf = append(out.buf, j.names[c]...)
			out.buf = fn(out.buf, r)
		}
		out.buf = append(out.buf, '}')
		out.end(false)
	}
	return nil
}

// jsonCheck reports a type bindJSON cannot render.
func jsonCheck(path string, t arrow.DataType) error {
	switch typeOf(t).kind {
	case kindUnsupported:
		return unsupported("json", path, t)
	case kindStruct:
		for _, f := range t.(*arrow.StructType).Fields() {
			if err := jsonCheck(path+"."+f.Name, f.Type); err != nil {
				return err
			}
		}
	case kindMap:
		m := t.(*arrow.MapType)
		if err := jsonCheck(path+".key", m.KeyType()); err != nil {
			return err
		}
		return jsonCheck(path+".value", m.ItemType())
	case kindList:
		return jsonCheck(path+".item", t.(arrow.ListLikeType).Elem())
	case kindDictionary:
		return jsonCheck(path, t.(*arrow.DictionaryType).ValueType)
	}
	return nil
}

// bindJSON returns the appender of arr; jsonCheck has accepted its type.
func bindJSON(arr arrow.Array, opts Options) appendFn {
	fn := bindJSONValue(arr, opts)
	if arr.NullN() == 0 {
		return fn
	}
	return func(dst []byte, i int) []byte {
		if arr.IsNull(i) {
			return append(dst, "null"...)
		}
		return fn(dst, i)
	}
}

func bindJSONValue(arr arrow.Array, opts Options) appendFn {
	c := columnOf(arr)
	switch c.kind {
	case kindNull:
		return func(dst []byte, _ int) []byte { return append(dst, "null"...) }
	case kindBool:
		return func(dst []byte, i int) []byte { return strconv.AppendBool(dst, c.boolAt(i)) }
	case kindInt, kindDuration:
		return func(dst []byte, i int) []byte { return appendInt(dst, c.int64At(i)) }
	case kindUint64:
		return func(dst []byte, i int) []byte { return appendUint(dst, c.uint64At(i)) }
	case kindFloat:
		return func(dst []byte, i int) []byte { return appendJSONFloat(dst, c.floatAt(i), c.bits) }
	case kindString:
		return func(dst []byte, i int) []byte { return appendJSONString(dst, c.stringAt(i)) }
	case kindBinary, kindFixedBinary:
		return func(dst []byte, i int) []byte { return appendBase64(dst, c.bytesAt(i)) }
	case kindDate:
		return func(dst []byte, i int) []byte { return appendDate(dst, c.int64At(i)*86400) }
	case kindTimestamp:
		if opts.EpochMillis {
			return func(dst []byte, i int) []byte { return appendInt(dst, toMillis(c.int64At(i), c.unit)) }
		}
		return func(dst []byte, i int) []byte { return appendTimestamp(dst, c.int64At(i), c.unit) }
	case kindTime:
		return timeOfDay(c.int64At, c.unit, opts)
	case kindDecimal:
		return func(dst []byte, i int) []byte {
			dst = append(dst, '"')
			dst = c.decimalText(dst, i)
			return append(dst, '"')
		}
	case kindStruct:
		return bindJSONStruct(arr.(*array.Struct), opts)
	case kindMap:
		return bindJSONMap(arr.(*array.Map), opts)
	case kindList:
		l := arr.(array.ListLike)
		items := bindJSON(l.ListValues(), opts)
		return func(dst []byte, i int) []byte {
			start, end := l.ValueOffsets(i)
			dst = append(dst, '[')
			for j := start; j < end; j++ {
				if j > start {
					dst = append(dst, ',')
				}
				dst = items(dst, int(j))
			}
			return append(dst, ']')
		}
	case kindDictionary:
		d := arr.(*array.Dictionary)
		values := bindJSON(d.Dictionary(), opts)
		return func(dst []byte, i int) []byte { return values(dst, d.GetValueIndex(i)) }
	}
	panic(fmt.Sprintf("kafkaenc: json: type %s passed jsonCheck but has no appender", arr.DataType()))
}

func bindJSONStruct(a *array.Struct, opts Options) appendFn {
	st := a.DataType().(*arrow.StructType)
	names := make([][]byte, st.NumFields())
	fields := make([]appendFn, st.NumFields())
	for k, f := range st.Fields() {
		var n []byte
		if k > 0 {
			n = append(n, ',')
		}
		names[k] = append(appendJSONString(n, f.Name), ':')
		fields[k] = bindJSON(a.Field(k), opts)
	}
	return func(dst []byte, i int) []byte {
		dst = append(dst, '{')
		for k, fn := range fields {
			dst = append(dst, names[k]...)
			dst = fn(dst, i)
		}
		return append(dst, '}')
	}
}

// bindJSONMap renders string-keyed maps as objects and any other map as an
// array of {"key","value"} objects, as Kafka Connect's JSON converter does.
func bindJSONMap(a *array.Map, opts Options) appendFn {
	keys, items := bindJSON(a.Keys(), opts), bindJSON(a.Items(), opts)
	if typeOf(a.Keys().DataType()).kind == kindString {
		return func(dst []byte, i int) []byte {
			start, end := a.ValueOffsets(i)
			dst = append(dst, '{')
			for j := start; j < end; j++ {
				if j > start {
					dst = append(dst, ',')
				}
				dst = append(keys(dst, int(j)), ':')
				dst = items(dst, int(j))
			}
			return append(dst, '}')
		}
	}
	return func(dst []byte, i int) []byte {
		start, end := a.ValueOffsets(i)
		dst = append(dst, '[')
		for j := start; j < end; j++ {
			if j > start {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"key":`...)
			dst = keys(dst, int(j))
			dst = append(dst, `,"value":`...)
			dst = items(dst, int(j))
			dst = append(dst, '}')
		}
		return append(dst, ']')
	}
}

func timeOfDay(v func(int) int64, unit arrow.TimeUnit, opts Options) appendFn {
	if opts.EpochMillis {
		return func(dst []byte, i int) []byte { return appendInt(dst, toMillis(v(i), unit)) }
	}
	return func(dst []byte, i int) []byte {
		t := time.Unix(0, v(i)*int64(unit.Multiplier())).UTC()
		dst = append(dst, '"')
		dst = t.AppendFormat(dst, "15:04:05.999999999")
		return append(dst, '"')
	}
}

// appendJSONFloat renders f as encoding/json does; NaN and ±Inf, which
// JSON cannot carry, become null.
func appendJSONFloat(dst []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	if bits == 64 {
		if out, ok := appendCents(dst, f); ok {
			return out
		}
	}
	abs, format := math.Abs(f), byte('f')
	if abs != 0 && (bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21)) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

func appendBase64(dst, v []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, v)
	return append(dst, '"')
}

func appendDate(dst []byte, unixSeconds int64) []byte {
	dst = append(dst, '"')
	dst = time.Unix(unixSeconds, 0).UTC().AppendFormat(dst, time.DateOnly)
	return append(dst, '"')
}

func appendTimestamp(dst []byte, v int64, unit arrow.TimeUnit) []byte {
	dst = append(dst, '"')
	dst = appendRFC3339(dst, v, unit)
	return append(dst, '"')
}

// toMillis converts a value of unit to milliseconds, rounding down.
func toMillis(v int64, unit arrow.TimeUnit) int64 {
	switch unit {
	case arrow.Second:
		return v * 1000
	case arrow.Millisecond:
		return v
	case arrow.Microsecond:
		return floorDiv(v, 1000)
	default:
		return floorDiv(v, 1_000_000)
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
