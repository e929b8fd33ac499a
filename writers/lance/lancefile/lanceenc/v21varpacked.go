package lanceenc

import (
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodings21pb"
)

// Variable packed structs (format 2.2): a packed struct with a
// variable-width field is one full-zip column whose values are whole rows,
// each the struct's fields one after the other: a fixed-width field's
// bytes, a variable-width one's length (32 bits for utf8 and binary, 64
// for their large kinds) and bytes, a nested struct's row as a 32-bit
// length and bytes. Quiver reads the rows as binary values
// (checkVariablePacked vouches for their encoding) and splits them by the
// struct's Arrow type (unpackVarStruct), for top-level columns.

// checkVariablePacked accepts the encodings of a variable packed struct's
// fields that leave each field's bytes as they are in the row (flat,
// variable, nested variable packed); compressed fields are refused.
func checkVariablePacked(v *encodings21pb.VariablePackedStruct, depth int) error {
	if err := checkDepth(depth); err != nil {
		return err
	}
	for i, f := range v.GetFields() {
		switch c := f.GetValue().GetCompression().(type) {
		case *encodings21pb.CompressiveEncoding_Flat:
			if f.GetBitsPerValue() != c.Flat.GetBitsPerValue() || c.Flat.GetBitsPerValue()%8 != 0 {
				return fmt.Errorf("packed struct field %d of %d bits stored as %d", i, c.Flat.GetBitsPerValue(), f.GetBitsPerValue())
			}
		case *encodings21pb.CompressiveEncoding_Variable:
		case *encodings21pb.CompressiveEncoding_VariablePackedStruct:
			if err := checkVariablePacked(c.VariablePackedStruct, depth+1); err != nil {
				return err
			}
		default:
			return fmt.Errorf("packed struct field %d compressed as %T is not supported", i, c)
		}
		if l := f.GetBitsPerLength(); l != 0 && l != 32 && l != 64 {
			return fmt.Errorf("packed struct field %d with %d-bit lengths", i, l)
		}
	}
	return nil
}

// HasVariableField reports whether st has a field that is not fixed-width.
func HasVariableField(st *arrow.StructType) bool {
	for _, f := range st.Fields() {
		if _, ok := f.Type.(arrow.FixedWidthDataType); !ok {
			return true
		}
	}
	return false
}

// packedField collects one field's values from the rows.
type packedField struct {
	dt    arrow.DataType
	fixed int            // bytes of a fixed-width field
	data  []byte         // fixed values, or variable bytes
	offs  []int64        // variable fields
	kids  []*packedField // struct fields
	rows  int
}

func newPackedField(dt arrow.DataType) (*packedField, error) {
	f := &packedField{dt: dt}
	switch t := dt.(type) {
	case *arrow.StructType:
		if t.NumFields() == 0 {
			return nil, fmt.Errorf("packed struct without fields")
		}
		for _, c := range t.Fields() {
			k, err := newPackedField(c.Type)
			if err != nil {
				return nil, err
			}
			f.kids = append(f.kids, k)
		}
	case arrow.BinaryDataType:
		f.offs = []int64{0}
	case arrow.FixedWidthDataType:
		if t.BitWidth()%8 != 0 || t.BitWidth() == 0 {
			return nil, fmt.Errorf("packed struct with a %s field is not supported", dt)
		}
		f.fixed = t.BitWidth() / 8
	default:
		return nil, fmt.Errorf("packed struct with a %s field is not supported", dt)
	}
	return f, nil
}

// lengthBytes is the size of a variable field's length prefix.
func (f *packedField) lengthBytes() int {
	switch f.dt.ID() {
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		return 8
	}
	return 4
}

// empty appends the value of a null or empty row.
func (f *packedField) empty() {
	f.rows++
	switch {
	case f.kids != nil:
		for _, k := range f.kids {
			k.empty()
		}
	case f.offs != nil:
		f.offs = append(f.offs, int64(len(f.data)))
	default:
		f.data = append(f.data, make([]byte, f.fixed)...)
	}
}

