package merge

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiver-ingest/quiver/writers"
)

// KeyEncoder encodes the key columns of record batches into compact byte
// strings, one per row, suitable as hash-map keys.
//
// Format: the concatenation, in key-column order, of each column's value:
//
//   - signed integers, date32, date64, time32, time64, timestamp (any unit)
//     and duration: 8 bytes, big-endian, sign bit flipped (so int32 and int64
//     columns of equal values encode alike, and byte order is numeric order);
//   - unsigned integers: 8 bytes, big-endian;
//   - bool: 1 byte, 0 or 1;
//   - decimal128: 16 bytes, big-endian two's complement with the sign bit
//     flipped (the scale is not encoded: it is fixed by the column type);
//   - fixed_size_binary(n): the n bytes;
//   - utf8, large_utf8, string_view, binary, large_binary, binary_view: the
//     byte length as a uvarint, then the bytes (so a utf8 column and a
//     large_utf8 or binary column of equal bytes encode alike).
//
// Every value is self-delimiting given the column types, so for one list of
// key types distinct key tuples have distinct encodings. Encodings are
// deterministic: they depend on the values only, never on buffer layout,
// array offsets or allocation. Use [KeyEncoder.SameEncoding] before matching
// keys encoded from two schemas.
//
// A KeyEncoder reuses one byte arena across calls to Encode and allocates
// nothing per row once its buffers have grown. It is not safe for
// concurrent use.
type KeyEncoder struct {
	names []string
	cols  []int // column index of each key in the schema
	kinds []keyKind
	width []int // bytes of a fixed-width kind; fixed_size_binary's n

	arena []byte
	offs  []int // len n+1: row i is arena[offs[i]:offs[i+1]]
	cur   []int // write cursor per row during Encode
}

type keyKind uint8

const (
	kindSigned keyKind = iota
	kindUnsigned
	kindBool
	kindDecimal128
	kindFixedBinary
	kindBytes
)

// NewKeyEncoder returns an encoder for the columns named keys of schema.
// keys must be non-empty, without duplicates, name existing columns of a
// supported type and no metadata column; otherwise the error wraps
// writers.ErrInvalid.
func NewKeyEncoder(schema *arrow.Schema, keys []string) (*KeyEncoder, error) {
	if len(keys) == 0 {
		return nil, writers.Errorf(writers.ErrInvalid, "merge: no key columns; configure at least one merge key")
	}
	e := &KeyEncoder{names: slices.Clone(keys)}
	for i, name := range keys {
		if slices.Contains(keys[:i], name) {
			return nil, writers.Errorf(writers.ErrInvalid, "merge: key column %q is listed twice; list each key column once", name)
		}
		if IsMetadataColumn(name) {
			return nil, writers.Errorf(writers.ErrInvalid, "merge: key column %q is a changelog metadata column; key on data columns", name)
		}
		idx := schema.FieldIndices(name)
		if len(idx) == 0 {
			return nil, writers.Errorf(writers.ErrInvalid, "merge: key column %q is not in the schema; send it or fix the configured keys", name)
		}
		if len(idx) > 1 {
			return nil, writers.Errorf(writers.ErrInvalid, "merge: key column %q appears %d times in the schema; column names must be unique", name, len(idx))
		}
		kind, width, ok := keyKindOf(schema.Field(idx[0]).Type)
		if !ok {
			return nil, writers.Errorf(writers.ErrInvalid, "merge: key column %q has type %s, which cannot be a key; use an integer, string, binary, date, timestamp, decimal128 or bool column", name, schema.Field(idx[0]).Type)
		}
		e.cols = append(e.cols, idx[0])
		e.kinds = append(e.kinds, kind)
		e.width = append(e.width, width)
	}
	return e, nil
}

func keyKindOf(t arrow.DataType) (keyKind, int, bool) {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.DATE32, arrow.DATE64, arrow.TIME32, arrow.TIME64, arrow.TIMESTAMP, arrow.DURATION:
		return kindSigned, 8, true
	case arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return kindUnsigned, 8, true
	case arrow.BOOL:
		return kindBool, 1, true
	case arrow.DECIMAL128:
		return kindDecimal128, 16, true
	case arrow.FIXED_SIZE_BINARY:
		return kindFixedBinary, t.(*arrow.FixedSizeBinaryType).ByteWidth, true
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW, arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW:
		return kindBytes, 0, true
	}
	return 0, 0, false
}

