package lancefile

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/quiver-ingest/quiver/writers/lance/lancefile/lanceenc"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodingspb"
)

// encKind is the member of lance.encodings.ArrayEncoding (format 2.0) an
// aenc stands for: the ones Quiver reads; it writes all but dictionary.
type encKind int

const (
	aeFlat encKind = iota + 1
	aeNullable
	aeFSL
	aeList
	aeStruct
	aeBinary
	aeDictionary
)

// nullability is the member of lance.encodings.Nullable an aenc holds.
type nullability int

const (
	noNulls nullability = iota + 1
	someNulls
	allNulls
)

// aenc is a decoded (or to be encoded) lance.encodings.ArrayEncoding.
// Which fields are used depends on kind.
type aenc struct {
	kind encKind

	bits       uint64 // flat: bits per value
	buf        uint32 // flat: page buffer index
	compressed bool   // flat: a Compression message is present (refused)

	null     nullability // nullable: noNulls, someNulls or allNulls
	validity *aenc       // nullable some_nulls; binary/dictionary: unused
	values   *aenc       // nullable; fsl items; list offsets; binary/dictionary indices

	dim uint32 // fsl dimension

	nullAdj  uint64 // list null_offset_adjustment, binary null_adjustment
	numItems uint64 // list num_items, dictionary num_dictionary_items

	bytes *aenc // binary bytes; dictionary items
}

func flatEnc(bits uint64, buf int) *aenc { return &aenc{kind: aeFlat, bits: bits, buf: uint32(buf)} }

func nullableEnc(null nullability, validity, values *aenc) *aenc {
	return &aenc{kind: aeNullable, null: null, validity: validity, values: values}
}

// toPB returns a as a message; nil stays nil.
func (a *aenc) toPB() *encodingspb.ArrayEncoding {
	if a == nil {
		return nil
	}
	e := &encodingspb.ArrayEncoding{}
	switch a.kind {
	case aeFlat:
		e.ArrayEncoding = &encodingspb.ArrayEncoding_Flat{Flat: &encodingspb.Flat{
			BitsPerValue: a.bits, Buffer: &encodingspb.Buffer{BufferIndex: a.buf}}}
	case aeNullable:
		n := &encodingspb.Nullable{}
		switch a.null {
		case noNulls:
			n.Nullability = &encodingspb.Nullable_NoNulls{NoNulls: &encodingspb.Nullable_NoNull{Values: a.values.toPB()}}
		case someNulls:
			n.Nullability = &encodingspb.Nullable_SomeNulls{SomeNulls: &encodingspb.Nullable_SomeNull{
				Validity: a.validity.toPB(), Values: a.values.toPB()}}
		case allNulls:
			n.Nullability = &encodingspb.Nullable_AllNulls{AllNulls: &encodingspb.Nullable_AllNull{}}
		}
		e.ArrayEncoding = &encodingspb.ArrayEncoding_Nullable{Nullable: n}
	case aeFSL:
		e.ArrayEncoding = &encodingspb.ArrayEncoding_FixedSizeList{FixedSizeList: &encodingspb.FixedSizeList{
			Dimension: a.dim, Items: a.values.toPB()}}
	case aeList:
		e.ArrayEncoding = &encodingspb.ArrayEncoding_List{List: &encodingspb.List{
			Offsets: a.values.toPB(), NullOffsetAdjustment: a.nullAdj, NumItems: a.numItems}}
	case aeStruct:
		e.ArrayEncoding = &encodingspb.ArrayEncoding_Struct{Struct: &encodingspb.SimpleStruct{}}
	case aeBinary:
		e.ArrayEncoding = &encodingspb.ArrayEncoding_Binary{Binary: &encodingspb.Binary{
			Indices: a.values.toPB(), Bytes: a.bytes.toPB(), NullAdjustment: a.nullAdj}}
	case aeDictionary:
		e.ArrayEncoding = &encodingspb.ArrayEncoding_Dictionary{Dictionary: &encodingspb.Dictionary{
			Indices: a.values.toPB(), Items: a.bytes.toPB(), NumDictionaryItems: uint32(a.numItems)}}
	}
	return e
}

