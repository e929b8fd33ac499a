package lanceformat

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Members of lance.encodings.ArrayEncoding (format 2.0) that Quiver reads;
// it writes all but dictionary.
const (
	aeFlat       protowire.Number = 1
	aeNullable   protowire.Number = 2
	aeFSL        protowire.Number = 3
	aeList       protowire.Number = 4
	aeStruct     protowire.Number = 5
	aeBinary     protowire.Number = 6
	aeDictionary protowire.Number = 7
)

// Members of lance.encodings.Nullable.
const (
	noNulls   protowire.Number = 1
	someNulls protowire.Number = 2
	allNulls  protowire.Number = 3
)

var aeNames = map[protowire.Number]string{
	8: "fsst", 9: "packed_struct", 10: "bitpacked", 11: "fixed_size_binary",
	12: "bitpacked_for_non_neg", 13: "constant", 14: "inline_bitpacking",
	15: "out_of_line_bitpacking", 16: "variable", 17: "packed_struct_fixed_width_mini_block",
	18: "block", 19: "rle", 20: "general_mini_block", 21: "byte_stream_split",
}

// maxEncodingDepth bounds the nesting of a decoded encoding tree, so that
// hostile input cannot recurse without end.
const maxEncodingDepth = 64

// aenc is a decoded (or to be encoded) lance.encodings.ArrayEncoding.
// Which fields are used depends on kind.
type aenc struct {
	kind protowire.Number

	bits       uint64 // flat: bits per value
	buf        uint32 // flat: page buffer index
	compressed bool   // flat: a Compression message is present (refused)

	null     protowire.Number // nullable: noNulls, someNulls or allNulls
	validity *aenc            // nullable some_nulls; binary/dictionary: unused
	values   *aenc            // nullable; fsl items; list offsets; binary/dictionary indices

	dim uint32 // fsl dimension

	nullAdj  uint64 // list null_offset_adjustment, binary null_adjustment
	numItems uint64 // list num_items, dictionary num_dictionary_items

	bytes *aenc // binary bytes; dictionary items
}

func flatEnc(bits uint64, buf int) *aenc { return &aenc{kind: aeFlat, bits: bits, buf: uint32(buf)} }

func nullableEnc(null protowire.Number, validity, values *aenc) *aenc {
	return &aenc{kind: aeNullable, null: null, validity: validity, values: values}
}

func (a *aenc) encode() pb {
	var inner pb
	switch a.kind {
	case aeFlat:
		inner.uint(1, a.bits)
		var buf pb
		buf.uint(1, uint64(a.buf))
		inner.msg(2, buf)
	case aeNullable:
		var n pb
		switch a.null {
		case noNulls:
			n.msg(1, a.values.encode())
		case someNulls:
			n.msg(1, a.validity.encode())
			n.msg(2, a.values.encode())
		}
		inner.msg(a.null, n)
	case aeFSL:
		inner.uint(1, uint64(a.dim))
		inner.msg(2, a.values.encode())
	case aeList:
		inner.msg(1, a.values.encode())
		inner.uint(2, a.nullAdj)
		inner.uint(3, a.numItems)
	case aeStruct:
	case aeBinary:
		inner.msg(1, a.values.encode())
		inner.msg(2, a.bytes.encode())
		inner.uint(3, a.nullAdj)
	}
	var b pb
	b.msg(a.kind, inner)
	return b
}

// decodeEncoding parses an ArrayEncoding. Members Quiver does not read
// are errors naming the encoding.
func decodeEncoding(msg []byte, depth int) (*aenc, error) {
	if depth > maxEncodingDepth {
		return nil, fmt.Errorf("encoding nested deeper than %d levels", maxEncodingDepth)
	}
	sub := func(b []byte) (*aenc, error) { return decodeEncoding(b, depth+1) }
	var a *aenc
	err := eachField(msg, func(f field) error {
		if err := f.wantType(protowire.BytesType); err != nil {
			return err
		}
		a = &aenc{kind: f.num}
		switch f.num {
		case aeFlat:
			return eachField(f.b, func(x field) error {
				switch x.num {
				case 1:
					a.bits = x.u
				case 2:
					return eachField(x.b, func(y field) error {
						switch {
						case y.num == 1:
							a.buf = uint32(y.u)
						case y.num == 2 && y.u != 0:
							return fmt.Errorf("flat buffer in column or file metadata is not supported")
						}
						return nil
					})
				case 3:
					a.compressed = true
				}
				return nil
			})
		case aeNullable:
			return eachField(f.b, func(x field) error {
				a.null = x.num
				return eachField(x.b, func(y field) error {
					var err error
					switch {
					case x.num == someNulls && y.num == 1:
						a.validity, err = sub(y.b)
					case y.num == 1 || (x.num == someNulls && y.num == 2):
						a.values, err = sub(y.b)
					}
					return err
				})
			})
		case aeFSL:
			return eachField(f.b, func(x field) error {
				var err error
				switch x.num {
				case 1:
					a.dim = uint32(x.u)
				case 2:
					a.values, err = sub(x.b)
				}
				return err
			})
		case aeList, aeBinary, aeDictionary:
			return eachField(f.b, func(x field) error {
				var err error
				switch {
				case x.num == 1:
					a.values, err = sub(x.b)
				case x.num == 2 && f.num == aeList:
					a.nullAdj = x.u
				case x.num == 2:
					a.bytes, err = sub(x.b)
				case x.num == 3 && f.num == aeList:
					a.numItems = x.u
				case x.num == 3 && f.num == aeBinary:
					a.nullAdj = x.u
				case x.num == 3:
					a.numItems = x.u
				}
				return err
			})
		case aeStruct:
			return nil
		}
		name := aeNames[f.num]
		if name == "" {
			name = fmt.Sprintf("#%d", f.num)
		}
		return fmt.Errorf("encoding %s is not supported by Quiver's Lance 2.0 reader", name)
	})
	if err != nil {
		return nil, err
	}
	if a == nil {
		return nil, fmt.Errorf("empty array encoding")
	}
	return a, nil
}
