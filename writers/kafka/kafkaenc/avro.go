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
	switch c := arr.(type) {
	case *array.Boolean:
		return func(dst []byte, i int) []byte {
			if c.Value(i) {
				return append(dst, 1)
			}
			return append(dst, 0)
		}, nil
	case *array.Int8:
		return func(dst []byte, i int) []byte { return appendLong(dst, int64(c.Value(i))) }, nil
	case *array.Int16:
		return func(dst []byte, i int) []byte { return appendLong(dst, int64(c.Value(i))) }, nil
	case *array.Int32:
		return func(dst []byte, i int) []byte { return appendLong(dst, int64(c.Value(i))) }, nil
	case *array.Int64:
		return func(dst []byte, i int) []byte { return appendLong(dst, c.Value(i)) }, nil
	case *array.Uint8:
		return func(dst []byte, i int) []byte { return appendLong(dst, int64(c.Value(i))) }, nil
	case *array.Uint16:
		return func(dst []byte, i int) []byte { return appendLong(dst, int64(c.Value(i))) }, nil
	case *array.Uint32:
		return func(dst []byte, i int) []byte { return appendLong(dst, int64(c.Value(i))) }, nil
	case *array.Uint64:
		return func(dst []byte, i int) []byte {
			v := c.Value(i)
			if v > math.MaxInt64 && a.err == nil {
				a.err = fmt.Errorf("kafkaenc: column %q: %d does not fit an avro long", path, v)
			}
			return appendLong(dst, int64(v))
		}, nil
	case *array.Duration:
		return func(dst []byte, i int) []byte { return appendLong(dst, int64(c.Value(i))) }, nil
	case *array.Float32:
		return func(dst []byte, i int) []byte {
			return binary.LittleEndian.AppendUint32(dst, math.Float32bits(c.Value(i)))
		}, nil
	case *array.Float64:
		return func(dst []byte, i int) []byte {
			return binary.LittleEndian.AppendUint64(dst, math.Float64bits(c.Value(i)))
		}, nil
	case *array.String:
		return func(dst []byte, i int) []byte { return appendAvroString(dst, c.Value(i)) }, nil
	case *array.LargeString:
		return func(dst []byte, i int) []byte { return appendAvroString(dst, c.Value(i)) }, nil
	case *array.StringView:
		return func(dst []byte, i int) []byte { return appendAvroString(dst, c.Value(i)) }, nil
	case *array.Binary:
		return func(dst []byte, i int) []byte { return appendAvroBytes(dst, c.Value(i)) }, nil
	case *array.LargeBinary:
		return func(dst []byte, i int) []byte { return appendAvroBytes(dst, c.Value(i)) }, nil
	case *array.BinaryView:
		return func(dst []byte, i int) []byte { return appendAvroBytes(dst, c.Value(i)) }, nil
	case *array.FixedSizeBinary:
		return func(dst []byte, i int) []byte { return append(dst, c.Value(i)...) }, nil
	case *array.Date32:
		return func(dst []byte, i int) []byte { return appendLong(dst, int64(c.Value(i))) }, nil
	case *array.Date64:
		return func(dst []byte, i int) []byte { return appendLong(dst, floorDiv(int64(c.Value(i)), 86_400_000)) }, nil
	case *array.Timestamp:
		mul := int64(1)
		if c.DataType().(*arrow.TimestampType).Unit == arrow.Second {
			mul = 1000 // seconds are written as timestamp-millis
		}
		return func(dst []byte, i int) []byte { return appendLong(dst, int64(c.Value(i))*mul) }, nil
	case *array.Time32:
		mul := int64(1)
		if c.DataType().(*arrow.Time32Type).Unit == arrow.Second {
			mul = 1000
		}
		return func(dst []byte, i int) []byte { return appendLong(dst, int64(c.Value(i))*mul) }, nil
	case *array.Time64:
		div := int64(1)
		if c.DataType().(*arrow.Time64Type).Unit == arrow.Nanosecond {
			div = 1000 // time-micros: Avro has no nanosecond time of day
		}
		return func(dst []byte, i int) []byte { return appendLong(dst, int64(c.Value(i))/div) }, nil
	case *array.Decimal128:
		return func(dst []byte, i int) []byte {
			v := c.Value(i)
			var be [16]byte
			binary.BigEndian.PutUint64(be[:8], uint64(v.HighBits()))
			binary.BigEndian.PutUint64(be[8:], v.LowBits())
			return appendAvroBytes(dst, minimalTwos(be[:]))
		}, nil
	case *array.Decimal256:
		return func(dst []byte, i int) []byte {
			v := c.Value(i).Array() // little-endian words
			var be [32]byte
			for w := range 4 {
				binary.BigEndian.PutUint64(be[w*8:], v[3-w])
			}
			return appendAvroBytes(dst, minimalTwos(be[:]))
		}, nil
	case *array.Struct:
		st := c.DataType().(*arrow.StructType)
		fields := make([]appendFn, st.NumFields())
		for k, f := range st.Fields() {
			fn, err := a.bind(joinPath(path, f.Name), c.Field(k), f.Nullable)
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
	case *array.Map:
		keys, err := a.bindValue(path+".key", c.Keys())
		if err != nil {
			return nil, err
		}
		items, err := a.bind(path+".value", c.Items(), c.DataType().(*arrow.MapType).ItemField().Nullable)
		if err != nil {
			return nil, err
		}
		return func(dst []byte, i int) []byte {
			start, end := c.ValueOffsets(i)
			if end > start {
				dst = appendLong(dst, end-start)
				for j := start; j < end; j++ {
					dst = items(keys(dst, int(j)), int(j))
				}
			}
			return append(dst, 0)
		}, nil
	case array.ListLike:
		elem := c.DataType().(arrow.ListLikeType).ElemField()
		items, err := a.bind(path+".item", c.ListValues(), elem.Nullable)
		if err != nil {
			return nil, err
		}
		return func(dst []byte, i int) []byte {
			start, end := c.ValueOffsets(i)
			if end > start {
				dst = appendLong(dst, end-start)
				for j := start; j < end; j++ {
					dst = items(dst, int(j))
				}
			}
			return append(dst, 0)
		}, nil
	case *array.Dictionary:
		values, err := a.bindValue(path, c.Dictionary())
		if err != nil {
			return nil, err
		}
		return func(dst []byte, i int) []byte { return values(dst, c.GetValueIndex(i)) }, nil
	}
	return nil, unsupported("avro", path, arr.DataType())
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