// Keys returns the key column names, in encoding order.
func (e *KeyEncoder) Keys() []string { return slices.Clone(e.names) }

// Columns returns the schema index of each key column, in encoding order.
func (e *KeyEncoder) Columns() []int { return slices.Clone(e.cols) }

// SameEncoding returns nil when o encodes equal key values to equal bytes,
// which holds when both have the same key names and each key column pair is
// of the same family (see the format on KeyEncoder; fixed_size_binary also
// needs equal widths). Otherwise the error wraps writers.ErrInvalid and names
// the column.
func (e *KeyEncoder) SameEncoding(o *KeyEncoder) error {
	if !slices.Equal(e.names, o.names) {
		return writers.Errorf(writers.ErrInvalid, "merge: key columns %q and %q differ; use the same merge keys on both sides", e.names, o.names)
	}
	for i := range e.kinds {
		if e.kinds[i] != o.kinds[i] || e.width[i] != o.width[i] {
			return writers.Errorf(writers.ErrInvalid, "merge: key column %q has incompatible types on the two sides; cast it to the target's type", e.names[i])
		}
	}
	return nil
}

// Encode encodes the key of every row of rec, which must have the key
// columns at the indices the encoder was built for (the same schema, or one
// of equal layout). rec is borrowed. The keys are valid until the next
// Encode. A null key value is a *RowError naming the row and the column
// (StreamRow == Row); then no key is valid.
func (e *KeyEncoder) Encode(rec arrow.RecordBatch) error {
	cols := make([]arrow.Array, 0, 4)
	for _, c := range e.cols {
		cols = append(cols, rec.Column(c))
	}
	return e.EncodeColumns(cols, int(rec.NumRows()))
}

// EncodeColumns is Encode over the key arrays themselves, in key order (for
// readers that load only the key columns). Every array must have n rows and
// the type the encoder was built for.
func (e *KeyEncoder) EncodeColumns(cols []arrow.Array, n int) error {
	if len(cols) != len(e.cols) {
		return writers.Errorf(writers.ErrInvalid, "merge: got %d key columns, want %d (%q)", len(cols), len(e.cols), e.names)
	}
	for k, col := range cols {
		if col.Len() != n {
			return writers.Errorf(writers.ErrInvalid, "merge: key column %q has %d rows, want %d", e.names[k], col.Len(), n)
		}
		if kind, width, ok := keyKindOf(col.DataType()); !ok || kind != e.kinds[k] || width != e.width[k] {
			return writers.Errorf(writers.ErrInvalid, "merge: key column %q has type %s, unlike the schema the encoder was built for", e.names[k], col.DataType())
		}
		if col.NullN() > 0 {
			for i := range n {
				if col.IsNull(i) {
					return &RowError{Row: i, StreamRow: int64(i), Column: e.names[k],
						Reason: "key value is null; merge keys must be non-null"}
				}
			}
		}
	}
	e.layout(cols, n)
	for k, col := range cols {
		e.encodeColumn(k, col)
	}
	return nil
}

// layout sizes the arena and sets offs and the per-row write cursors.
func (e *KeyEncoder) layout(cols []arrow.Array, n int) {
	fixed := 0
	for k, kind := range e.kinds {
		if kind != kindBytes {
			fixed += e.width[k]
		}
	}
	e.offs = resize(e.offs, n+1)
	e.cur = resize(e.cur, n)
	for i := range e.offs {
		e.offs[i] = i * fixed
	}
	for k, col := range cols {
		if e.kinds[k] != kindBytes {
			continue
		}
		lens := col.(interface{ ValueLen(int) int })
		// Accumulate each row's extra bytes in cur, then shift offs.
		for i := range n {
			l := lens.ValueLen(i)
			e.cur[i] = uvarintLen(l) + l
		}
		extra := 0
		for i := range n {
			extra += e.cur[i]
			e.offs[i+1] += extra
		}
	}
	copy(e.cur, e.offs[:n])
	e.arena = resize(e.arena, e.offs[n])
}