// row appends the struct row of f's fields held by b, which it must use up.
func (f *packedField) row(b []byte) error {
	f.rows++
	for _, k := range f.kids {
		n, err := k.value(b)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	if len(b) != 0 {
		return fmt.Errorf("packed struct row with %d bytes left over", len(b))
	}
	return nil
}

// value appends the field's value at the start of b and returns its size.
func (f *packedField) value(b []byte) (int, error) {
	if f.fixed > 0 {
		if len(b) < f.fixed {
			return 0, fmt.Errorf("packed struct row ends inside a %s field", f.dt)
		}
		f.rows++
		f.data = append(f.data, b[:f.fixed]...)
		return f.fixed, nil
	}
	lb := 4
	if f.kids == nil {
		lb = f.lengthBytes()
	}
	if len(b) < lb {
		return 0, fmt.Errorf("packed struct row ends inside a length")
	}
	var n uint64
	if lb == 4 {
		n = uint64(binary.LittleEndian.Uint32(b))
	} else {
		n = binary.LittleEndian.Uint64(b)
	}
	if n > uint64(len(b)-lb) {
		return 0, fmt.Errorf("packed struct value of %d bytes in a row of %d", n, len(b))
	}
	v := b[lb : lb+int(n)]
	if f.kids != nil {
		return lb + int(n), f.row(v)
	}
	f.rows++
	f.data = append(f.data, v...)
	f.offs = append(f.offs, int64(len(f.data)))
	return lb + int(n), nil
}

// array builds the field's values, null where valid (the struct's
// validity, nil when all valid) says so, as pylance reads them.
func (f *packedField) array(valid *memory.Buffer, nulls int) (arrow.ArrayData, error) {
	if f.kids != nil {
		kids := make([]arrow.ArrayData, len(f.kids))
		for i, k := range f.kids {
			var err error
			if kids[i], err = k.array(valid, nulls); err != nil {
				for _, d := range kids[:i] {
					d.Release()
				}
				return nil, err
			}
		}
		d := array.NewData(f.dt, f.rows, []*memory.Buffer{valid}, kids, nulls, 0)
		for _, k := range kids {
			k.Release()
		}
		return d, nil
	}
	if f.offs == nil {
		return array.NewData(f.dt, f.rows, []*memory.Buffer{valid, memory.NewBufferBytes(f.data)}, nil, nulls, 0), nil
	}
	ob := OffsetsBuffer(f.dt, f.offs)
	if ob == nil {
		return nil, fmt.Errorf("packed struct %s field of %d bytes does not fit 32-bit offsets", f.dt, len(f.data))
	}
	return array.NewData(f.dt, f.rows, []*memory.Buffer{valid, ob, memory.NewBufferBytes(f.data)}, nil, nulls, 0), nil
}

// emptyBytes is the memory a null or empty row adds: a fixed-width
// field's zeroes and a variable-width field's 64-bit offset and its 32-bit
// copy (offsetsBuffer), at every level.
func (f *packedField) emptyBytes() uint64 {
	n := uint64(f.fixed)
	if f.offs != nil {
		n += 8 + 4
	}
	for _, k := range f.kids {
		n += k.emptyBytes()
	}
	return n
}

// UnpackVarStruct splits rows (large binary, one packed row each, null
// where the struct is) into a struct array of type t. The values of null
// and empty rows, which the file does not hold, are charged to bud.
func UnpackVarStruct(bud *Budget, t *arrow.StructType, rows *array.LargeBinary) (arrow.Array, error) {
	f, err := newPackedField(t)
	if err != nil {
		return nil, err
	}
	var empty uint64
	for i := range rows.Len() {
		if rows.IsNull(i) || len(rows.Value(i)) == 0 {
			empty++
		}
	}
	if z, ok := mulSat(empty, f.emptyBytes()); !ok || bud.SpendUnbacked(z, "a packed struct page") != nil {
		return nil, fmt.Errorf("packed struct page of %d null or empty rows of %d bytes each exceeds the reader's limit", empty, f.emptyBytes())
	}
	for i := range rows.Len() {
		if rows.IsNull(i) || len(rows.Value(i)) == 0 {
			f.empty()
			continue
		}
		if err := f.row(rows.Value(i)); err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
	}
	var valid *memory.Buffer
	nulls := rows.NullN()
	if nulls > 0 {
		bits := make([]byte, bitutil.BytesForBits(int64(rows.Len())))
		for i := range rows.Len() {
			if rows.IsValid(i) {
				bitutil.SetBit(bits, i)
			}
		}
		valid = memory.NewBufferBytes(bits)
	}
	d, err := f.array(valid, nulls)
	if err != nil {
		return nil, err
	}
	defer d.Release()
	return array.MakeFromData(d), nil
}