// encode returns a's ArrayEncoding bytes.
func (a *aenc) encode() ([]byte, error) { return Marshal(a.toPB()) }

// decodeEncoding parses an ArrayEncoding. Members Quiver does not read
// are errors naming the encoding.
func decodeEncoding(msg []byte) (*aenc, error) {
	e := &encodingspb.ArrayEncoding{}
	if err := Unmarshal(msg, e); err != nil {
		return nil, err
	}
	return encOf(e, 0)
}

// encOf converts a decoded ArrayEncoding, depth levels down the tree. A
// missing child (nil) stays nil for the reader to refuse.
func encOf(e *encodingspb.ArrayEncoding, depth int) (*aenc, error) {
	if e == nil {
		return nil, nil
	}
	if depth > lanceenc.MaxEncodingDepth {
		return nil, fmt.Errorf("encoding nested deeper than %d levels", lanceenc.MaxEncodingDepth)
	}
	sub := func(c *encodingspb.ArrayEncoding) (*aenc, error) { return encOf(c, depth+1) }
	a := &aenc{}
	var err error
	switch x := e.ArrayEncoding.(type) {
	case *encodingspb.ArrayEncoding_Flat:
		a.kind, a.bits, a.compressed = aeFlat, x.Flat.GetBitsPerValue(), x.Flat.GetCompression() != nil
		a.buf = x.Flat.GetBuffer().GetBufferIndex()
		if x.Flat.GetBuffer().GetBufferType() != encodingspb.Buffer_page {
			return nil, fmt.Errorf("flat buffer in column or file metadata is not supported")
		}
	case *encodingspb.ArrayEncoding_Nullable:
		a.kind = aeNullable
		switch n := x.Nullable.GetNullability().(type) {
		case *encodingspb.Nullable_NoNulls:
			a.null = noNulls
			a.values, err = sub(n.NoNulls.GetValues())
		case *encodingspb.Nullable_SomeNulls:
			a.null = someNulls
			if a.validity, err = sub(n.SomeNulls.GetValidity()); err == nil {
				a.values, err = sub(n.SomeNulls.GetValues())
			}
		case *encodingspb.Nullable_AllNulls:
			a.null = allNulls
		}
	case *encodingspb.ArrayEncoding_FixedSizeList:
		a.kind, a.dim = aeFSL, x.FixedSizeList.GetDimension()
		a.values, err = sub(x.FixedSizeList.GetItems())
	case *encodingspb.ArrayEncoding_List:
		a.kind, a.nullAdj, a.numItems = aeList, x.List.GetNullOffsetAdjustment(), x.List.GetNumItems()
		a.values, err = sub(x.List.GetOffsets())
	case *encodingspb.ArrayEncoding_Struct:
		a.kind = aeStruct
	case *encodingspb.ArrayEncoding_Binary:
		a.kind, a.nullAdj = aeBinary, x.Binary.GetNullAdjustment()
		if a.values, err = sub(x.Binary.GetIndices()); err == nil {
			a.bytes, err = sub(x.Binary.GetBytes())
		}
	case *encodingspb.ArrayEncoding_Dictionary:
		a.kind, a.numItems = aeDictionary, uint64(x.Dictionary.GetNumDictionaryItems())
		if a.values, err = sub(x.Dictionary.GetIndices()); err == nil {
			a.bytes, err = sub(x.Dictionary.GetItems())
		}
	case nil:
		return nil, unknownEncoding(e)
	default:
		r := e.ProtoReflect()
		fd := r.WhichOneof(r.Descriptor().Oneofs().ByName("array_encoding"))
		return nil, fmt.Errorf("encoding %s is not supported by Quiver's Lance 2.0 reader", fd.Name())
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// unknownEncoding is the error of an ArrayEncoding with no member the
// pinned protos know: empty, or one newer than them.
func unknownEncoding(e *encodingspb.ArrayEncoding) error {
	if b := e.ProtoReflect().GetUnknown(); len(b) > 0 {
		if num, _, n := protowire.ConsumeField(b); n > 0 {
			return fmt.Errorf("encoding #%d is not supported by Quiver's Lance 2.0 reader", num)
		}
	}
	return fmt.Errorf("empty array encoding")
}
