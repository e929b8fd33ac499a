package kafkaenc

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Avro encodes rows as Avro binary in the Confluent wire format: byte 0,
// the 4-byte big-endian schema id, then the body, written directly
// (zig-zag varints, length-prefixed strings and bytes, union branch index
// of nullable fields, blocked arrays and maps) without reflection.
//
// An Avro is bound to one Arrow schema and one registered schema id; it is
// not safe for concurrent use.
type Avro struct {
	schema *arrow.Schema
	text   string
	header [5]byte
	fns    []appendFn
	err    error // the first value error of the current Encode
}

// NewAvro returns an encoder for records of schema; name names the Avro
// record (the topic, by convention). Set the registered id with SetID
// before encoding.
func NewAvro(schema *arrow.Schema, name string) (*Avro, error) {
	text, err := AvroSchema(schema, name)
	if err != nil {
		return nil, err
	}
	return &Avro{schema: schema, text: text}, nil
}

// SchemaText is the derived Avro schema, to register.
func (a *Avro) SchemaText() string { return a.text }

// Schema is the Arrow schema the encoder was made for.
func (a *Avro) Schema() *arrow.Schema { return a.schema }

// SetID sets the registry id written in every record's header.
func (a *Avro) SetID(id int) {
	a.header[0] = 0
	binary.BigEndian.PutUint32(a.header[1:], uint32(id))
}

// Encode appends one framed Avro record per row of rec to out. rec must
// have the encoder's schema; it is borrowed. A value Avro cannot hold (a
// null in a non-nullable column, a uint64 above the long range) is an
// error naming the column; out then holds a partial batch.
func (a *Avro) Encode(rec arrow.RecordBatch, out *Batch) error {
	if !rec.Schema().Equal(a.schema) {
		return fmt.Errorf("kafkaenc: avro: record schema differs from the encoder's")
	}
	a.err = nil
	a.fns = a.fns[:0]
	for i, col := range rec.Columns() {
		f := a.schema.Field(i)
		fn, err := a.bind(f.Name, col, f.Nullable)
		if err != nil {
			return err
		}
		a.fns = append(a.fns, fn)
	}
	for r := range int(rec.NumRows()) {
		out.buf = append(out.buf, a.header[:]...)
		for _, fn := range a.fns {
			out.buf = fn(out.buf, r)
		}
		out.end(false)
	}
	return a.err
}

// bind returns the appender of arr, with the union branch index first
// when nullable.
func (a *Avro) bind(path string, arr arrow.Array, nullable bool) (appendFn, error) {
	if arr.DataType().ID() == arrow.NULL {
		return func(dst []byte, _ int) []byte { return dst }, nil
	}
	fn, err := a.bindValue(path, arr)
	if err != nil {
		return nil, err
	}
	if !nullable {
		if arr.NullN() > 0 {
			return nil, fmt.Errorf("kafkaenc: column %q is declared non-nullable but holds %d nulls", path, arr.NullN())
		}
		return fn, nil
	}
	return func(dst []byte, i int) []byte {
		if arr.IsNull(i) {
			return append(dst, 0) // branch 0: null
		}
		return fn(append(dst, 2), i) // branch 1, zig-zag encoded
	}, nil
}

func appendLong(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }

func appendAvroBytes(dst, b []byte) []byte {
	return append(binary.AppendVarint(dst, int64(len(b))), b...)
}

func appendAvroString(dst []byte, s string) []byte {
	return append(binary.AppendVarint(dst, int64(len(s))), s...)
}

func (a *Avro) bindValue(path string, arr arrow.Array) (appendFn, error) {
	c := columnOf(arr)
	switch c.kind {
	case kindBool:
		return func(dst []byte, i int) []byte {
			if c.boolAt(i) {
				return append(dst, 1)
			}
			return append(dst, 0)
		}, nil
	case kindInt, kindDate, kindDuration:
		return func(dst []byte, i int) []byte { return appendLong(dst, c.int64At(i)) }, nil
	case kindUint64:
		return func(dst []byte, i int) []byte {
			v := c.uint64At(i)
			if v > math.MaxInt64 && a.err == nil {
				a.err = fmt.Errorf("kafkaenc: column %q: %d does not fit an avro long", path, v)
			}
			return appendLong(dst, int64(v))
		}, nil
	case kindFloat:
		if c.bits == 32 {
			return func(dst []byte, i int) []byte {
				return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(c.floatAt(i))))
			}, nil
		}
		return func(dst []byte, i int) []byte {
			return binary.LittleEndian.AppendUint64(dst, math.Float64bits(c.floatAt(i)))
		}, nil
	case kindString:
		return func(dst []byte, i int) []byte { return appendAvroString(dst, c.stringAt(i)) }, nil
	case kindBinary:
		return func(dst []byte, i int) []byte { return appendAvroBytes(dst, c.bytesAt(i)) }, nil
	case kindFixedBinary:
		return func(dst []byte, i int) []byte { return append(dst, c.bytesAt(i)...) }, nil
	case kindTimestamp, kindTime:
		// Seconds are written as millis; nanosecond times of day as
		// micros (Avro has no nanosecond time of day).
		mul, div := int64(1), int64(1)
		switch {
		case c.unit == arrow.Second:
			mul = 1000
		case c.kind == kindTime && c.unit == arrow.Nanosecond:
			div = 1000
		}
		return func(dst []byte, i int) []byte { return appendLong(dst, c.int64At(i)*mul/div) }, nil
	case kindDecimal:
		return c.decimalAvro, nil
	case kindStruct:
		s := arr.(*array.Struct)
		st := s.DataType().(*arrow.StructType)
		fields := make([]appendFn, st.NumFields())
		for k, f := range st.Fields() {
			fn, err := a.bind(joinPath(path, f.Name), s.Field(k), f.Nullable)
			if err != nil {
				return nil, err
			}
			fields[k] = fn
		}
		return func(dst []byte, i int) []byte {
			for _, fn := range fields {
				dst = fn(dst, i)
			}
			return dst
		}, nil
	case kindMap:
		m := arr.(*array.Map)
		keys, err := a.bindValue(path+".key", m.Keys())
		if err != nil {
			return nil, err
		}
		items, err := a.bind(path+".value", m.Items(), m.DataType().(*arrow.MapType).ItemField().Nullable)
		if err != nil {
			return nil, err
		}
		return avroBlocks(m, func(dst []byte, j int) []byte { return items(keys(dst, j), j) }), nil
	case kindList:
		l := arr.(array.ListLike)
		elem := l.DataType().(arrow.ListLikeType).ElemField()
		items, err := a.bind(path+".item", l.ListValues(), elem.Nullable)
		if err != nil {
			return nil, err
		}
		return avroBlocks(l, items), nil
	case kindDictionary:
		d := arr.(*array.Dictionary)
		values, err := a.bindValue(path, d.Dictionary())
		if err != nil {
			return nil, err
		}
		return func(dst []byte, i int) []byte { return values(dst, d.GetValueIndex(i)) }, nil
	}
	return nil, unsupported("avro", path, arr.DataType())
}

// avroBlocks appends each row's items of l as one Avro block (count, then
// items) and the terminating zero.
func avroBlocks(l array.ListLike, item appendFn) appendFn {
	return func(dst []byte, i int) []byte {
		start, end := l.ValueOffsets(i)
		if end > start {
			dst = appendLong(dst, end-start)
			for j := start; j < end; j++ {
				dst = item(dst, int(j))
			}
		}
		return append(dst, 0)
	}
}