// encodeColumn appends key column k of every row at the row's cursor.
func (e *KeyEncoder) encodeColumn(k int, col arrow.Array) {
	switch c := col.(type) {
	case *array.Int8:
		putSigned(e, c.Int8Values())
	case *array.Int16:
		putSigned(e, c.Int16Values())
	case *array.Int32:
		putSigned(e, c.Int32Values())
	case *array.Int64:
		putSigned(e, c.Int64Values())
	case *array.Date32:
		putSigned(e, c.Date32Values())
	case *array.Date64:
		putSigned(e, c.Date64Values())
	case *array.Time32:
		putSigned(e, c.Time32Values())
	case *array.Time64:
		putSigned(e, c.Time64Values())
	case *array.Timestamp:
		putSigned(e, c.TimestampValues())
	case *array.Duration:
		putSigned(e, c.DurationValues())
	case *array.Uint8:
		putUnsigned(e, c.Uint8Values())
	case *array.Uint16:
		putUnsigned(e, c.Uint16Values())
	case *array.Uint32:
		putUnsigned(e, c.Uint32Values())
	case *array.Uint64:
		putUnsigned(e, c.Uint64Values())
	case *array.Boolean:
		for i := range e.cur {
			if c.Value(i) {
				e.arena[e.cur[i]] = 1
			} else {
				e.arena[e.cur[i]] = 0
			}
			e.cur[i]++
		}
	case *array.Decimal128:
		for i, v := range c.Values() {
			p := e.cur[i]
			binary.BigEndian.PutUint64(e.arena[p:], uint64(v.HighBits())^signBit)
			binary.BigEndian.PutUint64(e.arena[p+8:], v.LowBits())
			e.cur[i] = p + 16
		}
	case *array.FixedSizeBinary:
		for i := range e.cur {
			e.cur[i] += copy(e.arena[e.cur[i]:], c.Value(i))
		}
	case interface{ Value(int) string }:
		for i := range e.cur {
			e.cur[i] = putBytes(e.arena, e.cur[i], c.Value(i))
		}
	case interface{ Value(int) []byte }:
		for i := range e.cur {
			e.cur[i] = putBytes(e.arena, e.cur[i], c.Value(i))
		}
	default:
		// NewKeyEncoder and EncodeColumns admit only the types above.
		panic(fmt.Sprintf("merge: key column %q: unhandled array %T", e.names[k], col))
	}
}

const signBit = 1 << 63

type signed interface {
	~int8 | ~int16 | ~int32 | ~int64
}

type unsigned interface {
	~uint8 | ~uint16 | ~uint32 | ~uint64
}

func putSigned[T signed](e *KeyEncoder, vals []T) {
	for i, v := range vals {
		p := e.cur[i]
		binary.BigEndian.PutUint64(e.arena[p:p+8], uint64(int64(v))^signBit)
		e.cur[i] = p + 8
	}
}

func putUnsigned[T unsigned](e *KeyEncoder, vals []T) {
	for i, v := range vals {
		p := e.cur[i]
		binary.BigEndian.PutUint64(e.arena[p:p+8], uint64(v))
		e.cur[i] = p + 8
	}
}

func putBytes[T string | []byte](arena []byte, p int, v T) int {
	p += binary.PutUvarint(arena[p:], uint64(len(v)))
	return p + copy(arena[p:], v)
}

func uvarintLen(l int) int {
	n := 1
	for ; l >= 0x80; l >>= 7 {
		n++
	}
	return n
}

// Len returns the number of rows of the last Encode.
func (e *KeyEncoder) Len() int { return len(e.cur) }

// Key returns the encoded key of row i of the last Encode. The slice aliases
// the encoder's arena: it is valid until the next Encode and must not be
// modified; copy it to keep it (KeySet.Add copies).
func (e *KeyEncoder) Key(i int) []byte { return e.arena[e.offs[i]:e.offs[i+1]:e.offs[i+1]] }
